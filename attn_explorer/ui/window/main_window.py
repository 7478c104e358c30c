"""The main window: the composition root. It builds the parts, lays out the central views and
hands every job to the module that owns it. No math, no commands.

Data flows one way: an edit goes into the :class:`~attn_explorer.state.session.Session`;
:class:`~attn_explorer.ui.explorer.recompute.Recompute` brings the
:class:`~attn_explorer.state.results.results.Results` up to date (small shapes within a
frame of the edit, big ones in a worker, newest edit wins); the score grid, the
heatmaps and the code panel subscribe to the results, and the stepper's frame is
an overlay on them. The other jobs live beside this module: the commands in
:mod:`.commands` (typed by ``lessons.window.WindowCommands``), their QActions and menus in
:mod:`.actions`, the file side in :mod:`.file_commands`, dock places in :mod:`.docks`, the
late-built views in :mod:`.deferred`, the status bar and title in :mod:`.status`, the saved
layout in :mod:`.saved_layout`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.state import Session
from attn_explorer.state.app_state import AppState
from attn_explorer.ui.common import screen_fit
from attn_explorer.ui.explorer.code_panel import CodePanel
from attn_explorer.ui.explorer.heatmap_preview import HeatmapPreview
from attn_explorer.ui.explorer.matrix_table import MatrixTable
from attn_explorer.ui.explorer.recompute import Recompute
from attn_explorer.ui.explorer.score_grid import MAX_GRID_TOKENS, ScoreGrid
from attn_explorer.ui.explorer.size_controls import SizeControls
from attn_explorer.ui.explorer.toolbar import OptionsBar, StrategyToggle
from attn_explorer.ui.lessons.lessons_panel import LessonsDock
from attn_explorer.ui.stepper.stepper_panel import StepperPanel
from attn_explorer.ui.stepper.stepper_widgets import FitScrollArea
from attn_explorer.ui.window import saved_layout
from attn_explorer.ui.window.actions import WindowActions, build_menu_bar
from attn_explorer.ui.window.commands import Commands
from attn_explorer.ui.window.deferred import COLUMN_SIZES, DeferredViews
from attn_explorer.ui.window.docks import (
    GRID_COLUMN_MIN,
    HEATMAPS_MIN,
    Docks,
    KeepLeastWidth,
    inputs_panel,
    show_dock,
)
from attn_explorer.ui.window.file_commands import FileCommands
from attn_explorer.ui.window.keyboard import Keyboard
from attn_explorer.ui.window.status import StatusBar, follow_title

if TYPE_CHECKING:
    from PySide6.QtGui import QAction

    from attn_explorer.ui.explorer.heatmaps import HeatmapGrid
    from attn_explorer.ui.lessons.lessons_panel import LessonsPanel
    from attn_explorer.ui.model.model_view import ModelView
    from attn_explorer.ui.timing.timing_panel import TimingPanel
    from attn_explorer.ui.vectors.vectors_view import VectorsView


class MainWindow(QMainWindow):
    """Attention Explorer's window over one :class:`AppState` (the single source of truth).

    ``commands`` is its command layer, ``menu_actions`` the QActions that call it.
    """

    def __init__(
        self,
        session: Session | None = None,
        *,
        defer_plots: bool = False,
        state: AppState | None = None,
    ) -> None:
        """``defer_plots`` (the app's start) paints a picture of the heatmaps first and builds
        the pyqtgraph views after the first paint: the heatmaps at once, the timing charts
        when their dock first comes to the front. Without it everything is built here."""
        super().__init__()
        self.state = state or AppState(session)
        self.session = self.state.session
        self.results = self.state.results
        self.files = FileCommands(self, self.state)
        self.recompute = Recompute(self.results, self)
        from attn_explorer.ui.common.icons import app_icon

        self.setWindowIcon(app_icon())
        placeholder = self._build_views()
        self.status = StatusBar(self.statusBar())
        self.shape_label, self.busy = self.status.shape_label, self.status.busy
        self.stepper = StepperPanel(self.session, self.state.stepper)
        self.stepper.setObjectName("stepper")
        inputs, self.matrix_tabs = inputs_panel(self.size_controls, self.tables)
        # the stepper scrolls only below the panel's minimum
        self.docks = Docks(self, inputs, FitScrollArea(self.stepper))
        self.views = DeferredViews(self.state, self.splitter, placeholder, self.docks)
        self._keep_least = KeepLeastWidth(self)
        self.views.built.connect(self._on_view_built)
        self.commands = Commands(
            self, self.state, self.files, views=self.views, docks=self.docks,
            tables=self.tables, stepper=self.stepper, score_grid=self.score_grid,
            shape_label=self.shape_label, shortcut_actions=self._shortcut_actions,
        )  # fmt: skip
        self.files.open_vectors_view = self.commands.open_vectors_view
        self.lessons_dock = LessonsDock(self, self.commands)
        self.docks.add_lessons(self.lessons_dock)
        self.inputs_dock, self.timing_dock = self.docks.inputs, self.docks.timing
        self.stepper_dock = self.docks.stepper
        self.menu_actions = WindowActions(self, self.commands, self.files, self.session)
        dock_toggles = [d.toggleViewAction() for d in self.docks.fixed()]
        self.menus = build_menu_bar(
            self.menuBar(),
            self.menu_actions,
            {"Step": self.stepper.transport_actions(), "View": dock_toggles},
        )
        for action in self.stepper.transport_actions():
            action.triggered.connect(lambda _checked=False: show_dock(self.stepper_dock))
        self.menuBar().setCornerWidget(self.lessons_dock.start_button, Qt.Corner.TopRightCorner)
        self.keyboard = Keyboard(self)  # any focus reaches every shortcut; Tab, F6, Escape
        self.status.follow(self.session, self.recompute)
        follow_title(self, self.state)
        screen_fit.fit_window(self)
        self._state_restored = saved_layout.restore(self)
        if saved_layout.restore_dark():
            self.menu_actions.dark.setChecked(True)
        if not defer_plots:
            self.views.build_plots()
            self.views.build_timing()
        else:
            self.views.after_first_paint(self)
        self._lend_grid_column()  # a session opened with over 16 tokens
        self.recompute.run()

    def _build_views(self) -> HeatmapPreview:
        """The explorer's views, the toolbar and the central splitter (code | heatmaps).

        Returns the picture of the heatmaps that stands in the splitter until the
        interactive ones are built (just after the first paint).
        """
        s, results, stepper = self.session, self.results, self.state.stepper
        self.tables = {name: MatrixTable(s, name) for name in ("query", "key", "value")}
        # Object names are what lessons point at (lessons.registry.HIGHLIGHT_TARGETS).
        for name, table in self.tables.items():
            table.setObjectName(f"{name}_table")
            stepper.changed.connect(table.set_frame)
        self.score_grid = ScoreGrid(s, results, stepper, document=self.state.document)
        self.score_grid.setObjectName("score_grid")
        self.strategy_toggle = StrategyToggle(s)
        self.strategy_toggle.setObjectName("strategy_toggle")
        self.options_bar = OptionsBar(s)
        for name in ("stage", "scale", "causal"):
            getattr(self.options_bar, name).setObjectName(name)
        self.options_bar.sliding_window.setObjectName("window")
        self.size_controls = SizeControls(s)
        for name, label in (("batch", "B"), ("heads", "H"), ("tokens", "T"), ("dim", "d")):
            self.size_controls.spins[label].setObjectName(name)
        self.code_panel = CodePanel(s, results)
        self.code_panel.setObjectName("code_panel")

        # The grid's title and axis note wrap: a narrow column keeps all of their words.
        self.score_grid.title.setWordWrap(True)
        self.score_grid.axes.setWordWrap(True)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.score_grid)
        # The code panel scrolls when short: its wrapped notes keep every line.
        code_area = QScrollArea()
        code_area.setWidgetResizable(True)
        code_area.setFrameShape(QFrame.Shape.NoFrame)
        code_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        code_area.setWidget(self.code_panel)
        left.addWidget(code_area)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        left.setMinimumWidth(GRID_COLUMN_MIN)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        # Neither column collapses, whatever a dock or a drag asks: their least sizes hold.
        self.splitter.setChildrenCollapsible(False)
        left.setChildrenCollapsible(False)
        self.splitter.addWidget(left)
        placeholder = HeatmapPreview(s, results)
        placeholder.setMinimumSize(*HEATMAPS_MIN)
        self.splitter.addWidget(placeholder)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes(COLUMN_SIZES)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        toolbar = self.addToolBar("View options")
        toolbar.setObjectName("view-options")
        toolbar.setMovable(False)
        toolbar.addWidget(QLabel("strategy "))
        toolbar.addWidget(self.strategy_toggle)
        toolbar.addSeparator()
        for widget in self.options_bar.widgets():  # the toolbar folds them away when narrow
            toolbar.addWidget(widget)
        self.options_bar.hide()
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self._kept_columns: list[int] | None = None  # the columns while the grid was shown
        s.events.shape.connect(self._lend_grid_column)
        return placeholder

    def _lend_grid_column(self, *_: object) -> None:
        """Over 16 tokens the grid's column shows only a note: the heatmaps take its width
        (the column keeps its least width for the code), and get it back at 16 or fewer."""
        note_only = self.session.shape[2] > MAX_GRID_TOKENS
        if note_only == (self._kept_columns is not None):
            return
        sizes = self.splitter.sizes()
        if note_only:
            self._kept_columns = sizes
            total = sum(sizes)
            grid = max(GRID_COLUMN_MIN, total * 3 // 10)
            self.splitter.setSizes([grid, total - grid])
        else:
            kept, self._kept_columns = self._kept_columns, None
            if kept is not None:
                self.splitter.setSizes(kept)

    def _on_view_built(self, name: str, view: object) -> None:
        if name == "heatmaps" and isinstance(view, QWidget):
            view.installEventFilter(self._keep_least)
            self._keep_least.eventFilter(view, QEvent(QEvent.Type.LayoutRequest))

    def _shortcut_actions(self) -> list[QAction]:
        return [*self.menu_actions.all(), *self.stepper.transport_actions()]

    # -- the views built late (see .deferred) ---------------------------------------------
    @property
    def heatmaps(self) -> HeatmapGrid | None:
        return self.views.heatmaps

    @property
    def timing_panel(self) -> TimingPanel | None:
        return self.views.timing_panel

    @property
    def model_view(self) -> ModelView | None:
        return self.views.model_view

    @property
    def model_dock(self) -> QDockWidget | None:
        return self.views.model_dock

    @property
    def vectors_view(self) -> VectorsView | None:
        return self.views.vectors_view

    @property
    def vectors_dock(self) -> QDockWidget | None:
        return self.views.vectors_dock

    @property
    def lessons(self) -> LessonsPanel:
        """The Lessons dock's panel (made on first use: the dock starts hidden)."""
        return self.lessons_dock.panel

    # -- show, close ------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not getattr(self, "_kept_inside", False):
            self._kept_inside = True  # once: the frame's size is known only now
            QTimer.singleShot(0, self, lambda: screen_fit.keep_inside(self))
        if not self._state_restored and not getattr(self, "_docks_sized", False):
            self._docks_sized = True
            self.docks.default_sizes()  # now, so the first paint has them (no jump a frame on)

    def save_settings(self) -> None:
        saved_layout.save(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.files.close():
            event.ignore()
            return
        self.shutdown()
        self.save_settings()
        event.accept()

    def shutdown(self) -> None:
        """Stop every timer and background job (the window is going away)."""
        self.recompute.shutdown()
        self.views.shutdown()
        self.stepper.shutdown()
