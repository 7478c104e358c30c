"""``python -m attn_explorer`` does what the ``attn-explorer`` command does."""

from attn_explorer.cli.main import main

# Guarded: timing runs in spawned child processes, which import this module again.
if __name__ == "__main__":
    raise SystemExit(main())
