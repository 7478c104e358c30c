"""Where each dock of the main window goes: inputs left, timing and stepper below, lessons right.

:class:`Docks` creates the window's fixed docks and places the ones made later (the
model and vectors views): a third column on a wide window, or sharing the inputs'
full-height place on a narrow one, never so wide that the heatmaps keep less than
HEATMAPS_SHARE of the window. It owns the first-start dock sizes too. It decides places
only; what is in a dock is the caller's.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.ui.explorer.matrix_table import MatrixTable
from attn_explorer.ui.explorer.size_controls import SizeControls
from attn_explorer.ui.lessons.lessons_panel import LessonsDock

WIDE_WINDOW = 1500  # from this width the model view opens as a third column
#: The central views' least sizes, which no dock can squeeze them below: the score grid's
#: column (the grid of a few tokens, the code below it) and the heatmaps (sixteen heads
#: in four columns of readable tiles, and the colour bar).
GRID_COLUMN_MIN = 285
HEATMAPS_MIN = (320, 220)
#: Room the dock separators and the central margins take across the window.
SEPARATORS_PX = 24
#: The least part of the window's width the per-head heatmaps keep when a side dock opens
#: (issue 36: the Model dock's 45 % left them 34 % at 1280 × 720). The dock is narrowed
#: to leave it, down to its own least width; its content wraps or scrolls below that.
#: 40 %, not the 35 % promised, so that a scroll bar or a longer title does not tip it.
HEATMAPS_SHARE = 0.40
Area = Qt.DockWidgetArea


def show_dock(dock: QDockWidget) -> None:
    """Bring a dock to the front: a command whose result appears there was used."""
    dock.show()
    dock.raise_()


def inputs_panel(
    size_controls: SizeControls, tables: dict[str, MatrixTable]
) -> tuple[QWidget, QTabWidget]:
    """The Inputs dock's content, and its tabs: the sizes above Q and K (one above the
    other) in one tab and V in another."""
    inputs = QWidget()
    layout = QVBoxLayout(inputs)
    layout.setContentsMargins(4, 4, 4, 4)
    layout.addWidget(size_controls)
    tabs = QTabWidget()
    qk = QSplitter(Qt.Orientation.Vertical)
    for name, title in (("query", "Q — queries"), ("key", "K — keys")):
        box = QWidget()
        box_layout = QVBoxLayout(box)
        box_layout.setContentsMargins(0, 0, 0, 0)
        box_layout.addWidget(QLabel(f"<b>{title}</b> (rows = tokens, columns = d)"))
        box_layout.addWidget(tables[name])
        qk.addWidget(box)
    tabs.addTab(qk, "Q and K")
    tabs.addTab(tables["value"], "V — values")
    tabs.setTabToolTip(1, "Values, used by the output stage (weights @ V)")
    layout.addWidget(tabs, 1)
    return inputs, tabs


class Docks:
    """The docks of ``window`` and their places (see the module docstring)."""

    def __init__(self, window: QMainWindow, inputs: QWidget, stepper: QWidget) -> None:
        self.window = window
        self.inputs = self.add("Inputs", inputs, Area.LeftDockWidgetArea, "inputs-dock")
        self.timing = self.add(
            "Timing", QLabel("Loading charts…"), Area.BottomDockWidgetArea, "timing-dock"
        )
        self.stepper = self.add(
            "Step through the loops", stepper, Area.BottomDockWidgetArea, "stepper-dock"
        )
        window.tabifyDockWidget(self.timing, self.stepper)
        self.stepper.raise_()
        # The right dock area takes the bottom-right corner, so the lesson text runs the full
        # height of the window instead of sharing the top with the central views.
        window.setCorner(Qt.Corner.BottomRightCorner, Area.RightDockWidgetArea)
        # Likewise the left area: the Q/K/V tables (and a model view sharing their place on
        # a narrow window) keep the full height on a 720-pixel screen.
        window.setCorner(Qt.Corner.BottomLeftCorner, Area.LeftDockWidgetArea)
        self.lessons: LessonsDock | None = None

    def add_lessons(self, lessons: LessonsDock) -> None:
        """The Lessons dock on the right, hidden until asked for (Help ▸ Lessons, F3).

        On a window too narrow for it beside the inputs and the central views' least
        width, it opens as a tab in the inputs' place instead (see :meth:`fits_beside`).
        """
        self.lessons = lessons
        self.window.addDockWidget(Area.RightDockWidgetArea, lessons)
        lessons.hide()
        lessons.visibilityChanged.connect(self._place_lessons)

    def _place_lessons(self, visible: bool) -> None:
        lessons = self.lessons
        if not visible or lessons is None or lessons.isFloating():
            return
        if self.window.dockWidgetArea(lessons) != Area.RightDockWidgetArea:
            return  # already sharing a place, or put elsewhere by the user
        if self.fits_beside(lessons) or not self.inputs.isVisible():
            return
        self.window.tabifyDockWidget(self.inputs, lessons)
        lessons.raise_()

    def fits_beside(self, dock: QDockWidget) -> bool:
        """True if ``dock`` fits in its side area: the side columns (each as wide as its
        widest dock, tabbed or stacked docks share one), the central views and the docks
        under them keep their least widths within the window."""
        window = self.window
        # least sizes waiting in posted layout requests (a view just re-laid out) count too
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        middle = window.centralWidget()
        central = middle.minimumSizeHint().width() if middle is not None else 0
        for below in (self.timing, self.stepper):
            if below.isVisible():
                central = max(central, below.minimumSizeHint().width())
        columns: dict[Area, int] = {}
        for other in window.findChildren(QDockWidget):
            area = window.dockWidgetArea(other)
            shown = other is dock or (other.isVisible() and not other.isFloating())
            if shown and area in (Area.LeftDockWidgetArea, Area.RightDockWidgetArea):
                columns[area] = max(columns.get(area, 0), other.minimumSizeHint().width())
        return central + sum(columns.values()) + SEPARATORS_PX <= window.width()

    def fixed(self) -> list[QDockWidget]:
        """The docks every window has, for the View menu's show/hide toggles."""
        assert self.lessons is not None  # added by the window as it is built
        return [self.inputs, self.timing, self.stepper, self.lessons]

    def add(self, title: str, widget: QWidget, area: Area, name: str) -> QDockWidget:
        """A new dock named ``name`` (what the saved layout knows it by) holding ``widget``."""
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.window.addDockWidget(area, dock)
        return dock

    def add_side(self, title: str, widget: QWidget, name: str, share: int | None) -> QDockWidget:
        """A dock made on first use (model, vectors): a right-hand column on a wide window.

        On a window narrower than WIDE_WINDOW a third column would squeeze every view:
        the dock shares the inputs' full-height place instead (their tab stays one click
        away), ``share`` per cent of the width if given.
        """
        dock = self.add(title, widget, Area.RightDockWidgetArea, name)
        if self.window.width() < WIDE_WINDOW:
            self.window.tabifyDockWidget(self.inputs, dock)
            show_dock(dock)
            if share is not None:
                width = self.window.width() * share // 100
                self.window.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
        return dock

    def leave_heatmaps_room(self, dock: QDockWidget, splitter: QSplitter) -> None:
        """Narrow ``dock`` (a side dock just placed) until the heatmaps, ``splitter``'s second
        column, are HEATMAPS_SHARE of the window's width; the width it gives up goes to them,
        and the score grid's column keeps its own."""
        window, heatmaps = self.window, splitter.widget(1)
        layout = window.layout()
        if dock.isFloating() or not dock.isVisible() or heatmaps is None or layout is None:
            return
        layout.activate()  # the places just asked for, applied now (not at the next frame)
        short = int(HEATMAPS_SHARE * window.width()) - heatmaps.width()
        if short <= 0:
            return
        grid = splitter.sizes()[0]
        narrower = max(dock.minimumSizeHint().width(), dock.width() - short)
        window.resizeDocks([dock], [narrower], Qt.Orientation.Horizontal)
        layout.activate()
        total = sum(splitter.sizes())
        splitter.setSizes([grid, total - grid])

    def default_sizes(self) -> None:
        """First start: give the central views most of the room (docks stay resizable)."""
        width, height = self.window.width(), self.window.height()
        self.window.resizeDocks(
            [self.inputs], [min(380, width * 3 // 10)], Qt.Orientation.Horizontal
        )
        # the timing charts (140 px), their buttons and two summary lines fit at 650 px
        stepper = max(270, min(300, height * 36 // 100))
        self.window.resizeDocks([self.stepper], [stepper], Qt.Orientation.Vertical)


class KeepLeastWidth(QObject):
    """Keeps the heatmaps at least HEATMAPS_MIN and as large as their heads laid out now
    need (a dock opening takes its room from elsewhere, never from these).

    A least size set on the grid itself would hide its layout's from the splitter, so it
    is the largest of them, taken again whenever the grid's layout changes.
    """

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest and isinstance(watched, QWidget):
            layout = watched.layout()
            if layout is None:
                return False
            least = layout.minimumSize()
            width = max(HEATMAPS_MIN[0], least.width(), self._plots_width(watched))
            watched.setMinimumWidth(width)
            # the wrapped hover line keeps its lines under the plots
            height = layout.minimumHeightForWidth(max(width, watched.width()))
            watched.setMinimumHeight(max(HEATMAPS_MIN[1], least.height(), height))
        return False

    @staticmethod
    def _plots_width(grid: QWidget) -> int:
        """What the heads laid out now need across (their titles and the colour bar)."""
        view = getattr(grid, "view", None)
        if view is None:
            return 0
        least = view.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize).width()
        return int(least) + 2 * view.frameWidth() + 8
