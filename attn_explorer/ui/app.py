"""Start the GUI: QApplication, the window, an optional session file or the autosave."""

from __future__ import annotations

import sys
from pathlib import Path


def run_app(session_path: str | None = None) -> int:
    """Open the window (on ``session_path`` or the autosaved last session); run the event loop."""
    from PySide6.QtWidgets import QApplication

    from attn_explorer.ui.settings import APPLICATION, ORGANIZATION

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APPLICATION)
    app.setDesktopFileName("io.github.attn_explorer.AttentionExplorer")
    from attn_explorer.ui import menus
    from attn_explorer.ui.icons import app_icon
    from attn_explorer.ui.main_window import MainWindow

    app.setWindowIcon(app_icon())
    window = MainWindow(defer_plots=True)
    if session_path is not None:
        if not Path(session_path).exists():
            print(f"attn-explorer: error: {session_path}: no such file", file=sys.stderr)
            return 2
        if not menus.open_path(window, session_path):
            message = window.statusBar().currentMessage()
            print(f"attn-explorer: error: {message}", file=sys.stderr)
            return 2
    else:
        restore_autosave(window)
    window.show()
    return app.exec()


def restore_autosave(window: object) -> bool:
    """Reopen the last session from the autosave, if there is a readable one."""
    from attn_explorer.state.io import SessionFileError, load_session
    from attn_explorer.ui import menus

    path = menus.autosave_path()
    if not path.exists():
        return False
    try:
        loaded = load_session(path)
    except SessionFileError as exc:
        window.statusBar().showMessage(f"The autosaved session could not be restored: {exc}")  # type: ignore[attr-defined]
        return False
    session = window.session  # type: ignore[attr-defined]
    if session.load(loaded.snapshot, loaded.options, "restore autosave"):
        session.name = loaded.name
        session.clear_history()
        session.mark_saved(None)
        window.statusBar().showMessage(  # type: ignore[attr-defined]
            "Restored your last session (autosaved). File ▸ New session starts again.", 8000
        )
        return True
    return False
