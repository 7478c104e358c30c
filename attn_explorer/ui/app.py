"""Start the GUI: QApplication, the window, an optional session file or the last document."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication


def use_offscreen_if_headless() -> None:
    """Draw offscreen when Linux has no display (exports, the self-test), unless told otherwise."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def qt_application() -> QApplication:
    """The running QApplication, or a new one (widgets need a QApplication, not a core one)."""
    from PySide6.QtWidgets import QApplication

    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    if existing is not None:
        raise RuntimeError("a QCoreApplication without widgets is running; cannot open windows")
    return QApplication(sys.argv[:1])


def run_app(session_path: str | None = None) -> int:
    """Open the window (on ``session_path``, else see ``FileCommands.start``); run the app."""
    # The Qt-free layers (numpy, compute, state) before any Qt: once PySide6 is imported,
    # every import passes through its Python import hook (shibokensupport's feature_import),
    # which cost numpy's and these modules' ~150 imports ~20 ms of the start-up.
    import attn_explorer.state.app_state
    import attn_explorer.state.figure  # noqa: F401  (the heatmap preview's)
    from attn_explorer.ui.settings import APPLICATION, ORGANIZATION

    app = qt_application()
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APPLICATION)
    app.setDesktopFileName("io.github.attn_explorer.AttentionExplorer")
    from attn_explorer.ui.icons import app_icon
    from attn_explorer.ui.main_window import MainWindow

    app.setWindowIcon(app_icon())
    window = MainWindow(defer_plots=True)
    if session_path is not None:
        if not Path(session_path).exists():
            print(f"attn-explorer: error: {session_path}: no such file", file=sys.stderr)
            return 2
        errors: list[str] = []

        def remember(text: str, level: str) -> None:
            if level == "error":
                errors.append(text)

        window.session.events.message.connect(remember)
        if window.files.start(session_path) != "opened":
            print(
                f"attn-explorer: error: {errors[-1] if errors else session_path}", file=sys.stderr
            )
            return 2
    else:
        window.files.start()  # recovered unsaved work, the last document, or the worked example
    window.show()
    return app.exec()
