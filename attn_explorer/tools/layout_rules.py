"""The layout check's rules: what, from widget geometry, counts as a layout problem.

Each rule takes the main window (or any top widget) and returns its problems as sentences;
an empty list means all is well. :mod:`.layout_check` opens the views and runs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    from attn_explorer.ui.window.main_window import MainWindow

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
        "strategy toggle": window.strategy_toggle,
    }
    if "lessons" not in view and view != "reopen":  # it goes once Lessons were opened
        found["Start here button"] = window.lessons_dock.start_button
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


def central_geometry(window: MainWindow) -> dict[str, tuple[int, int]]:
    """Sizes of the central views, by name: what must come back when a dock closes."""
    middle = window.centralWidget()
    sizes = {"score grid": window.score_grid.size()}
    if middle is not None:
        sizes["central area"] = middle.size()
    found = {name: (size.width(), size.height()) for name, size in sizes.items()}
    if window.heatmaps is not None:
        grid = window.heatmaps
        found["heatmaps"] = (grid.view.width(), grid.view.height())
        if grid.plots:  # the first head's cells: the grid re-flowed its columns, or not
            rect = grid.view.mapFromScene(grid.plots[0].vb.sceneBoundingRect()).boundingRect()
            found["first head's cells"] = (rect.width(), rect.height())
    return found


def cut_labels(top: QWidget) -> list[str]:
    """Visible labels whose text does not fit: a line cut at the right (by the label's own
    width or by an ancestor, scroll areas included: nobody reads a sentence by scrolling
    sideways) or wrapped text taller than the label."""
    from PySide6.QtWidgets import QLabel

    problems = []
    for label in top.findChildren(QLabel):
        if not label.isVisible() or not label.text().strip() or label.isWindow():
            continue
        if any(_parked(a) for a in [label, *_ancestors(label, top)]):
            continue
        words = " ".join(label.text().split()[:5])
        what = f"{_path(label, top)} {words!r}"
        if label.wordWrap():
            need = label.heightForWidth(label.width())
            if need > label.height() + SLACK:
                problems.append(f"{what} needs {need} px of height, has {label.height()}")
                continue
        else:
            need = label.sizeHint().width()
            if need > label.width() + SLACK:
                problems.append(f"{what} needs {need} px of width, has {label.width()}")
                continue
        shown = visible_rect(label, top)
        if shown.width() < label.width() - SLACK and shown.height() > 0:
            problems.append(f"{what} is cut at the side: {shown.width()} of {label.width()} px")
    return problems


def grid_problems(window: MainWindow) -> list[str]:
    """The score grid shows all its columns, and lends the room it does not use: when it
    shows only a note (T > 16), the heatmaps get most of the central width."""
    grid, problems = window.score_grid, []
    table = grid.table
    columns = table.model().columnCount()
    if table.isVisible() and table.horizontalScrollBar().isVisible():
        # a 16-token grid may scroll; a few columns must all be in sight, four at least
        shown = table.viewport().width() / max(1, table.horizontalHeader().sectionSize(0))
        if shown < min(columns, 4) - 0.05:
            problems.append(f"the score grid shows {shown:.1f} of {columns} columns")
    heatmaps = window.heatmaps
    if grid.note.isVisible() and not table.isVisible() and heatmaps is not None:
        column, heads = grid.width(), heatmaps.width()
        column_widget = window.splitter.widget(0)
        least = column_widget.minimumWidth() if column_widget is not None else 0
        if heads < 1.5 * column and column > least + 8:
            problems.append(
                f"the score grid shows only a note yet keeps {column} px while the heatmaps "
                f"get {heads} px"
            )
    return problems


def tile_problems(window: MainWindow) -> list[str]:
    """Heatmap cells keep a readable shape: a head's cells are at most 3× wider than tall
    (or taller than wide), never one-row strips."""
    grid = window.heatmaps
    if grid is None or not grid.plots:
        return []
    problems = []
    t_q = max(1, window.session.shape[2])  # self-attention: T queries × T keys
    t_k = window.session.shape[3] if window.session.options.stage == "output" else t_q
    for n, plot in enumerate(grid.plots):
        rect = grid.view.mapFromScene(plot.vb.sceneBoundingRect()).boundingRect()
        cell_w, cell_h = rect.width() / t_k, rect.height() / t_q
        if min(cell_w, cell_h) <= 0 or max(cell_w, cell_h) / min(cell_w, cell_h) > 3:
            problems.append(
                f"heatmap tile {n + 1} is a strip: {rect.width()}×{rect.height()} px for "
                f"{t_q}×{t_k} cells"
            )
    return problems


def chart_problems(window: MainWindow) -> list[str]:
    """The timing charts' titles, axis labels and legends are whole and apart."""
    import pyqtgraph as pg

    panel = window.timing_panel
    if panel is None or not panel.isVisible() or window.timing_dock.visibleRegion().isEmpty():
        return []  # not built, or behind the stepper's tab
    problems = []
    for chart in (panel.bars, panel.scaling, panel.memory):
        if not chart.isVisible():
            continue
        item = chart.getPlotItem()
        box = chart.viewport().rect()
        labels: dict[str, pg.GraphicsObject] = {"title": item.titleLabel.item}
        for side in ("bottom", "left"):
            labels[f"{side} axis label"] = item.getAxis(side).label
        legend = getattr(chart, "legend", None) or getattr(panel, "legend", None)
        sweep_chart = chart is panel.scaling or chart is panel.memory
        if sweep_chart and legend is not None and legend.items:  # an empty one draws nothing
            labels["legend"] = legend
        rects = {}
        for what, graphic in labels.items():
            if not graphic.isVisible():
                continue
            rect = chart.mapFromScene(graphic.sceneBoundingRect()).boundingRect()
            rects[what] = rect
            # a text item's box has ~4 px of padding round the glyphs
            if not box.adjusted(-5, -5, 5, 5).contains(rect):
                problems.append(
                    f"{_name(chart)}'s {what} is cut off: {rect.width()}×{rect.height()} at "
                    f"{rect.x()},{rect.y()} in {box.width()}×{box.height()}"
                )
        title = rects.get("title")
        if title is not None and item.titleLabel.item.boundingRect().width() > (
            item.titleLabel.boundingRect().width() + SLACK
        ):
            problems.append(f"{_name(chart)}'s title is wider than its place")
    summary = panel.summary
    if summary.isVisible():
        from PySide6.QtCore import QPoint

        charts = [c for c in (panel.bars, panel.sweep_charts) if c.isVisible()]
        bottom = max(c.mapTo(panel, QPoint(0, c.height())).y() for c in charts)
        if summary.mapTo(panel, QPoint(0, 0)).y() < bottom - SLACK:
            problems.append("the timing summary overlaps the charts")
    return problems


def recovered(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], when: str
) -> list[str]:
    """Problems: central views that did not get their room back (8 px narrower or 16 px
    shorter than before a dock opened; larger is fine)."""
    problems = []
    for name, (width, height) in before.items():
        w, h = after.get(name, (0, 0))
        if w < width - 8 or h < height - 16:
            problems.append(f"{when}, the {name} is {w}×{h} px, not {width}×{height} as before")
    return problems
