"""``python -m attn_explorer`` does what the ``attn-explorer`` command does."""

from attn_explorer.cli import main

raise SystemExit(main())
