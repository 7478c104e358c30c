"""Start the GUI: QApplication, the window, an optional session file or the last document."""

from __future__ import annotations

import sys
from pathlib import Path

from attn_explorer.render.qt_app import qt_application, use_offscreen_if_headless

__all__ = ["prepare_interpreter", "qt_application", "run_app", "use_offscreen_if_headless"]

#: The interpreter's thread switch interval while the window runs (s); Python's default is 5 ms.
SWITCH_INTERVAL = 0.001


def prepare_interpreter() -> None:
    """Process-wide settings the window wants, set once at the start (and by the tests).

    Every Qt call from the GUI thread releases and retakes the GIL; while a worker runs
    pure-Python code (the loop strategy) retaking it waits up to the switch interval.
    1 ms instead of Python's 5 ms keeps those waits from adding up to visible stalls.
    """
    sys.setswitchinterval(SWITCH_INTERVAL)


def run_app(session_path: str | None = None) -> int:
    """Open the window (on ``session_path``, else see ``FileCommands.start``); run the app."""
    # The Qt-free layers (numpy, compute, state) before any Qt: once PySide6 is imported,
    # every import passes through its Python import hook (shibokensupport's feature_import),
    # which cost numpy's and these modules' ~150 imports ~20 ms of the start-up.
    import attn_explorer.state.app_state
    import attn_explorer.state.views.figure  # noqa: F401  (the heatmap preview's)
    from attn_explorer.ui.common.settings import APPLICATION, ORGANIZATION

    prepare_interpreter()
    app = qt_application()
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APPLICATION)
    app.setDesktopFileName("io.github.attn_explorer.AttentionExplorer")
    from attn_explorer.ui.common.icons import app_icon
    from attn_explorer.ui.window.main_window import MainWindow

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
