"""Screenshots of the real window for the README and the AppStream metainfo.

    python -m attn_explorer.tools.screenshots resources/screenshots/

Opens the main window offscreen at 1400 × 900, loads each shot's preset, lets the
debounced recompute and the workers finish, and saves a grab per shot. Settings and the
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_explorer.state.session import Session

SIZE = (1400, 900)


@dataclass(frozen=True)
class Shot:
    """One screenshot: a file name, the preset it shows and a caption for the README."""

    filename: str
    preset: str
    caption: str
    options: tuple[tuple[str, object], ...] = ()


SHOTS = (
    Shot("main-window.png", "worked", "The worked example: Q, K, the score grid and its heatmap"),
    Shot(
        "four-heads.png",
        "random",
        "Four heads of seeded random numbers, softmax weights",
        (("stage", "weights"),),
    ),
)


def _apply(session: Session, shot: Shot) -> None:
    from attn_explorer.state.presets import preset

    chosen = preset(shot.preset)
    session.load(chosen.snapshot, chosen.options, text=f"screenshot {shot.preset}")
    for name, value in shot.options:
        session.set_option(name, value)


def take(
    folder: Path,
    shots: Sequence[Shot] = SHOTS,
    size: tuple[int, int] = SIZE,
    report: Callable[[str], None] = print,
) -> list[Path]:
    """Save one PNG per shot into ``folder``; returns the paths written."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from attn_explorer.tools.self_test import close_quietly, settle
    from attn_explorer.ui.app import qt_application

    app = qt_application()
    from attn_explorer.ui.main_window import MainWindow

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in shots:
        window = MainWindow()
        try:
            window.resize(*size)
            window.show()
            settle(app)
            _apply(window.session, shot)
            settle(app, 1.0)
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
    from attn_explorer.tools.self_test import private_app_folders

    with (
        tempfile.TemporaryDirectory(prefix="attn-explorer-screenshots-") as scratch,
        private_app_folders(Path(scratch)),
    ):
        take(args.folder, shots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
