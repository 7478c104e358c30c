"""``attn-explorer open FILE``: the window on the query, key and value of a tensor file.

The file's headers are read first, without Qt (``state/storage/tensor_files.py``): a file
the app cannot take is one line on stderr and exit status 2, before any window opens.
When the names do not say which array is which, the window asks (File ▸ Open tensors…'s
dialog).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()  # the GUI thread gets the GIL back quickly, as run_app does


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attn-explorer open",
        description="Open the window on your own query, key and value arrays: a .npz with "
        "q, k, v (or query, key, value), a .npy, or a .safetensors file.",
    )
    parser.add_argument("file", help="a .npz, .npy or .safetensors file")
    return parser


def open_window(path: str, errors: list[str]) -> MainWindow | None:
    """The window showing the tensors of ``path`` (asking which is which if it must), or
    None with the reason appended to ``errors``."""
    from attn_explorer.render.qt_app import qt_application
    from attn_explorer.ui.common.settings import APPLICATION, ORGANIZATION

    app = qt_application()
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APPLICATION)
    from attn_explorer.ui.window.main_window import MainWindow
    from attn_explorer.ui.window.open_tensors import open_tensors_path

    window = MainWindow(defer_plots=True)
    window.show()

    def remember(text: str, level: str) -> None:
        if level == "error":
            errors.append(text)

    window.session.events.message.connect(remember)
    window.files.ask_before_discard = False  # nothing of the user's is in the window yet
    opened = open_tensors_path(window.files, path, quiet=True)
    window.files.ask_before_discard = True
    window.session.events.message.disconnect(remember)
    if not opened:
        if not errors:
            errors.append(f"{path}: not opened")
        window.files.ask_before_discard = False
        window.close()
        return None
    return window


def run_open(argv: Sequence[str]) -> int:
    """The ``open`` sub-command (see the module docstring)."""
    from attn_explorer.cli.console import UserError
    from attn_explorer.state.storage.tensor_files import TensorFileError, open_tensor_file

    args = _parser().parse_args(argv)
    try:
        open_tensor_file(args.file)  # headers only: refused here, before Qt
    except TensorFileError as exc:
        raise UserError(str(exc)) from None
    from attn_explorer.render.qt_app import qt_application

    errors: list[str] = []
    window = open_window(args.file, errors)
    if window is None:
        raise UserError(errors[-1])
    return qt_application().exec()
