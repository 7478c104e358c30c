"""The stepper panel: play / pause / step / back controls driving the loop trace.

A thin widget over the application's :class:`attn_explorer.state.views.stepper.Stepper`
(the model lives in the application state and outlives the panel): the model owns
the position and every rule (granularity, strategy contrast, predict mode, edits
while stepping); this panel turns user input into model calls, shows the model's
:class:`Frame` (counter, working, code line, locals) and re-emits it as
``frameChanged`` for the tables, score grid and heatmaps. Play is a QTimer, so
the event loop never blocks.

One job at ~500 lines: the stepper's controls and read-outs; its small widgets
are in :mod:`.stepper_widgets` and its texts in :mod:`attn_explorer.state.views.stepper_text`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QFont,
    QFontDatabase,
    QKeySequence,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QBoxLayout,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import GRANULARITIES, STRATEGIES
from attn_explorer.state import Session
from attn_explorer.state.labels import STRATEGY_SUMMARIES
from attn_explorer.state.views.stepper import Frame, Stepper
from attn_explorer.state.views.stepper_text import code_lines, frame_locals
from attn_explorer.ui.common.text import plain_tooltip
from attn_explorer.ui.stepper.stepper_widgets import (
    CodeView,
    FocusWheelSlider,
    Readout,
    StrategySummary,
    abbreviate_sum,
    save_widget_png,
)
from attn_explorer.ui.stepper.tiled_readout import TiledReadout

SIDE_BY_SIDE_WIDTH = 860  # narrower than this, the code column goes under the controls
MAX_RATE = 60  # steps per second at the slider's right end
DEFAULT_RATE = 4
SLIDER_STEPS = 100_000  # the scrub slider's resolution for runs longer than this
RIGHT_COLOUR = "#1a7f37"
WRONG_COLOUR = "#b3261e"


class StepperPanel(QWidget):
    """Controls and read-outs of the stepper; emits ``frameChanged(Frame | None)``.

    ``frameChanged`` carries the model's Frame after every step, seek or edit, and
    None while the stepper is stopped (views then show the finished results).
    Public moves: :meth:`play`, :meth:`pause`, :meth:`step_forward`,
    :meth:`step_back`, :meth:`to_start`, :meth:`to_end`, :meth:`seek`,
    :meth:`seek_cell`, :meth:`stop`. The QActions ``play_action``,
    ``step_action``, ``back_action``, ``start_action``, ``end_action`` and
    ``stop_action`` carry the keyboard shortcuts (Space, →, ←, Home, End) for
    the panel and can be added to a menu. ``export_frame_callback`` is called by
    the "Export frame…" button; replace it to export another area.
    """

    frameChanged = Signal(object)

    def __init__(
        self,
        session: Session,
        stepper: Stepper,
        parent: QWidget | None = None,
        *,
        measure_times: bool = True,
    ) -> None:
        """``stepper`` is the application's stepper model (it outlives this panel)."""
        super().__init__(parent)
        self.session = session
        self.stepper = stepper
        self.export_frame_callback: Callable[[], None] = self.export_frame_default
        self._playing = False
        self._resume_after_answer = False

        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._on_tick)
        self.summary = StrategySummary(measure_times=measure_times)

        self._build_actions()
        self._build_widgets()
        # Clicking anywhere on the panel gives it the focus, so Space / arrows / Home / End work.
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.stepper.changed.connect(self._on_stepper_changed)
        # The model belongs to the application state: when the panel goes, it stops listening.
        self.destroyed.connect(functools.partial(_forget, self.stepper, self._on_stepper_changed))
        self._on_stepper_changed(self.stepper.frame())

    # -- building --------------------------------------------------------------------
    def _action(
        self, text: str, icon: QStyle.StandardPixmap, key: Qt.Key, slot: Callable
    ) -> QAction:
        action = QAction(self.style().standardIcon(icon), text, self)
        action.setShortcut(QKeySequence(key))
        action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        action.setToolTip(f"{text} ({QKeySequence(key).toString()})")
        action.setProperty("helpText", f"Stepper: {text.lower()} (while the stepper has focus)")
        action.triggered.connect(slot)
        self.addAction(action)  # the shortcut works while focus is anywhere in the panel
        return action

    def _build_actions(self) -> None:
        sp = QStyle.StandardPixmap
        self.start_action = self._action(
            "Start", sp.SP_MediaSkipBackward, Qt.Key.Key_Home, self.to_start
        )
        self.back_action = self._action(
            "Step back", sp.SP_MediaSeekBackward, Qt.Key.Key_Left, self.step_back
        )
        self.play_action = self._action("Play", sp.SP_MediaPlay, Qt.Key.Key_Space, self.toggle_play)
        self.play_action.setProperty("helpText", "Stepper: play / pause (while it has focus)")
        self.step_action = self._action(
            "Step forward", sp.SP_MediaSeekForward, Qt.Key.Key_Right, self.step_forward
        )
        self.end_action = self._action("End", sp.SP_MediaSkipForward, Qt.Key.Key_End, self.to_end)
        self.stop_action = QAction(
            self.style().standardIcon(sp.SP_MediaStop), "Stop stepping", self
        )
        self.stop_action.setToolTip("Stop stepping and show the finished results")
        self.stop_action.triggered.connect(self.stop)

    def _build_widgets(self) -> None:
        """Two columns, so the essentials fit a short dock without scrolling: on the left
        the transport, position, partial sum and predict feedback; on the right the line
        of code that ran and its locals."""
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        columns = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        columns.setContentsMargins(6, 4, 6, 4)
        self.columns = columns
        left = QVBoxLayout()
        left.setSpacing(4)
        left.addLayout(self._build_transport())
        left.addLayout(self._build_choices())
        self._build_readouts(mono)
        left.addWidget(self.scrub_slider)
        left.addWidget(self.counter_label)
        left.addWidget(self.working_label)
        self._build_predict_row()
        left.addWidget(self.predict_row)
        left.addWidget(self.predict_label)
        left.addWidget(TiledReadout(self.session))  # shown while the strategy is tiled
        left.addLayout(self._build_summary_row(), 1)
        self.export_button = QPushButton("Export frame…")
        self.export_button.setToolTip(
            "Save the window as it looks now, highlights included, as a PNG image"
        )
        self.export_button.clicked.connect(lambda: self.export_frame_callback())
        right = QVBoxLayout()
        right.setSpacing(4)
        self.code_view = CodeView(mono)
        right.addWidget(self.code_view, 1)
        self.locals_label = Readout(lines=2, font=mono)
        self.locals_label.setToolTip("The loop variables after the step, like a debugger's locals")
        right.addWidget(self.locals_label)
        right.addWidget(self.export_button, 0, Qt.AlignmentFlag.AlignRight)
        columns.addLayout(left, 1)
        columns.addLayout(right, 1)
        self._on_speed_changed()

    def _build_transport(self) -> QHBoxLayout:
        """Start, back, play, step, end, stop buttons and the speed."""
        transport = QHBoxLayout()
        for action in (
            self.start_action,
            self.back_action,
            self.play_action,
            self.step_action,
            self.end_action,
            self.stop_action,
        ):
            button = QToolButton()
            button.setDefaultAction(action)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keep arrows / Space for the panel
            transport.addWidget(button)
        transport.addSpacing(12)
        transport.addWidget(QLabel("Speed"))
        self.speed_slider = FocusWheelSlider(Qt.Orientation.Horizontal)
        self.speed_slider.setRange(1, MAX_RATE)
        self.speed_slider.setValue(DEFAULT_RATE)
        self.speed_slider.setToolTip("Steps per second while playing (1 to 60)")
        self.speed_slider.setMinimumWidth(80)
        self.speed_slider.valueChanged.connect(self._on_speed_changed)
        self.speed_slider.setMaximumWidth(160)
        transport.addWidget(self.speed_slider, 1)
        self.speed_label = QLabel()
        self.speed_label.setMinimumWidth(
            self.speed_label.fontMetrics().horizontalAdvance("60 steps/s ")
        )
        transport.addWidget(self.speed_label)
        self.fast_check = QCheckBox("fastest")
        self.fast_check.setToolTip("Play one step per event-loop turn, without waiting")
        self.fast_check.toggled.connect(self._on_speed_changed)
        transport.addWidget(self.fast_check)
        return transport

    def _build_choices(self) -> QHBoxLayout:
        """Strategy, unit of a step and predict mode."""
        choices = QHBoxLayout()
        choices.addWidget(QLabel("Strategy"))
        self.strategy_combo = QComboBox()
        for name in STRATEGIES:
            self.strategy_combo.addItem(STRATEGY_SUMMARIES[name], name)
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_changed)
        # narrow enough for a 1000-pixel window; the open list shows the whole text
        self.strategy_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.strategy_combo.setMinimumContentsLength(14)
        choices.addWidget(self.strategy_combo)
        choices.addSpacing(12)
        choices.addWidget(QLabel("Step by"))
        self.granularity_combo = QComboBox()
        for name in GRANULARITIES:
            self.granularity_combo.addItem("query row" if name == "row" else name, name)
        self.granularity_combo.currentIndexChanged.connect(self._on_granularity_changed)
        self.granularity_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.granularity_combo.setMinimumContentsLength(9)
        choices.addWidget(self.granularity_combo)
        choices.addSpacing(12)
        self.predict_check = QCheckBox("Predict each cell")
        self.predict_check.setToolTip(
            "Before a score cell is revealed, pause and ask for the value you expect"
        )
        self.predict_check.toggled.connect(self._on_predict_changed)
        choices.addWidget(self.predict_check)
        choices.addStretch(1)
        return choices

    def _build_readouts(self, mono: QFont) -> None:
        """The scrub slider, the counter and the partial sum written out."""
        self.scrub_slider = FocusWheelSlider(Qt.Orientation.Horizontal)
        self.scrub_slider.setToolTip("Scrub through the whole run")
        self.scrub_slider.valueChanged.connect(self._on_scrub_changed)
        self.counter_label = Readout()
        working_font = QFont(mono)
        working_font.setPointSizeF(mono.pointSizeF() * 1.25)
        # two lines whatever the text, so the panel does not jump as sums grow
        self.working_label = Readout(lines=2, font=working_font)
        self.working_label.setToolTip(
            "The partial sum written out: q[i][d]·k[j][d] for each d so far"
        )

    def _build_predict_row(self) -> None:
        """Predict mode's answer box and the question / verdict under it."""
        self.predict_row = QWidget()
        predict = QHBoxLayout(self.predict_row)
        predict.setContentsMargins(0, 0, 0, 0)
        predict.addWidget(QLabel("Your prediction:"))
        self.answer_edit = QLineEdit()
        self.answer_edit.setPlaceholderText("a number")
        self.answer_edit.setMaximumWidth(140)
        self.answer_edit.returnPressed.connect(self.submit_answer)
        predict.addWidget(self.answer_edit)
        self.check_button = QPushButton("Check")
        self.check_button.clicked.connect(self.submit_answer)
        predict.addWidget(self.check_button)
        predict.addStretch(1)
        self.predict_label = QLabel()  # the question, then the verdict with the working
        self.predict_label.setTextFormat(Qt.TextFormat.PlainText)  # holds token names
        self.predict_label.setWordWrap(True)
        self.predict_label.setMinimumHeight(2 * self.predict_label.fontMetrics().lineSpacing())
        self.predict_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)

    def _build_summary_row(self) -> QHBoxLayout:
        """How the strategies divide the work and their times (in whatever room is left)."""
        bottom = QHBoxLayout()
        self.summary_label = self.summary.summary_label
        self.timing_label = self.summary.timing_label
        # the summary takes what room is left, never making the dock scroll to the code
        self.summary.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        bottom.addWidget(self.summary, 1)
        return bottom

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.arrange(event.size().width())

    def arrange(self, width: int) -> None:
        """Side by side where there is room; on a narrow dock the code goes under the controls
        (the dock then scrolls)."""
        wanted = (
            QBoxLayout.Direction.LeftToRight
            if width >= SIDE_BY_SIDE_WIDTH
            else QBoxLayout.Direction.TopToBottom
        )
        if self.columns.direction() != wanted:
            self.columns.setDirection(wanted)
            self.columns.activate()  # lay out now, not after the next event-loop turn

    def transport_actions(self) -> list[QAction]:
        """Play, step, back, start, end and stop: for the window's Step menu."""
        return [
            self.play_action,
            self.step_action,
            self.back_action,
            self.start_action,
            self.end_action,
            self.stop_action,
        ]

    # -- public moves -------------------------------------------------------------------
    def frame(self) -> Frame | None:
        """The Frame on screen, or None while stopped."""
        return self.stepper.frame()

    def is_playing(self) -> bool:
        return self._playing

    def play(self) -> None:
        """Start the timer; from the end, play starts again at the beginning."""
        if self.stepper.at_end:
            self.stepper.to_start()
        self._playing = True
        self._resume_after_answer = False
        self._timer.start(self._interval())
        self._show_play_state()

    def pause(self) -> None:
        self._playing = False
        self._timer.stop()
        self._show_play_state()

    def toggle_play(self) -> None:
        if self._playing:
            self.pause()
        else:
            self.play()

    def step_forward(self) -> None:
        """One step (pauses play). In predict mode the first press asks, the next one reveals."""
        self.pause()
        self.stepper.step_forward()

    def step_back(self) -> None:
        self.pause()
        self.stepper.step_back()

    def to_start(self) -> None:
        self.pause()
        self.stepper.to_start()

    def to_end(self) -> None:
        self.pause()
        self.stepper.to_end()

    def stop(self) -> None:
        """Stop stepping: the views go back to the finished results (frameChanged(None))."""
        self.pause()
        self.stepper.stop()

    def seek(self, index: int) -> None:
        """Show step ``index`` of the run at the current granularity (-1 = before the first)."""
        self.pause()
        self.stepper.seek(index)

    def seek_cell(self, batch: int, head: int, i: int, j: int) -> None:
        """Jump to the moment score cell (batch, head, query i, key j) starts being computed."""
        self.pause()
        self.stepper.seek_cell(batch, head, i, j)

    def submit_answer(self) -> None:
        """Check the typed prediction; a bad number is explained and the question stays."""
        try:
            prediction = self.stepper.answer(self.answer_edit.text())
        except ValueError as exc:
            self._show_prediction_error(str(exc))
            return
        if prediction is not None:
            self.answer_edit.clear()
            if self._resume_after_answer:
                self.play()

    def shutdown(self) -> None:
        """Stop the timer and any timing in the background (call before the window closes)."""
        self.pause()
        self.summary.shutdown()

    def export_frame_default(self) -> None:
        """Ask for a file name and save the panel's window as PNG."""
        path, _ = QFileDialog.getSaveFileName(
            self, "Export stepper frame", "stepper-frame.png", "PNG image (*.png)"
        )
        if not path:
            return
        try:
            save_widget_png(self.window(), path)
        except OSError as exc:
            self.session.report(str(exc))
        else:
            self.session.report(f"saved the stepper frame to {path}", "info")

    # -- user input -> model -------------------------------------------------------------
    def _interval(self) -> int:
        return 0 if self.fast_check.isChecked() else round(1000 / self.speed_slider.value())

    def _on_speed_changed(self, *_: object) -> None:
        fast = self.fast_check.isChecked()
        self.speed_slider.setEnabled(not fast)
        self.speed_label.setText("max" if fast else f"{self.speed_slider.value()} steps/s")
        if self._playing:
            self._timer.setInterval(self._interval())

    def _on_tick(self) -> None:
        if self.stepper.step_forward():
            return
        self.pause()
        if self.stepper.needs_answer:
            self._resume_after_answer = True  # play on once the question is answered
            self.answer_edit.setFocus()

    def _on_strategy_changed(self, row: int) -> None:
        self.session.set_option("strategy", self.strategy_combo.itemData(row))

    def _on_granularity_changed(self, row: int) -> None:
        self.session.set_option("granularity", self.granularity_combo.itemData(row))

    def _on_predict_changed(self, checked: bool) -> None:
        self.session.set_option("predict", checked)

    def _on_scrub_changed(self, value: int) -> None:
        count = self.stepper.count
        top = self.scrub_slider.maximum()
        index = value - 1 if top == count else -(-value * count // top) - 1
        self.pause()
        self.stepper.seek(index)

    # -- model -> widgets ----------------------------------------------------------------
    def _show_play_state(self) -> None:
        sp = QStyle.StandardPixmap
        playing = self._playing
        if self.play_action.text() == ("Pause" if playing else "Play"):
            return  # unchanged: a new icon would make the buttons lay out again
        self.play_action.setText("Pause" if playing else "Play")
        self.play_action.setIcon(
            self.style().standardIcon(sp.SP_MediaPause if playing else sp.SP_MediaPlay)
        )
        self.play_action.setToolTip(f"{'Pause' if playing else 'Play'} (Space)")

    def _on_stepper_changed(self, frame: Frame | None) -> None:
        stepper = self.stepper
        options = self.session.options
        self.set_choices(options.strategy, options.granularity, options.predict)
        self.set_position(stepper.index, stepper.count)
        if frame is None:
            unit = stepper.granularity
            self.counter_label.setText(
                f"Stopped: {stepper.count:,} step{'s' if stepper.count != 1 else ''} of "
                f"“{unit}” to go. Press ▶ (Space) to play or → to step."
            )
            self.working_label.setText("")
        else:
            self.counter_label.setText(frame.counter)
            prediction = frame.prediction
            if prediction is not None and prediction.status == "asking":
                self.working_label.setText(f"{prediction.label} = ?")
            else:
                self.working_label.setText(abbreviate_sum(frame.working))
            self.working_label.setToolTip(plain_tooltip(frame.working))
        self.set_prediction(frame)
        self.set_code(frame)
        self.locals_label.setText(
            "locals: " + ("  ".join(f"{n} = {v}" for n, v in frame_locals(frame)) or "—")
        )
        self.back_action.setEnabled(frame is not None and not stepper.at_start)
        self.start_action.setEnabled(frame is not None and not stepper.at_start)
        self.step_action.setEnabled(not stepper.at_end or frame is None)
        self.end_action.setEnabled(not stepper.at_end or frame is None)
        self.stop_action.setEnabled(frame is not None)
        self.summary.set_trace(stepper.trace, self.session.options.dtype)
        self.frameChanged.emit(frame)

    def set_choices(self, strategy: str, granularity: str, predict: bool) -> None:
        """Show the session's strategy, granularity and predict option."""
        for combo, value in (
            (self.strategy_combo, strategy),
            (self.granularity_combo, granularity),
        ):
            row = combo.findData(value)
            if row != combo.currentIndex():
                with QSignalBlocker(combo):
                    combo.setCurrentIndex(row)
        self.granularity_combo.setEnabled(strategy == "loop")
        self.granularity_combo.setToolTip(
            "How far one step goes"
            if strategy == "loop"
            else f"{strategy} computes whole heads: one step is one call"
        )
        if self.predict_check.isChecked() != predict:
            with QSignalBlocker(self.predict_check):
                self.predict_check.setChecked(predict)

    def set_position(self, index: int, count: int) -> None:
        """Show step ``index`` of ``count`` on the scrub slider (0 = before the first step)."""
        top = min(count, SLIDER_STEPS)
        value = index + 1 if top == count else round((index + 1) * top / count)
        with QSignalBlocker(self.scrub_slider):
            if self.scrub_slider.maximum() != top:
                self.scrub_slider.setRange(0, top)
                self.scrub_slider.setPageStep(max(1, top // 10))
            self.scrub_slider.setValue(value)

    def set_prediction(self, frame: Frame | None) -> None:
        """Show predict mode's question, or the verdict and working once answered."""
        self.predict_row.setVisible(self.session.options.predict)
        self.predict_label.setVisible(self.session.options.predict)
        if not self.session.options.predict:
            return
        prediction = frame.prediction if frame is not None else None
        asking = prediction is not None and prediction.status == "asking"
        self.answer_edit.setEnabled(asking)
        self.check_button.setEnabled(asking)
        if not asking:
            self.answer_edit.clear()
        if prediction is None:
            if self.stepper.predicting:
                text = "Predict mode: before each cell is revealed you will be asked for its value."
            else:
                text = (
                    "Predict mode works with the loop strategy, stepping by multiply-add or cell."
                )
            colour = ""
        else:
            text = abbreviate_sum(prediction.text)
            colour = {"right": RIGHT_COLOUR, "wrong": WRONG_COLOUR}.get(prediction.status, "")
        self.predict_label.setText(text)
        self.predict_label.setStyleSheet(f"color: {colour}; font-weight: bold" if colour else "")

    def _show_prediction_error(self, message: str) -> None:
        self.predict_label.setText(f"{message}")
        self.predict_label.setStyleSheet(f"color: {WRONG_COLOUR}")

    def set_code(self, frame: Frame | None) -> None:
        """Show the strategy's source with the line that just ran highlighted."""
        self.code_view.set_code(self.session.options.strategy, *code_lines(frame))

    def highlighted_lines(self) -> list[str]:
        """Text of the highlighted code lines, the line that just ran first (for tests)."""
        return self.code_view.highlighted_lines()


def _forget(stepper: Stepper, callback: Callable, *_: object) -> None:
    stepper.changed.disconnect(callback)
