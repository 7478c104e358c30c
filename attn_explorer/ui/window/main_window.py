"""The main window: builds the panels, docks and menus and wires state to views. No math.

Data flows one way: an edit goes into the :class:`~attn_explorer.state.session.Session`;
:class:`~attn_explorer.ui.explorer.recompute.Recompute` brings the session's
:class:`~attn_explorer.state.results.results.Results` up to date (small shapes within a
frame of the edit, big ones in a worker, newest edit wins); the score grid, the
heatmaps and the code panel subscribe to the results, and the stepper's frame is
an overlay on them. Every command is a named action in :mod:`.actions`; the file
side (open, save, autosave) lives in :mod:`.files`.

One job at ~500 lines: assembling the window. Building its views and docks and
the small commands its menus call (each a few lines handing work to state or to
a panel) are the same job; the commands' declarations live in :mod:`.actions`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.state import Session, Snapshot
from attn_explorer.state.app_state import AppState
from attn_explorer.ui.common import palette, screen_fit
from attn_explorer.ui.common.settings import settings
from attn_explorer.ui.common.text import message_box
from attn_explorer.ui.explorer.code_panel import CodePanel
from attn_explorer.ui.explorer.heatmap_preview import HeatmapPreview
from attn_explorer.ui.explorer.matrix_table import MatrixTable
from attn_explorer.ui.explorer.recompute import Recompute
from attn_explorer.ui.explorer.score_grid import ScoreGrid
from attn_explorer.ui.explorer.size_controls import SizeControls
from attn_explorer.ui.explorer.toolbar import OptionsBar, StrategyToggle
from attn_explorer.ui.lessons.highlight import DEFAULT_HIGHLIGHT_MS, Highlighter
from attn_explorer.ui.lessons.lessons_panel import LessonsDock
from attn_explorer.ui.stepper.stepper_panel import StepperPanel
from attn_explorer.ui.stepper.stepper_widgets import FitScrollArea
from attn_explorer.ui.window.actions import WindowActions, build_menu_bar, shortcut_rows
from attn_explorer.ui.window.file_commands import FileCommands

if TYPE_CHECKING:
    from attn_explorer.models.encoder.bert import TakenHead
    from attn_explorer.ui.explorer.heatmaps import HeatmapGrid
    from attn_explorer.ui.lessons.lessons_panel import LessonsPanel
    from attn_explorer.ui.model.model_view import ModelView
    from attn_explorer.ui.timing.timing_panel import TimingPanel
    from attn_explorer.ui.vectors.vectors_view import VectorsView

#: How long a status-bar message stays (ms): errors long enough to read, notes shorter.
ERROR_MESSAGE_MS = 15_000
INFO_MESSAGE_MS = 6_000


class _FirstPaint(QObject):
    """Calls ``callback`` once, soon after the watched window first paints."""

    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__()
        self.callback = callback
        self.done = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and not self.done:
            self.done = True
            watched.removeEventFilter(self)
            # after this frame is painted and shown; never once the window is gone
            QTimer.singleShot(0, watched, self.callback)
        return False


WIDE_WINDOW = 1500  # from this width the model view opens as a third column


class MainWindow(QMainWindow):
    """Attention Explorer's window over one :class:`AppState` (the single source of truth)."""

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
        # Every Qt call from this thread releases and retakes the GIL; while a worker runs
        # pure-Python code (the loop strategy) retaking it waits up to the switch interval.
        # 1 ms instead of Python's 5 ms keeps those waits from adding up to visible stalls.
        sys.setswitchinterval(0.001)
        self.state = state or AppState(session)
        self.session = self.state.session
        self.results = self.state.results
        self.files = FileCommands(self, self.state)
        self.recompute = Recompute(self.results, self)
        self.highlighter = Highlighter(self, self._before_highlight)
        self.heatmaps: HeatmapGrid | None = None  # built by _build_plots (pyqtgraph loads slowly)
        self.timing_panel: TimingPanel | None = None
        self.model_view: ModelView | None = None
        self.model_dock: QDockWidget | None = None
        self.vectors_view: VectorsView | None = None
        self.vectors_dock: QDockWidget | None = None
        from attn_explorer.ui.common.icons import app_icon

        self.setWindowIcon(app_icon())
        self._build_views()
        self._build_status_bar()
        self._build_docks()
        self.commands = WindowActions(self)
        docks = [self.inputs_dock, self.timing_dock, self.stepper_dock, self.lessons_dock]
        self.menus = build_menu_bar(
            self.menuBar(),
            self.commands,
            {
                "Step": self.stepper.transport_actions(),
                "View": [dock.toggleViewAction() for dock in docks],
            },
        )
        for action in self.stepper.transport_actions():
            action.triggered.connect(lambda _checked=False: self._show_dock(self.stepper_dock))
        self.menuBar().setCornerWidget(self.lessons_dock.start_button, Qt.Corner.TopRightCorner)
        self._connect_state()
        screen_fit.fit_window(self)
        self._restore_settings()
        if not defer_plots:
            self._build_plots()
            self._build_timing()
        else:
            self._first_paint = _FirstPaint(self._build_plots)
            self.installEventFilter(self._first_paint)
        self.recompute.run()
        self._update_title()

    @property
    def lessons(self) -> LessonsPanel:
        """The Lessons dock's panel (made on first use: the dock starts hidden)."""
        return self.lessons_dock.panel

    # -- construction ---------------------------------------------------------------------
    def _build_views(self) -> None:
        s, results, stepper = self.session, self.results, self.state.stepper
        self.tables = {name: MatrixTable(s, name) for name in ("query", "key", "value")}
        # Object names are what lessons point at (lessons.registry.HIGHLIGHT_TARGETS).
        for name, table in self.tables.items():
            table.setObjectName(f"{name}_table")
            stepper.changed.connect(table.set_frame)
        self.score_grid = ScoreGrid(s, results, stepper)
        self.score_grid.setObjectName("score_grid")
        self.score_grid.cellClicked.connect(
            lambda i, j: self.seek_cell(s.options.batch_index, s.options.head, i, j)
        )
        self.strategy_toggle = StrategyToggle(s)
        self.strategy_toggle.setObjectName("strategy_toggle")
        self.options_bar = OptionsBar(s)
        for name in ("stage", "scale", "causal"):
            getattr(self.options_bar, name).setObjectName(name)
        self.size_controls = SizeControls(s)
        for name, label in (("batch", "B"), ("heads", "H"), ("tokens", "T"), ("dim", "d")):
            self.size_controls.spins[label].setObjectName(name)
        self.code_panel = CodePanel(s, results)
        self.code_panel.setObjectName("code_panel")

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.score_grid)
        left.addWidget(self.code_panel)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        # Until the interactive heatmaps are built (just after the first paint): a picture of them.
        self._plots_placeholder: HeatmapPreview | None = HeatmapPreview(s, results)
        splitter.addWidget(self._plots_placeholder)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([480, 600])  # room for the code panel's longest line
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
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)
        self.splitter = splitter

    def _build_plots(self) -> None:
        """Create the interactive (pyqtgraph) heatmaps in the preview's place, and the timing
        charts if their dock is in front; they draw the current result."""
        if self.heatmaps is not None:
            return
        from attn_explorer.ui.explorer.heatmaps import HeatmapGrid

        s = self.session
        self.heatmaps = HeatmapGrid(s, self.results, self.state.stepper)
        self.heatmaps.setObjectName("heatmaps")
        self.heatmaps.cellClicked.connect(
            lambda h, i, j: self.seek_cell(s.options.batch_index, h, i, j)
        )
        self.heatmaps.exportRequested.connect(self.export_dialog)
        sizes = self.splitter.sizes()
        self.splitter.replaceWidget(1, self.heatmaps)
        # Shown: keep the columns where the first paint put them; else room for the code.
        self.splitter.setSizes(sizes if self.isVisible() else [480, 600])
        if self._plots_placeholder is not None:
            self._plots_placeholder.detach()
            self._plots_placeholder.deleteLater()
            self._plots_placeholder = None
        if self._timing_in_front:
            self._build_timing()

    def _on_timing_dock_shown(self, visible: bool) -> None:
        self._timing_in_front = visible
        if visible and self.heatmaps is not None:  # else _build_plots, after the first paint
            self._build_timing()

    def _build_timing(self) -> None:
        """Create the timing charts (pyqtgraph): when their dock first comes to the front."""
        if self.timing_panel is not None:
            return
        from attn_explorer.ui.timing.timing_panel import TimingPanel

        self.timing_panel = TimingPanel(self.session)
        self.timing_panel.setObjectName("timing")
        self.timing_dock.setWidget(self.timing_panel)

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea, name: str) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        inputs = QWidget()
        layout = QVBoxLayout(inputs)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.size_controls)
        self.matrix_tabs = QTabWidget()
        qk = QSplitter(Qt.Orientation.Vertical)
        for name, title in (("query", "Q — queries"), ("key", "K — keys")):
            box = QWidget()
            box_layout = QVBoxLayout(box)
            box_layout.setContentsMargins(0, 0, 0, 0)
            label = QLabel(f"<b>{title}</b> (rows = tokens, columns = d)")
            box_layout.addWidget(label)
            box_layout.addWidget(self.tables[name])
            qk.addWidget(box)
        self.matrix_tabs.addTab(qk, "Q and K")
        self.matrix_tabs.addTab(self.tables["value"], "V — values")
        self.matrix_tabs.setTabToolTip(1, "Values, used by the output stage (weights @ V)")
        layout.addWidget(self.matrix_tabs, 1)
        self.inputs_dock = self._dock(
            "Inputs", inputs, Qt.DockWidgetArea.LeftDockWidgetArea, "inputs-dock"
        )
        self.timing_dock = self._dock(
            "Timing",
            QLabel("Loading charts…"),
            Qt.DockWidgetArea.BottomDockWidgetArea,
            "timing-dock",
        )
        self.stepper = StepperPanel(self.session, self.state.stepper)
        self.stepper.setObjectName("stepper")
        scroll = FitScrollArea(self.stepper)  # scrolls only below the panel's minimum
        self.stepper_dock = self._dock(
            "Step through the loops", scroll, Qt.DockWidgetArea.BottomDockWidgetArea, "stepper-dock"
        )
        self.tabifyDockWidget(self.timing_dock, self.stepper_dock)
        self.stepper_dock.raise_()
        self._timing_in_front = False  # isVisible() stays True behind another dock's tab
        self.timing_dock.visibilityChanged.connect(self._on_timing_dock_shown)
        # The right dock area takes the bottom-right corner, so the lesson text runs the full
        # height of the window instead of sharing the top with the central views.
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        # Likewise the left area: the Q/K/V tables (and a model view sharing their place on
        # a narrow window) keep the full height on a 720-pixel screen.
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.lessons_dock = LessonsDock(self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.lessons_dock)
        self.lessons_dock.hide()

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.shape_label = QLabel()
        self.shape_label.setObjectName("shape_label")
        self.shape_label.setToolTip(
            "B = batch (separate inputs), H = heads, T = tokens, d = vector size"
        )
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.setToolTip("Computing in the background; the newest edit wins")
        self.busy.hide()
        bar.addPermanentWidget(self.busy)
        bar.addPermanentWidget(self.shape_label)
        self._error_shown = ""

    def _connect_state(self) -> None:
        ev = self.session.events
        ev.message.connect(self._on_message)
        ev.dirty.connect(lambda dirty: self._update_title())
        ev.document.connect(self._update_title)
        ev.shape.connect(self._update_shape_label)
        # A successful change makes an old complaint about a refused value out of date.
        ev.values.connect(lambda matrix: self._clear_error())
        ev.shape.connect(self._clear_error)
        self.recompute.busy.connect(self.busy.setVisible)
        self._update_shape_label()

    # -- state → window ---------------------------------------------------------------------
    def _on_message(self, text: str, level: str) -> None:
        error = level == "error"
        self.statusBar().showMessage(text, ERROR_MESSAGE_MS if error else INFO_MESSAGE_MS)
        self._error_shown = text if error else ""

    def _clear_error(self) -> None:
        if self._error_shown and self.statusBar().currentMessage() == self._error_shown:
            self.statusBar().clearMessage()
        self._error_shown = ""

    def _update_shape_label(self) -> None:
        self.shape_label.setText(self.session.shape_text())

    def _update_title(self) -> None:
        # "[*]" becomes "*" while modified; the platform adds " — Attention Explorer".
        self.setWindowTitle(f"{self.state.document.name}[*]")
        self.setWindowModified(self.session.dirty)

    def _show_dock(self, dock: QDockWidget) -> None:
        """Bring a dock to the front: a command whose result appears there was used."""
        dock.show()
        dock.raise_()

    # -- commands (menus, lessons, tests) ---------------------------------------------------
    @property
    def ask_before_discard(self) -> bool:
        return self.files.ask_before_discard

    @ask_before_discard.setter
    def ask_before_discard(self, ask: bool) -> None:
        self.files.ask_before_discard = ask

    def confirm_discard(self) -> bool:
        """Ask Save / Discard / Cancel if replacing the numbers would lose unsaved work."""
        return self.files.confirm_discard()

    def set_strategy(self, name: str) -> None:
        self.session.set_option("strategy", name)

    def set_stage(self, name: str) -> None:
        self.session.set_option("stage", name)

    def load_preset(self, name: str, *, confirm: bool = False, **kwargs: int) -> bool:
        """Load a preset as an untitled document (lessons and tests; the menu asks first)."""
        return self.files.load_preset(name, confirm=confirm, **kwargs)

    def take_model_head(self, head: TakenHead) -> bool:
        """Load one real head's Q, K, V (each (T, d_head)) into the tables; undoable, untitled."""
        try:
            tokens = [str(t) for t in head["tokens"]]
            q, k, v = (
                np.asarray(head[m], dtype=np.float64)[None, None] for m in ("query", "key", "value")
            )
            layer, number = int(head["layer"]) + 1, int(head["head"]) + 1
        except (KeyError, TypeError, ValueError) as exc:
            self.session.report(f"Could not take the head: {exc}")
            return False
        options = replace(
            self.session.options,
            head=0,
            batch_index=0,
            scale=True,
            stage="weights",
            step=-1,
            causal=bool(head.get("causal", False)),  # a decoder's head sees no later key
        )
        title = f"{head.get('model_name', 'model')} layer {layer} head {number}"
        if not self.files.replace(
            Snapshot(tuple(tokens), q, k, v), options, f"take {title}", title
        ):
            return False
        self.session.report(
            f"Loaded {title}: {len(tokens)} tokens, d = {q.shape[-1]}. Every explorer feature "
            "now works on this real head.",
            "info",
        )
        return True

    def seek_cell(self, batch: int, head: int, i: int, j: int) -> None:
        """Step the loop to score cell (batch, head, i, j), in the stepper brought to the front.

        The vectors view selects the pair too, but only for the head it draws, and not while
        the stepper asks for a prediction (the arrows would give the answer away; it
        selects the pair once the answer is in).
        """
        options = self.session.options
        if (batch, head) == (options.batch_index, options.head) and not options.predict:
            self.state.vectors.select_cell(i, j)
        self.stepper.seek_cell(batch, head, i, j)
        self._show_dock(self.stepper_dock)

    def _focused_table(self) -> MatrixTable:
        focus = QApplication.focusWidget()
        while focus is not None and not isinstance(focus, MatrixTable):
            focus = focus.parentWidget()
        return focus if isinstance(focus, MatrixTable) else self.tables["query"]

    def copy_cells(self) -> str:
        return self._focused_table().copy_selection()

    def paste_cells(self) -> bool:
        return self._focused_table().paste()

    def remove_current_token(self) -> bool:
        index = self._focused_table().currentIndex()
        return self.session.remove_token(
            index.row() if index.isValid() else self.session.shape[2] - 1
        )

    def rename_current_token(self) -> None:
        table = self._focused_table()
        index = table.currentIndex()
        table.rename_token(index.row() if index.isValid() else 0)

    def toggle_enlarge(self) -> None:
        if self.heatmaps is not None:
            enlarged = self.heatmaps.enlarged
            self.heatmaps.set_enlarged(None if enlarged is not None else self.session.options.head)

    def export_dialog(self, heads: str | None = None) -> None:
        from attn_explorer.ui.window.dialogs import export_dialog

        export_dialog(self, self.state, heads)

    def random_preset_dialog(self) -> None:
        from attn_explorer.ui.window.dialogs import random_preset_dialog

        random_preset_dialog(self, self.files)

    def run_timing(self, run_loop: bool = False) -> None:
        """Time the strategies on the current shape, in the Timing dock brought to the front."""
        self._build_timing()
        assert self.timing_panel is not None
        self._show_dock(self.timing_dock)
        self.timing_panel.run_timing(run_loop)

    def run_sweep(self) -> None:
        self._build_timing()
        assert self.timing_panel is not None
        self._show_dock(self.timing_dock)
        self.timing_panel.run_sweep()

    def cancel_timing(self) -> None:
        if self.timing_panel is not None:
            self.timing_panel.runner.cancel()

    def open_model_view(self) -> ModelView:
        """Show the Model dock (real BERT-family attention), creating it on first use."""
        if self.model_view is None or self.model_dock is None:
            from attn_explorer.ui.model.model_view import ModelView

            self.model_view = ModelView()
            self.model_view.headTaken.connect(self.take_model_head)
            self.model_dock = self._dock(
                "Model", self.model_view, Qt.DockWidgetArea.RightDockWidgetArea, "model-dock"
            )
            if self.width() < WIDE_WINDOW:
                self._share_inputs_place(self.model_dock, share=45)
        self._show_dock(self.model_dock)
        return self.model_view

    def open_vectors_view(self) -> VectorsView:
        """Show the Vectors dock (queries and keys as arrows), creating it on first use."""
        if self.vectors_view is None or self.vectors_dock is None:
            from attn_explorer.ui.vectors.vectors_view import VectorsView

            self.vectors_view = VectorsView(self.state.vectors)
            self.vectors_view.setObjectName("vectors")
            self.vectors_dock = self._dock(
                "Vectors", self.vectors_view, Qt.DockWidgetArea.RightDockWidgetArea, "vectors-dock"
            )
            if self.width() < WIDE_WINDOW:
                self._share_inputs_place(self.vectors_dock)
        self._show_dock(self.vectors_dock)
        return self.vectors_view

    def _share_inputs_place(self, dock: QDockWidget, share: int | None = None) -> None:
        """On a window narrower than WIDE_WINDOW a third column would squeeze every view:
        ``dock`` shares the inputs' full-height place instead (their tab stays one click
        away), ``share`` per cent of the width if given."""
        self.tabifyDockWidget(self.inputs_dock, dock)
        self._show_dock(dock)
        if share is not None:
            self.resizeDocks([dock], [self.width() * share // 100], Qt.Orientation.Horizontal)

    def open_model_folder(self) -> None:
        self.open_model_view().choose_folder()

    def open_model_file(self) -> None:
        self.open_model_view().choose_file()

    def open_lessons(self) -> None:
        self.lessons_dock.open()

    def show_shortcuts(self) -> None:
        message_box(self, QMessageBox.Icon.Information, "Keyboard shortcuts", self.shortcuts_text())

    def shortcuts_text(self) -> str:
        """Every shortcut, read from the actions themselves (the README's table agrees)."""
        rows = shortcut_rows([*self.commands.all(), *self.stepper.transport_actions()])
        lines = [f"{keys} — {what}" for keys, what in rows]
        lines.append(
            "Alt+1 / Alt+2 / Alt+3 switch strategy while a table has the keyboard; "
            "Escape gives the keyboard back to the window"
        )
        return "\n".join(lines)

    def highlight_targets(self) -> dict[str, QWidget]:
        """The controls a lesson may point at, by name (their object names)."""
        return self.highlighter.targets()

    def highlight(self, name: str | None, duration_ms: int = DEFAULT_HIGHLIGHT_MS) -> None:
        """Draw an orange frame around a named control for a moment (None clears)."""
        self.highlighter.highlight(name, duration_ms)

    def _before_highlight(self, name: str) -> None:
        if name == "heatmaps":
            self._build_plots()  # a lesson may point at them before the deferred build
        if name == "timing":
            self._build_timing()
        if name in ("timing", "stepper"):
            self._show_dock(self.timing_dock if name == "timing" else self.stepper_dock)

    def set_dark(self, dark: bool) -> None:
        palette.apply(dark)
        settings().setValue("dark", dark)

    def about(self) -> None:
        from attn_explorer.ui.common.icons import about_text

        QMessageBox.about(self, "About Attention Explorer", about_text())

    # -- settings, close --------------------------------------------------------------------
    def _default_dock_sizes(self) -> None:
        """First start: give the central views most of the room (docks stay resizable)."""
        width, height = self.width(), self.height()
        self.resizeDocks([self.inputs_dock], [min(380, width * 3 // 10)], Qt.Orientation.Horizontal)
        stepper = max(240, min(300, height * 36 // 100))
        self.resizeDocks([self.stepper_dock], [stepper], Qt.Orientation.Vertical)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not getattr(self, "_kept_inside", False):
            self._kept_inside = True  # once: the frame's size is known only now
            QTimer.singleShot(0, self, lambda: screen_fit.keep_inside(self))
        if not self._state_restored and not getattr(self, "_docks_sized", False):
            self._docks_sized = True
            self._default_dock_sizes()  # now, so the first paint has them (no jump a frame on)

    def _restore_settings(self) -> None:
        """The user's size and dock layout, only where they still fit the screen."""
        s = settings()
        geometry = s.value("geometry")
        self._state_restored = False
        if isinstance(geometry, QByteArray) and screen_fit.saved_frame_fits(s.value("frame")):
            self.restoreGeometry(geometry)
            state = s.value("window_state")
            self._state_restored = isinstance(state, QByteArray) and self.restoreState(state)
        if s.value("dark", False, type=bool):
            palette.apply(True)
            self.commands.dark.setChecked(True)

    def save_settings(self) -> None:
        s = settings()
        s.setValue("geometry", self.saveGeometry())
        frame = self.frameGeometry()  # checked against the screen at the next start
        s.setValue("frame", [frame.x(), frame.y(), frame.width(), frame.height()])
        s.setValue("window_state", self.saveState())
        s.sync()

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
        if self._plots_placeholder is not None:
            self._plots_placeholder.detach()  # closed before the grid replaced it
            self._plots_placeholder = None
        if self.timing_panel is not None:
            self.timing_panel.runner.cancel(quiet=True)
        self.stepper.shutdown()
        if self.model_view is not None:
            self.model_view.shutdown()
        if self.vectors_view is not None:
            self.vectors_view.shutdown()
