"""Entry script of the PyInstaller bundle: the ``attn-explorer`` executable runs the CLI.

A separate file (rather than attn_explorer/__main__.py) because PyInstaller runs its entry
script as ``__main__`` outside the package, where relative imports would fail.
"""

import sys

from attn_explorer.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
