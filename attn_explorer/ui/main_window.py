"""The main window: builds the panels and menus and wires session events to views. No math.

Data flows one way: an edit goes into the :class:`Session`; the session's events
schedule a (debounced) recompute; the result is pushed into the score grid and
the heatmaps. Small shapes compute on the spot (within one frame of the edit);
big ones compute in a worker and the newest edit wins.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer import __version__
from attn_explorer.compute import STRATEGIES, AttentionResult, attention, attention_scores
from attn_explorer.compute.timing import estimate_loop_seconds
from attn_explorer.state import Session, Snapshot
from attn_explorer.state.stepper import Frame
from attn_explorer.ui import palette
from attn_explorer.ui.controls import (
    CodePanel,
    OptionsBar,
    SizeControls,
    StrategyToggle,
    format_seconds,
)
from attn_explorer.ui.matrix_table import MatrixTable
from attn_explorer.ui.score_grid import ScoreGrid
from attn_explorer.ui.settings import settings
from attn_explorer.ui.workers import LatestRunner

#: Score cells (B·H·T·T) up to which results are computed on the GUI thread.
SYNC_CELLS = 64 * 64 * 8
#: The loop strategy is not run for results if it is predicted to take longer (s).
LOOP_RESULT_LIMIT = 3.0
#: The other strategies are run for the agreement check when the loop takes less (s).
AGREEMENT_LOOP_LIMIT = 1.0
#: A loop predicted to finish sooner than this (s) runs on the GUI thread, within the frame.
SYNC_LOOP_SECONDS = 0.02


def compute_job(inputs: dict[str, Any]) -> Any:
    """Worker job: the attention result for ``inputs`` (the loop only if it is quick enough)."""

    def job(progress: Any, should_stop: Any) -> tuple[int, AttentionResult, str]:
        strategy = inputs["strategy"]
        used = strategy
        if strategy == "loop":
            eta = estimate_loop_seconds(inputs["query"].shape, inputs["key"].shape)
            if eta > LOOP_RESULT_LIMIT:
                used = "batched"
        result = attention(
            inputs["query"],
            inputs["key"],
            inputs["value"],
            strategy=used,
            scale=inputs["scale"],
            causal=inputs["causal"],
        )
        return inputs["revision"], result, used

    return job


def agreement_job(inputs: dict[str, Any]) -> Any:
    """Worker job: max |difference| of the scores of every strategy against the chosen one."""

    def job(progress: Any, should_stop: Any) -> tuple[int, dict[str, float]]:
        chosen = inputs["strategy"]
        scores = {
            name: attention_scores(inputs["query"], inputs["key"], name) for name in STRATEGIES
        }
        diffs = {
            name: float(np.max(np.abs(scores[name] - scores[chosen])))
            for name in STRATEGIES
            if name != chosen
        }
        return inputs["revision"], diffs

    return job


class _FirstPaint(QObject):
    """Calls ``callback`` once, soon after the watched window first paints."""

    def __init__(self, callback: Any) -> None:
        super().__init__()
        self.callback = callback
        self.done = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and not self.done:
            self.done = True
            QTimer.singleShot(0, self.callback)
        return False


class _ShortcutGuard(QObject):
    """Lets plain typing reach a table (to start editing) instead of window shortcuts 1/2/3."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride:
            key_event = event  # QKeyEvent
            text = key_event.text()  # type: ignore[attr-defined]
            if (
                text
                and text.isprintable()
                and not key_event.modifiers()
                & (  # type: ignore[attr-defined]
                    Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
                )
            ):
                event.accept()
                return True
        return False


class MainWindow(QMainWindow):
    """Attention Explorer's window. ``session`` is the single source of truth."""

    def __init__(self, session: Session | None = None, *, defer_plots: bool = False) -> None:
        """``defer_plots`` builds the pyqtgraph views just after the first paint (faster start)."""
        super().__init__()
        # Every Qt call from this thread releases and retakes the GIL; while a worker runs
        # pure-Python code (the loop strategy) retaking it waits up to the switch interval.
        # 1 ms instead of Python's 5 ms keeps those waits from adding up to visible stalls.
        sys.setswitchinterval(0.001)
        self.session = session or Session()
        self.ask_before_discard = True
        self.result: AttentionResult | None = None
        self.result_strategy = self.session.options.strategy
        self.diffs: dict[str, float] = {}
        self.frame: Frame | None = None
        self.setWindowTitle("Attention Explorer")
        from attn_explorer.ui.icons import app_icon

        self.setWindowIcon(app_icon())
        self._build_views()
        self._build_docks()
        self._build_actions()
        self._build_status_bar()
        self._connect_session()
        self.runner = LatestRunner(self)
        self.runner.finished.connect(self._on_worker_result)
        self.runner.failed.connect(self._on_worker_failed)
        self.runner.busy.connect(self._on_busy)
        self.agreement_runner = LatestRunner(self)
        self.agreement_runner.finished.connect(self._on_agreement)
        self.agreement_runner.failed.connect(self._on_worker_failed)
        self.agreement_pending = False
        self._agreement_inputs: dict[str, Any] | None = None
        self._agreement_timer = QTimer(self)
        self._agreement_timer.setSingleShot(True)
        self._agreement_timer.setInterval(150)
        self._agreement_timer.timeout.connect(self._start_agreement)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(40)
        self._debounce.timeout.connect(self.recompute)
        self.resize(1400, 900)
        self._restore_settings()
        if not defer_plots:
            self._build_plots()
        else:
            self._first_paint = _FirstPaint(self._build_plots)
            self.installEventFilter(self._first_paint)
        self.recompute(sync=True)
        self._update_title()
        from attn_explorer.ui.lessons_panel import install

        self.lessons = install(self)

    # -- construction ---------------------------------------------------------------------
    def _build_views(self) -> None:
        s = self.session
        self.tables = {name: MatrixTable(s, name) for name in ("query", "key", "value")}
        guard = _ShortcutGuard(self)
        for table in self.tables.values():
            table.installEventFilter(guard)
        self._guard = guard
        self.score_grid = ScoreGrid(s)
        self.heatmaps: Any = None  # built by _build_plots (pyqtgraph loads slowly)
        self.timing_panel: Any = None
        self.score_grid.cellClicked.connect(
            lambda i, j: self.seek_cell(s.options.batch_index, s.options.head, i, j)
        )
        self.strategy_toggle = StrategyToggle(s)
        self.options_bar = OptionsBar(s)
        self.size_controls = SizeControls(s)
        self.code_panel = CodePanel(s)

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.score_grid)
        left.addWidget(self.code_panel)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        self._plots_placeholder = QLabel("Loading heatmaps…")
        self._plots_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
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
        """Create the pyqtgraph views (heatmaps, timing charts) and show the current result."""
        if self.heatmaps is not None:
            return
        from attn_explorer.ui.heatmaps import HeatmapGrid
        from attn_explorer.ui.timing_panel import TimingPanel

        s = self.session
        self.heatmaps = HeatmapGrid(s)
        self.heatmaps.cellClicked.connect(
            lambda h, i, j: self.seek_cell(s.options.batch_index, h, i, j)
        )
        self.heatmaps.exportRequested.connect(self._export_from_heatmap)
        self.splitter.replaceWidget(1, self.heatmaps)
        self._plots_placeholder.deleteLater()
        self.timing_panel = TimingPanel(s)
        self.timing_dock.setWidget(self.timing_panel)
        self.splitter.setSizes([480, 600])
        if self.result is not None:
            self.show_result()
        self.set_frame(self.frame)

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
            "Inputs", inputs, Qt.DockWidgetArea.LeftDockWidgetArea, "inputs"
        )
        self.timing_dock = self._dock(
            "Timing", QLabel("Loading charts…"), Qt.DockWidgetArea.BottomDockWidgetArea, "timing"
        )
        from attn_explorer.ui.stepper import StepperPanel

        self.stepper = StepperPanel(self.session)
        self.stepper.frameChanged.connect(self.set_frame)
        scroll = QScrollArea()  # the panel scrolls rather than forcing a tall dock
        scroll.setWidget(self.stepper)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.stepper_dock = self._dock(
            "Step through the loops", scroll, Qt.DockWidgetArea.BottomDockWidgetArea, "stepper"
        )
        self.tabifyDockWidget(self.timing_dock, self.stepper_dock)
        self.stepper_dock.raise_()

    def _build_actions(self) -> None:
        from attn_explorer.ui import menus

        menus.build_menus(self)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.shape_label = QLabel()
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

    def _connect_session(self) -> None:
        ev = self.session.events
        ev.values.connect(lambda matrix: self.schedule())
        ev.shape.connect(self._on_shape_changed)
        ev.tokens.connect(lambda: self.show_result())
        ev.options.connect(self._on_option_changed)
        ev.message.connect(self._on_message)
        ev.dirty.connect(lambda dirty: self._update_title())

    # -- session → views ------------------------------------------------------------------
    def _on_shape_changed(self) -> None:
        if self.heatmaps is not None:
            self.heatmaps.set_enlarged(None, redraw=False)  # the new result redraws
        self.schedule()

    def _on_option_changed(self, name: str) -> None:
        if name == "step":
            return  # the stepper's position: the stepper's frame does the showing
        if name in ("strategy", "scale", "causal", "dtype", "all"):
            self.schedule()
        elif name in (
            "stage",
            "head",
            "batch_index",
            "shared_scale",
            "score_colormap",
            "weight_colormap",
        ):
            self.show_result()
        self._update_shape_label()

    def _on_message(self, text: str, level: str) -> None:
        timeout = 0 if level == "error" else 6000
        self.statusBar().showMessage(text, timeout)

    def schedule(self) -> None:
        """Recompute soon: small shapes within a frame, big ones debounced into the worker."""
        b, h, t, _ = self.session.shape
        if b * h * t * t <= SYNC_CELLS:
            self.recompute(sync=True)
        else:
            self._debounce.start()

    def recompute(self, sync: bool | None = None) -> None:
        """Compute the current result (here if it is quick, else in the worker).

        The agreement check of the other strategies always runs in the background.
        """
        b, h, t, _ = self.session.shape
        inputs = self.session.compute_inputs()
        eta = estimate_loop_seconds(inputs["query"].shape, inputs["key"].shape)
        if sync is None or sync:
            sync = b * h * t * t <= SYNC_CELLS and (
                inputs["strategy"] != "loop" or eta < SYNC_LOOP_SECONDS
            )
        job = compute_job(inputs)
        self.diffs = {}
        self.agreement_pending = eta < AGREEMENT_LOOP_LIMIT
        if sync:
            try:
                outcome = job(lambda f, m: None, lambda: False)
            except ValueError as exc:
                self._on_worker_failed(str(exc))
                return
            self._on_worker_result(outcome)
        else:
            self.runner.submit(job)
        self.agreement_runner.cancel(quiet=True)
        self._agreement_inputs = inputs if self.agreement_pending else None
        if self.agreement_pending:
            self._agreement_timer.start()  # after the edit has painted, not competing with it

    def _start_agreement(self) -> None:
        inputs = self._agreement_inputs
        if inputs is not None and inputs["revision"] == self.session.revision:
            self.agreement_runner.submit(agreement_job(inputs))

    def _on_worker_result(self, outcome: object) -> None:
        revision, result, used = outcome  # type: ignore[misc]
        if not self.session.accept_result(revision, result):
            return  # stale: a newer edit is on its way
        self.result, self.result_strategy = result, used
        self.show_result()

    def _on_agreement(self, outcome: object) -> None:
        revision, diffs = outcome  # type: ignore[misc]
        if revision == self.session.revision:
            self.diffs = diffs
            self.agreement_pending = False
            self._update_provenance()

    def _on_worker_failed(self, message: str) -> None:
        self.statusBar().showMessage(f"Could not compute: {message}")

    def _on_busy(self, busy: bool) -> None:
        self.busy.setVisible(busy)

    def show_result(self) -> None:
        """Push the cached result into the grid, the heatmaps and the read-outs."""
        result = self.result
        stage = self.session.options.stage
        self.score_grid.set_result(result, stage)
        if self.heatmaps is not None:
            self.heatmaps.set_result(result, stage)
        self.score_grid.set_frame(self.frame)
        self._update_provenance()
        self._update_shape_label()

    def _update_provenance(self) -> None:
        chosen = self.session.options.strategy
        used = self.result_strategy
        lines = [f"Result computed with <b>{used}</b>."]
        if used != chosen:
            shape = self.session.matrix("query").shape
            eta = estimate_loop_seconds(shape, shape)
            lines = [
                f"The loop would take about {format_seconds(eta)} here, so the result shown was "
                f"computed with <b>{used}</b> (the same numbers). Use Timing ▸ Run loop anyway "
                "to time it."
            ]
        if self.agreement_pending and not self.diffs:
            lines.append("Checking that the other strategies agree…")
        elif self.diffs:
            lines.append(
                "Max |difference| vs "
                + ", ".join(f"{name}: {value:.3g}" for name, value in self.diffs.items())
                + (" — they agree." if max(self.diffs.values()) < 1e-3 else "")
            )
        else:
            lines.append("Agreement check skipped: the loop would be slow on this shape.")
        self.code_panel.set_provenance("<br>".join(lines))
        self.code_panel.set_strategy(chosen)

    def _update_shape_label(self) -> None:
        self.shape_label.setText(self.session.shape_text())

    def set_frame(self, frame: Frame | None) -> None:
        """The stepper moved: highlight tables, fill the grid and heatmap progressively."""
        self.frame = frame
        for table in self.tables.values():
            table.set_frame(frame)
        self.score_grid.set_frame(frame)
        if self.heatmaps is not None:
            self.heatmaps.set_frame(frame)
        step = frame.step if frame is not None else None
        if step is not None and step.head != self.session.options.head:
            self.session.set_option("head", step.head)  # follow the loop into the next head

    def _export_from_heatmap(self, heads: str) -> None:
        from attn_explorer.ui import menus

        menus.export_dialog(self, heads)

    # -- public actions (menus, lessons, tests) ------------------------------------------
    def set_strategy(self, name: str) -> None:
        self.session.set_option("strategy", name)

    def set_stage(self, name: str) -> None:
        self.session.set_option("stage", name)

    def load_preset(self, name: str, **kwargs: Any) -> bool:
        from attn_explorer.state.presets import PRESETS

        preset = PRESETS[name](**kwargs) if kwargs else PRESETS[name]()
        ok = self.session.load(preset.snapshot, preset.options, f"load {preset.title}")
        if ok:
            self.statusBar().showMessage(
                f"Loaded preset: {preset.title} — {preset.description}", 8000
            )
        return ok

    def open_model_view(self) -> Any:
        """Show the Model dock (real BERT-family attention), creating it on first use."""
        if getattr(self, "model_view", None) is None:
            from attn_explorer.ui.model_view import ModelView

            self.model_view = ModelView()
            self.model_view.headTaken.connect(self.take_model_head)
            self.model_dock = self._dock(
                "Model", self.model_view, Qt.DockWidgetArea.RightDockWidgetArea, "model"
            )
        self.model_dock.show()
        self.model_dock.raise_()
        return self.model_view

    def take_model_head(self, head: dict[str, Any]) -> bool:
        """Load one real head's Q, K, V (each (T, d_head)) into the tables; undoable."""
        tokens = [str(t) for t in head["tokens"]]
        q, k, v = (
            np.asarray(head[m], dtype=np.float64)[None, None] for m in ("query", "key", "value")
        )
        snapshot = Snapshot(tuple(tokens), q, k, v)
        options = replace(
            self.session.options, head=0, batch_index=0, scale=True, stage="weights", step=-1
        )
        title = (
            f"{head.get('model_name', 'model')} layer {head['layer'] + 1} head {head['head'] + 1}"
        )
        if not self.session.load(snapshot, options, f"take {title}"):
            return False
        self.session.name = title.replace(" ", "-")
        self.statusBar().showMessage(
            f"Loaded {title}: {len(tokens)} tokens, d = {q.shape[-1]}. Every explorer feature "
            "now works on this real head.",
            8000,
        )
        return True

    def seek_cell(self, batch: int, head: int, i: int, j: int) -> None:
        self.stepper.seek_cell(batch, head, i, j)

    def highlight_targets(self) -> dict[str, QWidget]:
        """The controls a lesson may point at, by name."""
        targets: dict[str, QWidget] = {
            "query_table": self.tables["query"],
            "key_table": self.tables["key"],
            "value_table": self.tables["value"],
            "score_grid": self.score_grid,
            "heatmaps": self.heatmaps,
            "strategy_toggle": self.strategy_toggle,
            "stage": self.options_bar.stage,
            "scale": self.options_bar.scale,
            "causal": self.options_bar.causal,
            "batch": self.size_controls.spins["B"],
            "heads": self.size_controls.spins["H"],
            "tokens": self.size_controls.spins["T"],
            "dim": self.size_controls.spins["d"],
            "code_panel": self.code_panel,
            "timing": self.timing_panel,
            "shape_label": self.shape_label,
        }
        if self.stepper is not None:
            targets["stepper"] = self.stepper
        return {name: widget for name, widget in targets.items() if widget is not None}

    def highlight(self, name: str | None, duration_ms: int = 2500) -> None:
        """Draw an orange frame around a named control for a moment (None clears)."""
        for widget in self.highlight_targets().values():
            if widget.property("lessonHighlight"):
                widget.setProperty("lessonHighlight", False)
                widget.setStyleSheet(widget.property("plainStyle") or "")
        if name is None:
            return
        if name in ("heatmaps", "timing"):
            self._build_plots()  # a lesson may point at them before the deferred build
        targets = self.highlight_targets()
        if name not in targets:
            raise KeyError(f"unknown highlight target {name!r}; one of {', '.join(targets)}")
        widget = targets[name]
        widget.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)  # plain QWidgets too
        widget.setProperty("plainStyle", widget.styleSheet())
        widget.setProperty("lessonHighlight", True)
        cls = type(widget).__name__
        widget.setStyleSheet(f"{cls} {{ border: 3px solid #ff8c00; }}")
        if name in ("timing", "stepper"):
            dock = self.timing_dock if name == "timing" else self.stepper_dock
            dock.raise_()
        if duration_ms > 0:
            QTimer.singleShot(duration_ms, lambda: self._clear_highlight(widget))

    def _clear_highlight(self, widget: QWidget) -> None:
        if widget.property("lessonHighlight"):
            widget.setProperty("lessonHighlight", False)
            widget.setStyleSheet(widget.property("plainStyle") or "")

    def undo(self) -> None:
        self.session.undo()

    def redo(self) -> None:
        self.session.redo()

    def set_dark(self, dark: bool) -> None:
        palette.apply(dark)
        settings().setValue("dark", dark)

    def about(self) -> None:
        from attn_explorer.ui.icons import about_text

        QMessageBox.about(self, "About Attention Explorer", about_text())

    # -- title, settings, close -------------------------------------------------------------
    def _update_title(self) -> None:
        name = self.session.name or "untitled"
        star = "*" if self.session.dirty else ""
        self.setWindowTitle(f"{name}{star} — Attention Explorer {__version__}")

    def _default_dock_sizes(self) -> None:
        """First start: give the central views most of the height (docks stay resizable)."""
        self.resizeDocks([self.inputs_dock], [380], Qt.Orientation.Horizontal)
        self.resizeDocks([self.stepper_dock], [270], Qt.Orientation.Vertical)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if not self._state_restored and not getattr(self, "_docks_sized", False):
            self._docks_sized = True
            QTimer.singleShot(0, self._default_dock_sizes)

    def _restore_settings(self) -> None:
        s = settings()
        geometry = s.value("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)  # type: ignore[arg-type]
        state = s.value("window_state")
        self._state_restored = state is not None and bool(
            self.restoreState(state)  # type: ignore[arg-type]
        )
        dark = s.value("dark", False, type=bool)
        if dark:
            palette.apply(True)
            self.dark_action.setChecked(True)

    def save_settings(self) -> None:
        s = settings()
        s.setValue("geometry", self.saveGeometry())
        s.setValue("window_state", self.saveState())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        from attn_explorer.ui import menus

        if not menus.confirm_discard(self):
            event.ignore()
            return
        self.runner.cancel(quiet=True)
        if self.timing_panel is not None:
            self.timing_panel.runner.cancel(quiet=True)
        self.save_settings()
        menus.write_autosave(self, final=True)
        self.stepper.shutdown()
        if getattr(self, "model_view", None) is not None:
            self.model_view.shutdown()
        event.accept()
