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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    from attn_explorer.ui.window.main_window import MainWindow

VIEWS = ("main", "stepper", "heads", "sweep", "model", "vectors")
SLACK = 1  # pixels a child may overhang its parent (rounding of fractional layouts)


# -- geometry -----------------------------------------------------------------------------
def _name(widget: QWidget) -> str:
    name = widget.objectName()
    return f"{type(widget).__name__}({name})" if name else type(widget).__name__


def _path(widget: QWidget, top: QWidget) -> str:
    parts = []
    node: QWidget | None = widget
    while node is not None and node is not top:
        parts.append(_name(node))
        node = node.parentWidget()
    return " < ".join(parts)


def _parked(widget: QWidget) -> bool:
    """True for a dock behind another's tab, or an unused tab bar: the main window's layout
    keeps them wholly outside the window, where nobody sees them."""
    from PySide6.QtWidgets import QDockWidget, QTabBar

    parent = widget.parentWidget()
    if parent is None or not isinstance(widget, QDockWidget | QTabBar):
        return False
    g = widget.geometry()
    return g.right() < 0 or g.bottom() < 0 or g.left() > parent.width() or g.top() > parent.height()


def _scrolled(widget: QWidget) -> bool:
    """True for content that may extend past its parent because the parent scrolls it."""
    from PySide6.QtWidgets import QAbstractScrollArea, QTabBar

    parent = widget.parentWidget()
    if parent is None:
        return False
    grand = parent.parentWidget()
    if isinstance(grand, QAbstractScrollArea) and grand.viewport() is parent:
        return True
    # a tab bar with scroll buttons keeps tabs past its edge; header sections likewise
    return isinstance(parent, QTabBar)


def _ancestors(widget: QWidget, top: QWidget) -> list[QWidget]:
    found = []
    node = widget.parentWidget()
    while node is not None and node is not top:
        found.append(node)
        node = node.parentWidget()
    return found


def visible_rect(widget: QWidget, top: QWidget) -> QRect:
    """The part of ``widget`` (in ``top``'s coordinates) that its ancestors do not clip."""
    from PySide6.QtCore import QPoint, QRect

    rect = QRect(widget.mapTo(top, QPoint(0, 0)), widget.size())
    node = widget.parentWidget()
    while node is not None:
        origin = node.mapTo(top, QPoint(0, 0)) if node is not top else QPoint(0, 0)
        rect = rect.intersected(QRect(origin, node.size()))
        if node is top:
            break
        node = node.parentWidget()
    return rect


def overhangs(top: QWidget) -> list[str]:
    """Visible widgets that stick out of their parent (text or controls cut off at an edge)."""
    from PySide6.QtWidgets import QWidget

    problems = []
    for child in top.findChildren(QWidget):
        if not child.isVisible() or child.isWindow() or _scrolled(child) or _parked(child):
            continue
        if any(_parked(a) for a in _ancestors(child, top)):
            continue
        parent = child.parentWidget()
        if parent is None:
            continue
        g, r = child.geometry(), parent.rect()
        if (
            g.left() < r.left() - SLACK
            or g.top() < r.top() - SLACK
            or g.right() > r.right() + SLACK
            or g.bottom() > r.bottom() + SLACK
        ):
            problems.append(
                f"{_path(child, top)} at {g.x()},{g.y()} {g.width()}×{g.height()} sticks out "
                f"of its parent ({r.width()}×{r.height()})"
            )
    return problems


def must_see(window: MainWindow, view: str) -> dict[str, QWidget]:
    """The widgets a user must see in ``view`` of the main window, by what they are."""
    from PySide6.QtWidgets import QTabBar

    found: dict[str, QWidget] = {
        "score grid": window.score_grid,
        "status bar": window.statusBar(),
        "shape read-out": window.shape_label,
        "Start here button": window.lessons_dock.start_button,
        "strategy toggle": window.strategy_toggle,
    }
    if view in ("main", "stepper"):
        found["stepper code line"] = window.stepper.code_view
        found["stepper locals"] = window.stepper.locals_label
        found["stepper position"] = window.stepper.scrub_slider
        found["stepper transport"] = window.stepper.speed_slider
    if view == "stepper":
        found["predict answer box"] = window.stepper.answer_edit
        found["predict feedback"] = window.stepper.predict_label
    if view == "sweep" and window.timing_panel is not None:
        found["timing charts"] = window.timing_panel
    if view == "vectors" and window.vectors_view is not None:
        found["vectors view"] = window.vectors_view
    if view == "model" and window.model_view is not None:
        found["model grid"] = window.model_view.grid
        found["take head button"] = window.model_view.take_button
        found["model head / summary tabs"] = window.model_view.lower_tabs
    if window.heatmaps is not None:
        found["heatmaps"] = window.heatmaps
    tabs = [
        bar
        for bar in window.findChildren(QTabBar)
        if bar.parentWidget() is window and not _parked(bar)
    ]
    for n, bar in enumerate(t for t in tabs if t.isVisible()):
        found[f"dock tabs {n + 1}"] = bar
    return found


def _reachable(widget: QWidget) -> bool:
    """True when ``widget`` lies wholly inside the content of a scroll area (so scrolling
    shows it)."""
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QAbstractScrollArea

    content, node = widget, widget.parentWidget()
    while node is not None:
        area = node.parentWidget()
        if isinstance(area, QAbstractScrollArea) and area.viewport() is node:
            inner = QRect(widget.mapTo(content, QPoint(0, 0)), widget.size())
            return content is widget or content.rect().contains(inner)
        content, node = node, area
    return False


def clipped(window: MainWindow, view: str, small_screen: bool) -> list[str]:
    """Must-see widgets that are hidden, zero-size or cut off by a parent.

    On a screen below 1280 × 720 a widget inside a scrolling panel only has to be
    reachable by scrolling; on bigger screens it has to be in sight.
    """
    problems = []
    for what, widget in must_see(window, view).items():
        if not widget.isVisible():
            problems.append(f"{what} is not visible")
            continue
        if widget.width() < 8 or widget.height() < 8:
            problems.append(f"{what} is {widget.width()}×{widget.height()} px")
            continue
        shown = visible_rect(widget, window)
        if shown.width() < widget.width() - SLACK or shown.height() < widget.height() - SLACK:
            if small_screen and _reachable(widget):
                continue
            problems.append(
                f"{what} is cut off: {shown.width()}×{shown.height()} of "
                f"{widget.width()}×{widget.height()} px visible"
            )
    problems.extend(_plot_problems(window, small_screen))
    return problems


def _plot_problems(window: MainWindow, small_screen: bool = False) -> list[str]:
    """Each heatmap plot and the colour bar lie inside the heatmap view, with room to read
    (cells at least 24 px, or 12 px on a screen below 1280 × 720)."""
    grid = window.heatmaps
    if grid is None:
        return ["the heatmaps were never built"]
    problems = []
    view = grid.view
    box = view.viewport().rect()
    for what, item in grid.layout_items().items():
        rect = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        least = 24 if what.endswith("cells") or what.startswith("colour") else 12
        if small_screen and what.endswith("cells"):
            least = 12
        if rect.width() < least or rect.height() < least:
            problems.append(f"{what} is only {rect.width()}×{rect.height()} px")
        elif not box.adjusted(-SLACK, -SLACK, SLACK, SLACK).contains(rect):
            problems.append(
                f"{what} is cut off: {rect.x()},{rect.y()} {rect.width()}×{rect.height()} "
                f"in a {box.width()}×{box.height()} view"
            )
    return problems


def window_problems(window: MainWindow) -> list[str]:
    """The window's frame lies inside the free area of its screen, and its contents could
    fit there (a long unwrapped label can make the minimum wider than the screen)."""
    screen = window.screen().availableGeometry()
    frame = window.frameGeometry()
    problems = []
    if not screen.contains(frame):
        problems.append(
            f"the window ({frame.x()},{frame.y()} {frame.width()}×{frame.height()}) runs off "
            f"the screen's free area ({screen.width()}×{screen.height()})"
        )
    least = window.minimumSizeHint()
    if least.width() > screen.width() or least.height() > screen.height():
        problems.append(
            f"the window's contents need at least {least.width()}×{least.height()}, more than "
            f"the screen's free area ({screen.width()}×{screen.height()})"
        )
    return problems


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
    from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert

    folder = Path(tempfile.mkdtemp(prefix="layout-check-model-"))
    write_tiny_bert(folder, config=tiny_config(num_attention_heads=12, hidden_size=48))
    view = window.commands.open_model_view()
    view.set_model_folder(folder)
    view.set_sentence("The teacher projects attention on the wall.")
    view.compute_now()


def _view_vectors(window: MainWindow) -> None:
    window.commands.open_vectors_view()
    _load(window, "exercise")
    window.commands.seek_cell(0, 0, 1, 3)  # q2 · k4: the exercise's perpendicular pair


SETUPS: dict[str, Callable[[MainWindow], None]] = {
    "vectors": _view_vectors,
    "main": _view_main,
    "stepper": _view_stepper,
    "heads": _view_heads,
    "sweep": _view_sweep,
    "model": _view_model,
}


def check(folder: Path, views: Sequence[str] = VIEWS) -> dict[str, object]:
    """Open the window per view, save its PNG in ``folder`` and return the problems found."""
    from attn_explorer.cli.self_test import close_quietly, settle
    from attn_explorer.render.qt_app import qt_application

    app = qt_application()
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
        window = MainWindow()
        try:
            window.show()
            settle(app, 0.3)
            SETUPS[view](window)
            settle(app, 1.5)
            image = window.grab()
            target = folder / f"{view}-{size}.png"
            image.save(str(target))
            g = window.frameGeometry()
            views_report[view] = {
                "window": [g.x(), g.y(), g.width(), g.height()],
                "png": str(target),
                "problems": window_problems(window)
                + clipped(window, view, small)
                + overhangs(window),
            }
        finally:
            close_quietly(window)
            settle(app, 0.05)
    report["views"] = views_report
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn_explorer.tools.layout_check",
        description="Check the window's layout on this screen and save a PNG per view.",
    )
    parser.add_argument("folder", type=Path, help="where to write the PNGs")
    parser.add_argument("--view", action="append", choices=VIEWS, help="check just this view")
    args = parser.parse_args(argv)
    from attn_explorer.cli.self_test import private_app_folders

    with (
        tempfile.TemporaryDirectory(prefix="attn-explorer-layout-") as scratch,
        private_app_folders(Path(scratch)),
    ):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        report = check(args.folder, args.view or VIEWS)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
