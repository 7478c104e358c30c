"""``attn-explorer --self-test``: prove an installation or a bundle can really run the app.

Opens the main window offscreen on the worked example, checks its scores, exports one
heatmap PNG to a temporary folder and checks the file decodes and is not blank. Prints
``self-test ok`` and returns 0, or ``self-test FAILED: <reason>`` and returns 1. Used by
tests/test_bundle.py on the PyInstaller bundle, where a missing Qt plugin, data file or
hidden import shows up here rather than on a user's desktop. Settings and the autosave go
to a throw-away folder, so running it never changes the user's last session.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when the test runs: a broken install fails with a reason
    from PySide6.QtCore import QCoreApplication

    from attn_explorer.state.session import Session
    from attn_explorer.ui.window.main_window import MainWindow

WORKED_SCORES = [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]]

#: How long to let timers (debounced recompute, workers) run before checking results.
SETTLE_SECONDS = 0.5

#: How long the window may take to show a result (debounce, worker thread, a slow CI machine).
WINDOW_RESULT_SECONDS = 10.0

#: Settings and autosave go to a throw-away folder (see attn_explorer/ui/common/settings.py).
PRIVATE_FOLDERS = {"ATTN_EXPLORER_SETTINGS_DIR": "settings", "ATTN_EXPLORER_DATA_DIR": "data"}

#: A real heatmap has a colour map, labels and a colour bar; a blank image has one or two colours.
MIN_DISTINCT_COLOURS = 8


class SelfTestError(Exception):
    """One check failed; the message is the reason shown to the user."""


def settle(app: QCoreApplication, seconds: float = SETTLE_SECONDS) -> None:
    """Run the event loop for ``seconds`` so debounce timers and worker signals get through."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)


def _check_resources() -> None:
    """The shipped icons are reachable through importlib.resources (a bundle's data files)."""
    from PySide6.QtGui import QImage

    from attn_explorer.state.storage.resources import resource

    icon = resource("icons", "attn-explorer-256.png")
    if not icon.is_file():
        raise SelfTestError(f"resource missing: {icon}")
    image = QImage()
    if not image.loadFromData(icon.read_bytes(), "PNG") or image.width() != 256:
        raise SelfTestError("resource icons/attn-explorer-256.png does not decode as 256 px PNG")


def _load_worked_example(window: MainWindow) -> Session:
    """The window's session, set to the worked example (whatever the window started with)."""
    from attn_explorer.state.presets import worked_example

    session = window.session
    preset = worked_example()
    session.load(preset.snapshot, preset.options, text="self-test")
    return session


def _check_scores(app: QCoreApplication, window: MainWindow, session: Session) -> str:
    """The session's scores, and the numbers the window's score grid shows, are the worked S."""
    import numpy as np

    scores = np.asarray(window.state.results.compute_now().scores)  # (B, H, T, T)
    if scores.shape != (1, 1, 3, 3):
        raise SelfTestError(f"scores have shape {scores.shape}, expected (1, 1, 3, 3)")
    if not np.allclose(scores[0, 0], WORKED_SCORES):
        raise SelfTestError(f"scores {scores[0, 0].tolist()} != {WORKED_SCORES}")
    grid = window.score_grid

    def shown() -> bool:
        try:  # the numbers the user reads in the window's score grid
            numbers = [[float(cell) for cell in row] for row in grid.text_grid()]
        except ValueError:
            return False
        return numbers == WORKED_SCORES

    # The window recomputes after a debounce, possibly on a worker thread.
    deadline = time.monotonic() + WINDOW_RESULT_SECONDS
    while not shown():
        if time.monotonic() > deadline:
            raise SelfTestError(
                f"the window did not show the worked scores in {WINDOW_RESULT_SECONDS:.0f} s"
            )
        settle(app, 0.05)
    return "session and window"


def _export_png(window: MainWindow, session: Session, folder: Path) -> tuple[Path, str]:
    """One heatmap PNG in ``folder``, by the exporter if it exists, else a grab of the window."""
    # Fall back only when the exporter is absent, never when it is present but broken.
    if importlib.util.find_spec("attn_explorer.render.figure") is not None:
        from attn_explorer.render.figure import export_heatmaps

        export_heatmaps(window.state, folder, heads="current", fmt="png")
        how = "export_heatmaps"
    else:
        if not window.grab().save(str(folder / "window.png")):
            raise SelfTestError("could not save a grab of the window")
        how = "window grab"
    pngs = sorted(folder.rglob("*.png"))
    if not pngs:
        raise SelfTestError(f"{how} wrote no PNG into {folder}")
    return pngs[0], how


def _check_timing_process() -> str:
    """Timing runs in a spawned child process: check one starts and answers (bundles too)."""
    from attn_explorer.compute.background import in_process
    from attn_explorer.compute.timing import time_strategies

    worked = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    job = in_process(time_strategies, query=worked, key=worked)
    try:
        results = job(lambda fraction, text: None, lambda: False)
    except Exception as exc:
        raise SelfTestError(f"timing in a child process failed: {exc}") from exc
    if set(results) != {"loop", "matmul", "batched", "tiled"}:
        raise SelfTestError(f"timing in a child process returned {sorted(results)}")
    return "timing: loop, matmul, batched and tiled measured in a child process"


def _check_png(path: Path) -> str:
    """The PNG decodes and shows more than a few colours; returns a one-line description."""
    from PySide6.QtGui import QImage

    image = QImage(str(path))
    if image.isNull():
        raise SelfTestError(f"{path.name} does not decode as an image")
    if image.width() < 32 or image.height() < 32:
        raise SelfTestError(f"{path.name} is only {image.width()}×{image.height()} px")
    colours = set()
    step_x, step_y = max(1, image.width() // 200), max(1, image.height() // 200)
    for y in range(0, image.height(), step_y):
        for x in range(0, image.width(), step_x):
            colours.add(image.pixel(x, y))
        if len(colours) > MIN_DISTINCT_COLOURS:
            break
    if len(colours) <= MIN_DISTINCT_COLOURS:
        raise SelfTestError(f"{path.name} looks blank ({len(colours)} distinct colours)")
    return f"{path.name} {image.width()}×{image.height()} px, >{MIN_DISTINCT_COLOURS} colours"


@contextlib.contextmanager
def private_app_folders(folder: Path) -> Iterator[None]:
    """Point settings and autosave at ``folder``, so the self-test never touches the user's."""
    saved = {name: os.environ.get(name) for name in PRIVATE_FOLDERS}
    try:
        for name, sub in PRIVATE_FOLDERS.items():
            os.environ[name] = str(folder / sub)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(folder: Path) -> list[str]:
    """All checks in order; returns progress lines, raises SelfTestError on the first failure."""

    from attn_explorer import __version__
    from attn_explorer.render.qt_app import qt_application

    app = qt_application()
    lines = [f"attn-explorer {__version__}, Qt platform {app.platformName()}"]
    _check_resources()
    lines.append("resources: icons found through importlib.resources")

    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()  # as the app's start does
    window = MainWindow()
    try:
        window.show()
        settle(app)
        session = _load_worked_example(window)
        settle(app)
        where = _check_scores(app, window, session)
        lines.append(f"worked example: S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]] ({where})")
        export = folder / "export"
        export.mkdir()
        png, how = _export_png(window, session, export)
        lines.append(f"{how}: {_check_png(png)}")
        lines.append(_check_timing_process())
    finally:
        close_quietly(window)
        settle(app, 0.05)
    return lines


def close_quietly(window: MainWindow) -> None:
    """Close ``window`` without a "save changes?" dialog: its edits are the self-test's own."""
    window.files.ask_before_discard = False
    window.session.mark_saved()
    window.close()
    window.deleteLater()


def run_self_test() -> int:
    """Open the window offscreen, check scores and an exported PNG; 0 if all is well."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        with (
            tempfile.TemporaryDirectory(prefix="attn-explorer-self-test-") as folder,
            private_app_folders(Path(folder)),
        ):
            for line in _run(Path(folder)):
                print(f"  {line}")
    except SelfTestError as exc:
        print(f"self-test FAILED: {exc}")
        return 1
    except Exception as exc:  # anything else is a broken install: say what, keep the trace
        traceback.print_exc(file=sys.stderr)
        print(f"self-test FAILED: {type(exc).__name__}: {exc}")
        return 1
    print("self-test ok")
    sys.stdout.flush()
    return 0
