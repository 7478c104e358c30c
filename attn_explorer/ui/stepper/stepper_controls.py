"""The stepper panel's controls and their layout: transport, choices, read-outs, code view.

:class:`StepperControls` builds every widget and QAction of the stepper panel and
lays them out in two columns (side by side where there is room, stacked on a narrow
dock); it connects nothing. :class:`~attn_explorer.ui.stepper.stepper_panel.StepperPanel`
is one, and wires each control to the stepper model and shows the model's frames.
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QAction, QFont, QFontDatabase, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QCheckBox,
    QComboBox,
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
from attn_explorer.state.labels import STRATEGY_SUMMARIES
from attn_explorer.ui.stepper.stepper_widgets import (
    CodeView,
    FocusWheelSlider,
    Readout,
    StrategySummary,
)

#: What one step covers when the strategy, not the Step by box, decides it.
STEP_UNITS = {"matmul": "head", "batched": "whole run", "tiled": "whole run"}
STEP_TIPS = {
    "matmul": "matmul computes one head per call: one step is one head",
    "batched": "batched computes every head in one call: one step is the whole run",
    "tiled": "tiled's key blocks step in the read-out below; here one step is the whole run",
}
SIDE_BY_SIDE_WIDTH = 860  # narrower than this, the code column goes under the controls
MAX_RATE = 60  # steps per second at the slider's right end
DEFAULT_RATE = 4


class StepperControls(QWidget):
    """The stepper panel's widgets and actions, laid out and not yet connected.

    ``summary`` times the strategies when ``measure_times`` (the panel's tests turn
    it off).
    """

    def __init__(self, parent: QWidget | None = None, *, measure_times: bool = True) -> None:
        super().__init__(parent)
        self.summary = StrategySummary(measure_times=measure_times)
        self._build_actions()
        self._build_widgets()

    # -- building --------------------------------------------------------------------
    def _action(self, text: str, icon: QStyle.StandardPixmap, key: Qt.Key) -> QAction:
        action = QAction(self.style().standardIcon(icon), text, self)
        action.setShortcut(QKeySequence(key))
        action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        action.setToolTip(f"{text} ({QKeySequence(key).toString()})")
        action.setProperty("helpText", f"Stepper: {text.lower()} (while the stepper has focus)")
        self.addAction(action)  # the shortcut works while focus is anywhere in the panel
        return action

    def _build_actions(self) -> None:
        sp = QStyle.StandardPixmap
        self.start_action = self._action("Start", sp.SP_MediaSkipBackward, Qt.Key.Key_Home)
        self.back_action = self._action("Step back", sp.SP_MediaSeekBackward, Qt.Key.Key_Left)
        self.play_action = self._action("Play", sp.SP_MediaPlay, Qt.Key.Key_Space)
        self.play_action.setProperty("helpText", "Stepper: play / pause (while it has focus)")
        self.step_action = self._action("Step forward", sp.SP_MediaSeekForward, Qt.Key.Key_Right)
        self.end_action = self._action("End", sp.SP_MediaSkipForward, Qt.Key.Key_End)
        self.stop_action = QAction(
            self.style().standardIcon(sp.SP_MediaStop), "Stop stepping", self
        )
        self.stop_action.setToolTip("Stop stepping and show the finished results")

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
        self.tiled_slot = QVBoxLayout()  # the tiled strategy's key-block read-out (the panel's)
        self.tiled_slot.setContentsMargins(0, 0, 0, 0)
        left.addLayout(self.tiled_slot)
        left.addLayout(self._build_summary_row(), 1)
        self.export_button = QPushButton("Export frame…")
        self.export_button.setToolTip(
            "Save the window as it looks now, highlights included, as a PNG image"
        )
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
        self.speed_slider.setMaximumWidth(160)
        transport.addWidget(self.speed_slider, 1)
        self.speed_label = QLabel()
        self.speed_label.setMinimumWidth(
            self.speed_label.fontMetrics().horizontalAdvance("60 steps/s ")
        )
        transport.addWidget(self.speed_label)
        self.fast_check = QCheckBox("fastest")
        self.fast_check.setToolTip("Play one step per event-loop turn, without waiting")
        transport.addWidget(self.fast_check)
        return transport

    def _build_choices(self) -> QHBoxLayout:
        """Strategy, unit of a step and predict mode."""
        choices = QHBoxLayout()
        choices.addWidget(QLabel("Strategy"))
        self.strategy_combo = QComboBox()
        for name in STRATEGIES:
            self.strategy_combo.addItem(STRATEGY_SUMMARIES[name], name)
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
        self.granularity_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.granularity_combo.setMinimumContentsLength(9)
        self.granularity_combo.setAccessibleName("Step by")
        choices.addWidget(self.granularity_combo)
        choices.addSpacing(12)
        self.predict_check = QCheckBox("Predict each cell")
        self.predict_check.setToolTip(
            "Before a score cell is revealed, pause and ask for the value you expect"
        )
        choices.addWidget(self.predict_check)
        choices.addStretch(1)
        return choices

    def show_step_unit(self, strategy: str, granularity: str) -> None:
        """Show in the Step by box what one step covers: the loop's choice, or greyed, the
        unit the strategy steps by (matmul one head per call, batched and tiled the whole
        run), never a loop granularity that does not apply."""
        combo = self.granularity_combo
        with QSignalBlocker(combo):
            if strategy in STEP_UNITS:
                combo.setPlaceholderText(STEP_UNITS[strategy])
                combo.setCurrentIndex(-1)
            else:
                combo.setCurrentIndex(combo.findData(granularity))
        combo.setEnabled(strategy not in STEP_UNITS)
        combo.setToolTip(STEP_TIPS.get(strategy, "How far one step of the loop goes"))

    def _build_readouts(self, mono: QFont) -> None:
        """The scrub slider, the counter and the partial sum written out."""
        self.scrub_slider = FocusWheelSlider(Qt.Orientation.Horizontal)
        self.scrub_slider.setToolTip("Scrub through the whole run")
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
        predict.addWidget(self.answer_edit)
        self.check_button = QPushButton("Check")
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
