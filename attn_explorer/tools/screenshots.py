"""Screenshots of the real window for the README and the AppStream metainfo.

    python -m attn_explorer.tools.screenshots resources/screenshots/

Opens the main window offscreen at 1280 × 800, sets up each shot's view (the same set-ups
the layout check uses), lets the debounced recompute and the workers finish, and saves a
grab per shot. Settings and the
autosave go to a throw-away folder, so the shots never depend on (or change) your own.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

SIZE = (1280, 800)  # a common laptop / projector size: what most users and classrooms see


@dataclass(frozen=True)
class Shot:
    """One screenshot: a file name, the view it shows (see ``layout_check.SETUPS``) and a
    caption for the README."""

    filename: str
    view: str
    caption: str


SHOTS = (
    Shot("main-window.png", "main", "The worked example: Q, K, the score grid and its heatmap"),
    Shot(
        "stepper.png",
        "stepper",
        "Stepping the loop in predict mode: the cell, the line of code and its locals",
    ),
    Shot("four-heads.png", "heads", "Sixteen heads of seeded random numbers, one shared scale"),
    Shot("sweep.png", "sweep", "Timing: the three strategies, and how they grow with T"),
    Shot("model-view.png", "model", "A BERT-family model: every layer and head, one enlarged"),
)


def take(
    folder: Path,
    shots: Sequence[Shot] = SHOTS,
    size: tuple[int, int] = SIZE,
    report: Callable[[str], None] = print,
) -> list[Path]:
    """Save one PNG per shot into ``folder``; returns the paths written."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from attn_explorer.cli.self_test import close_quietly, settle
    from attn_explorer.render.qt_app import qt_application
    from attn_explorer.tools.layout_check import SETUPS

    app = qt_application()
    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()  # as the app's start does

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in shots:
        window = MainWindow()
        try:
            window.setMinimumSize(0, 0)
            window.resize(*size)
            window.show()
            settle(app)
            SETUPS[shot.view](window)
            settle(app, 1.5)
            image = window.grab().toImage()
            got = (image.width(), image.height())
            if got != size:
                report(f"note: asked for {size[0]}×{size[1]}, the window is {got[0]}×{got[1]}")
            target = folder / shot.filename
            if not image.save(str(target)):  # the .png name gives the format
                raise OSError(f"cannot write {target}")
            written.append(target)
            report(f"wrote {target} ({image.width()}×{image.height()}): {shot.caption}")
        finally:
            close_quietly(window)
            settle(app, 0.05)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn_explorer.tools.screenshots",
        description="Save screenshots of the real window (offscreen) for the README.",
    )
    parser.add_argument(
        "folder", type=Path, help="where to write the PNGs, e.g. resources/screenshots/"
    )
    parser.add_argument(
        "--only", action="append", choices=[s.filename for s in SHOTS], help="take just this shot"
    )
    args = parser.parse_args(argv)
    shots = [s for s in SHOTS if not args.only or s.filename in args.only]
    from attn_explorer.cli.self_test import private_app_folders

    with (
        tempfile.TemporaryDirectory(prefix="attn-explorer-screenshots-") as scratch,
        private_app_folders(Path(scratch)),
    ):
        take(args.folder, shots)
    return 0


if __name__ == "__main__":
    sys.exit(main())


class DockWindow:
    """The real window with the Model dock open, for the docs' screenshot scripts.

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
