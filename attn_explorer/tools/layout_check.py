"""Check the real window's layout on a screen of a given size, and keep a screenshot of it.

    QT_QPA_PLATFORM=offscreen:configfile=screen.json \\
        python -m attn_explorer.tools.layout_check OUT_FOLDER [--view main ...]

The screen comes from the platform (an offscreen configuration file, Xvfb or a real
display). For each view (the worked example, the stepper mid-loop in predict mode, sixteen
heads, the timing charts after a sweep, the model view, the vectors view) the window opens
at its default size for that screen, the view is set up, and the tool checks, from widget
geometry:

- the window lies inside the screen's free area;
- every visible widget lies inside its parent (scrolled content excepted), so nothing is
  cut off at an edge;
- the things a user must see are visible, not zero-size and not clipped: the score grid,
  each heatmap plot, the colour bar, the stepper's code line and locals, the status bar,
  the dock tabs and the "Start here" button.

It writes ``<view>-<W>x<H>.png`` per view and prints one JSON object: the window's
rectangle and the problems found per view (empty lists when all is well).

``--docks`` instead opens every combination of the docks a user can open or close (Model,
Vectors, Lessons by their commands; Inputs, Timing, Stepper by the View menu) over sixteen
heads and reports the part of the window's width the per-head heatmaps get in each (issue
36: at least 35 % on 1280 × 720); the PNG of the combination that leaves them least is kept.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_explorer.tools.layout_rules import (
    chart_problems,
    clipped,
    cut_labels,
    grid_problems,
    overhangs,
    tile_problems,
    window_problems,
)

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QDockWidget

    from attn_explorer.ui.window.main_window import MainWindow

#: One dock state each, then dock combinations (a left and a right dock, two side views,
#: and Lessons opened, closed and opened again over sixteen heads of 64 tokens).
VIEWS = (
    "main", "stepper", "heads", "sweep", "model", "vectors",
    "long", "lessons+inputs", "model+inputs", "model+lessons", "reopen",
)  # fmt: skip


# -- views --------------------------------------------------------------------------------
def _load(window: MainWindow, name: str, **options: object) -> None:
    from attn_explorer.state.presets import preset

    chosen = preset(name)
    window.session.load(chosen.snapshot, chosen.options, text=f"layout check {name}")
    for option, value in options.items():
        window.session.set_option(option, value)


def _view_main(window: MainWindow) -> None:
    _load(window, "worked")


def _view_stepper(window: MainWindow) -> None:
    _load(window, "exercise")
    window.commands.set_strategy("loop")
    panel = window.stepper
    window.stepper_dock.raise_()
    panel.predict_check.setChecked(True)
    for _ in range(3):
        panel.step_forward()


def _view_heads(window: MainWindow) -> None:
    _load(window, "random")
    window.session.resize(heads=16, tokens=12)


def _view_sweep(window: MainWindow) -> None:
    from attn_explorer.compute.timing import time_strategies

    _load(window, "worked")
    panel = window.timing_panel
    assert panel is not None
    q = window.session.matrix("query")
    panel.show_timing(time_strategies(q, q, repeats=3, min_seconds=0.001))
    tokens = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    loop = [2e-6 * t * t for t in tokens]
    panel.show_sweep(
        {
            "tokens": tokens,
            "loop": loop,
            "loop_estimated": [t > 128 for t in tokens],
            "matmul": [3e-6 + 2e-9 * t * t for t in tokens],
            "batched": [2e-6 + 1.5e-9 * t * t for t in tokens],
        }
    )
    window.timing_dock.raise_()


def _view_model(window: MainWindow) -> None:
    _open_model(window)


@functools.cache
def _model_folder() -> Path:
    """A tiny twelve-head BERT, written once per process."""
    from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert

    folder = Path(tempfile.mkdtemp(prefix="layout-check-model-"))
    write_tiny_bert(folder, config=tiny_config(num_attention_heads=12, hidden_size=48))
    return folder


def _open_model(window: MainWindow) -> None:
    view = window.commands.open_model_view()
    view.set_model_folder(_model_folder())
    view.set_sentence("The teacher projects attention on the wall.")
    view.compute_now()
    app = _app()
    for _ in range(100):  # the model runs in a worker: wait for its read-out
        if "heads" in view.status_label.text():
            break
        _settle(app, 0.05)


def _view_vectors(window: MainWindow) -> None:
    window.commands.open_vectors_view()
    _load(window, "exercise")
    window.commands.seek_cell(0, 0, 1, 3)  # q2 · k4: the exercise's perpendicular pair


def _view_long(window: MainWindow) -> None:
    _load(window, "random")
    window.session.resize(heads=16, tokens=64)
    _sixteen_drawn(window)


def _sixteen_drawn(window: MainWindow) -> None:
    """Wait for the 64-token result (a worker computes it) to be drawn as sixteen heads."""
    app = _app()
    for _ in range(200):
        if window.heatmaps is not None and len(window.heatmaps.plots) == 16:
            break
        _settle(app, 0.05)
    _settle(app, 0.5)  # and for the grid to re-flow once its size settles


def _open_lessons(window: MainWindow) -> None:
    window.commands.open_lessons()  # F3
    window.lessons.start_lesson("02-loop-visits-every-pair", 2)  # mid-lesson, stepper in front


def _view_lessons_inputs(window: MainWindow) -> None:
    _load(window, "worked")
    _open_lessons(window)
    window.stepper_dock.raise_()


def _view_model_inputs(window: MainWindow) -> None:
    _view_heads(window)
    _open_model(window)
    window.inputs_dock.show()


def _view_model_lessons(window: MainWindow) -> None:
    _view_heads(window)
    _open_model(window)
    window.commands.open_lessons()


def _view_reopen(window: MainWindow) -> list[str]:
    """Sixteen heads of 64 tokens; Lessons opened, closed (the layout must come back as it
    was) and opened again."""
    from attn_explorer.tools.layout_rules import central_geometry, recovered

    app = _app()
    _view_long(window)
    _settle(app, 0.5)
    before = central_geometry(window)
    window.commands.open_lessons()
    _settle(app, 1.0)
    window.lessons_dock.close()
    _settle(app, 1.0)
    problems = recovered(before, central_geometry(window), "after Lessons closed")
    window.commands.open_lessons()
    return problems


def _app() -> QApplication:
    from attn_explorer.render.qt_app import qt_application

    return qt_application()


def _settle(app: QApplication, seconds: float) -> None:
    from attn_explorer.cli.self_test import settle

    settle(app, seconds)


SETUPS: dict[str, Callable[[MainWindow], list[str] | None]] = {
    "vectors": _view_vectors,
    "main": _view_main,
    "stepper": _view_stepper,
    "heads": _view_heads,
    "sweep": _view_sweep,
    "model": _view_model,
    "long": _view_long,
    "lessons+inputs": _view_lessons_inputs,
    "model+inputs": _view_model_inputs,
    "model+lessons": _view_model_lessons,
    "reopen": _view_reopen,
}


def check(folder: Path, views: Sequence[str] = VIEWS) -> dict[str, object]:
    """Open the window per view, save its PNG in ``folder`` and return the problems found."""
    from attn_explorer.cli.self_test import close_quietly, settle
    from attn_explorer.render.qt_app import qt_application

    app = qt_application()
    from attn_explorer.ui.common.settings import settings
    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()  # as the app's start does

    folder.mkdir(parents=True, exist_ok=True)
    screen = app.primaryScreen().availableGeometry()
    size = f"{screen.width()}x{screen.height()}"
    small = screen.width() < 1280 or screen.height() < 720
    report: dict[str, object] = {"screen": [screen.width(), screen.height()], "views": {}}
    views_report: dict[str, dict[str, object]] = {}
    for view in views:
        settings().clear()  # each view from a first start: not the last view's saved docks
        window = MainWindow()
        window.files.ask_before_discard = False  # a lesson replacing the example asks first
        try:
            window.show()
            settle(app, 0.3)
            found = SETUPS[view](window) or []
            settle(app, 1.5)
            image = window.grab()
            target = folder / f"{view}-{size}.png"
            image.save(str(target))
            g = window.frameGeometry()
            views_report[view] = {
                "window": [g.x(), g.y(), g.width(), g.height()],
                "png": str(target),
                "problems": found
                + window_problems(window)
                + clipped(window, view, small)
                + overhangs(window)
                + cut_labels(window)
                + grid_problems(window)
                + tile_problems(window)
                + chart_problems(window),
            }
        finally:
            close_quietly(window)
            settle(app, 0.05)
    report["views"] = views_report
    return report


#: The docks a user opens by a command (made or shown on first use, in this order), and the
#: ones the View menu shows and hides (there from the start).
OPENED_DOCKS = ("model", "vectors", "lessons")
TOGGLED_DOCKS = ("inputs", "timing", "stepper")


def dock_combinations(folder: Path) -> dict[str, object]:
    """Every combination of the docks open over sixteen heads: the share of the window's
    width the heatmaps get (0 if hidden), which docks are open and which are in sight.

    A fresh window per set of OPENED_DOCKS (opened by their commands); in it, each set of
    TOGGLED_DOCKS by their View-menu toggles. The PNG of the least share is kept.
    """
    from attn_explorer.cli.self_test import close_quietly, settle
    from attn_explorer.render.qt_app import qt_application

    app = qt_application()
    from attn_explorer.ui.common.settings import settings
    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()
    folder.mkdir(parents=True, exist_ok=True)
    screen = app.primaryScreen().availableGeometry()
    png = folder / f"docks-least-{screen.width()}x{screen.height()}.png"
    rows: list[dict[str, object]] = []
    least = 2.0
    for opened in _subsets(OPENED_DOCKS):
        settings().clear()  # a first start each: not the last window's saved docks
        window = MainWindow()
        window.files.ask_before_discard = False
        try:
            window.show()
            settle(app, 0.2)
            _view_heads(window)
            _open_by_command(window, opened)
            for toggled in _subsets(TOGGLED_DOCKS):
                docks = _docks(window)
                for name in TOGGLED_DOCKS:
                    if docks[name].isHidden() == (name in toggled):
                        docks[name].toggleViewAction().trigger()  # the View menu's toggle
                settle(app, 0.3)
                heatmaps = window.heatmaps
                visible = heatmaps is not None and heatmaps.isVisible()
                share = heatmaps.width() / window.width() if heatmaps and visible else 0.0
                rows.append(
                    {
                        "open": [*opened, *toggled],
                        "heatmaps": round(share, 4),
                        "window": window.width(),
                        "shown": [n for n, d in docks.items() if d and not d.isHidden()],
                        "in_sight": [
                            n
                            for n, d in docks.items()
                            if d and d.isVisible() and not d.visibleRegion().isEmpty()
                        ],
                    }
                )
                if share < least:
                    least = share
                    window.grab().save(str(png))
        finally:
            close_quietly(window)
            settle(app, 0.05)
    return {"screen": [screen.width(), screen.height()], "combinations": rows}


def _subsets(names: Sequence[str]) -> list[list[str]]:
    """Every subset of ``names``, each in their order, the empty one first."""
    return [
        [name for name, on in zip(names, chosen, strict=True) if on]
        for chosen in itertools.product((False, True), repeat=len(names))
    ]


def _open_by_command(window: MainWindow, names: Sequence[str]) -> None:
    """Open the ``names`` docks of OPENED_DOCKS as their menu commands do."""
    if "model" in names:
        _open_model(window)
    if "vectors" in names:
        window.commands.open_vectors_view()
    if "lessons" in names:
        window.commands.open_lessons()


def _docks(window: MainWindow) -> dict[str, QDockWidget]:
    """The window's docks by the names above (the model and vectors ones once made)."""
    made = {"model": window.model_dock, "vectors": window.vectors_dock}
    fixed = {
        "lessons": window.lessons_dock,
        "inputs": window.inputs_dock,
        "timing": window.timing_dock,
        "stepper": window.stepper_dock,
    }
    return {**{name: dock for name, dock in made.items() if dock is not None}, **fixed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn_explorer.tools.layout_check",
        description="Check the window's layout on this screen and save a PNG per view.",
    )
    parser.add_argument("folder", type=Path, help="where to write the PNGs")
    parser.add_argument("--view", action="append", choices=VIEWS, help="check just this view")
    parser.add_argument(
        "--docks", action="store_true", help="every combination of docks: the heatmaps' share"
    )
    args = parser.parse_args(argv)
    from attn_explorer.cli.self_test import private_app_folders

    with (
        tempfile.TemporaryDirectory(prefix="attn-explorer-layout-") as scratch,
        private_app_folders(Path(scratch)),
    ):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        if args.docks:
            report = dock_combinations(args.folder)
        else:
            report = check(args.folder, args.view or VIEWS)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
