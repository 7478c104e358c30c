"""The stepper panel: play / pause / step / back controls driving the loop trace.

A thin widget over the application's :class:`attn_explorer.state.views.stepper.Stepper`
(the model lives in the application state and outlives the panel): the model owns
the position and every rule (granularity, strategy contrast, predict mode, edits
while stepping); this panel turns user input into model calls, shows the model's
:class:`Frame` (counter, working, code line, locals) and re-emits it as
``frameChanged`` for the tables, score grid and heatmaps. Play is a QTimer, so
the event loop never blocks.

One job: what the stepper's controls do and what its read-outs show. The controls
themselves and their layout are :class:`~.stepper_controls.StepperControls`, its small
widgets are in :mod:`.stepper_widgets` and its texts in
:mod:`attn_explorer.state.views.stepper_text`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QStyle,
    QWidget,
)

from attn_explorer.state import Session
from attn_explorer.state.views.frame import Frame
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.state.views.stepper_text import code_lines, frame_locals
from attn_explorer.ui.common.text import plain_tooltip
from attn_explorer.ui.stepper.stepper_controls import StepperControls
from attn_explorer.ui.stepper.stepper_widgets import (
    abbreviate_sum,
    save_widget_png,
)
from attn_explorer.ui.stepper.tiled_readout import TiledReadout

SLIDER_STEPS = 100_000  # the scrub slider's resolution for runs longer than this
RIGHT_COLOUR = "#1a7f37"
WRONG_COLOUR = "#b3261e"


class StepperPanel(StepperControls):
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
        super().__init__(parent, measure_times=measure_times)
        self.session = session
        self.stepper = stepper
        self.tiled_readout = TiledReadout(session)  # shown while the strategy is tiled
        self.tiled_slot.addWidget(self.tiled_readout)
        self.export_frame_callback: Callable[[], None] = self.export_frame_default
        self._playing = False
        self._resume_after_answer = False

        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._on_tick)
        self._connect_controls()
        self._on_speed_changed()
        # Clicking anywhere on the panel gives it the focus, so Space / arrows / Home / End work.
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.stepper.changed.connect(self._on_stepper_changed)
        # The model belongs to the application state: when the panel goes, it stops listening.
        self.destroyed.connect(functools.partial(_forget, self.stepper, self._on_stepper_changed))
        self._on_stepper_changed(self.stepper.frame())

    def _connect_controls(self) -> None:
        """Every control to what it does (the controls are built by :class:`StepperControls`)."""
        for action, move in (
            (self.start_action, self.to_start),
            (self.back_action, self.step_back),
            (self.play_action, self.toggle_play),
            (self.step_action, self.step_forward),
            (self.end_action, self.to_end),
            (self.stop_action, self.stop),
        ):
            action.triggered.connect(move)
        self.export_button.clicked.connect(lambda: self.export_frame_callback())
        self.speed_slider.valueChanged.connect(self._on_speed_changed)
        self.fast_check.toggled.connect(self._on_speed_changed)
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_changed)
        self.granularity_combo.currentIndexChanged.connect(self._on_granularity_changed)
        self.predict_check.toggled.connect(self._on_predict_changed)
        self.scrub_slider.valueChanged.connect(self._on_scrub_changed)
        self.answer_edit.returnPressed.connect(self.submit_answer)
        self.check_button.clicked.connect(self.submit_answer)

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
        row = self.strategy_combo.findData(strategy)
        if row != self.strategy_combo.currentIndex():
            with QSignalBlocker(self.strategy_combo):
                self.strategy_combo.setCurrentIndex(row)
        self.show_step_unit(strategy, granularity)
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
