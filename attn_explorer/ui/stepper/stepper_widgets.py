"""Small widgets of the stepper panel: a relayout-free text readout and the code view.

Also the two plain helpers the panel's texts and export use.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import (
    QColor,
    QFont,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QTextCursor,
    QTextFormat,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import (
    LOOP_BUDGET,
    STRATEGIES,
    LoopTrace,
    strategy_source,
    time_strategies,
)
from attn_explorer.state.views.stepper_text import summary_text, timing_text
from attn_explorer.ui.common.workers import LatestRunner

RAN_COLOUR = QColor(255, 214, 10, 150)  # the line that just ran
ALSO_COLOUR = QColor(52, 199, 89, 90)  # a line that completed with it (the store of a cell)
#: Above this many score cells (B·H·T·T) timing belongs to the timing panel, not here: the
#: summary times in the background beside the result's own computation, so a big shape
#: would hold two score tensors at once.
TIMING_MAX_CELLS = 1_000_000


def abbreviate_sum(text: str, keep_first: int = 3, keep_last: int = 2) -> str:
    """Shorten a long written-out sum: ``a·b + c·d + … (9 more) … + y·z = 3``.

    The working of a d = 64 dot product would fill the panel; the full text stays
    in the tooltip.
    """
    terms = text.split(" + ")
    if len(terms) <= keep_first + keep_last + 1:
        return text
    hidden = len(terms) - keep_first - keep_last
    return " + ".join([*terms[:keep_first], f"… ({hidden} more) …", *terms[-keep_last:]])


class FocusWheelSlider(QSlider):
    """A slider the mouse wheel moves only once it has the keyboard focus (a click gives it);
    otherwise the wheel scrolls the panel around it, as in a form or a web page."""

    def __init__(self, orientation: Qt.Orientation, parent: QWidget | None = None) -> None:
        super().__init__(orientation, parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the wheel alone never takes focus

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self.hasFocus():
            super().wheelEvent(event)
        else:
            event.ignore()  # passes to the parent: the dock's scroll area


class FitScrollArea(QScrollArea):
    """Gives its widget the whole viewport and scrolls only below the widget's minimum size.

    A resizable QScrollArea sizes a widget with wrapped labels by its preferred height for
    the width, which for the stepper is taller than the dock: the locals under the code
    then sit below the fold. Here the panel takes the dock's height instead.
    """

    def __init__(self, widget: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(False)
        self.setWidget(widget)
        widget.installEventFilter(self)
        self.setFrameShape(QScrollArea.Shape.NoFrame)

    def _fit(self) -> None:
        widget = self.widget()
        if widget is None:
            return
        room = self.maximumViewportSize()  # the viewport without scroll bars
        arrange = getattr(widget, "arrange", None)
        layout = widget.layout()
        if arrange is not None and layout is not None:
            arrange(room.width())  # e.g. the stepper stacks its columns when narrow
            layout.activate()
        least = widget.minimumSizeHint().expandedTo(widget.minimumSize())
        if layout is not None and layout.hasHeightForWidth():
            # wrapped labels keep all their lines: the least height at this width
            least.setHeight(max(least.height(), layout.minimumHeightForWidth(room.width())))
        bar_w = self.verticalScrollBar().sizeHint().width()
        bar_h = self.horizontalScrollBar().sizeHint().height()
        width = room.width() if least.height() <= room.height() else room.width() - bar_w
        height = room.height() if least.width() <= width else room.height() - bar_h
        widget.resize(max(width, least.width()), max(height, least.height()))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The panel's own layout asks for a new size (a row shown or hidden, a direction
        # change): fit again once that layout has settled.
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            QTimer.singleShot(0, self, self._fit)
        return False


class Readout(QWidget):
    """Text that changes on every step: it repaints itself and never asks for a new layout.

    A QLabel asks its window to lay out again on every ``setText``; at 60 steps/s
    that relayout, not the painting, is what costs. A Readout has a fixed height
    of ``lines`` lines and wraps words within it; where a text can be longer, the
    panel puts all of it in the tooltip.
    """

    def __init__(self, lines: int = 1, font: QFont | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        if font is not None:
            self.setFont(font)
        self._text = ""
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + 4)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(0)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:  # the QLabel name, so it reads alike
        if text != self._text:
            self._text = text
            self.update()

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._text) + 4, self.height())

    def fits(self) -> bool:
        """True when the whole text is visible (for tests: nothing clipped)."""
        needed = self.fontMetrics().boundingRect(
            self.contentsRect().adjusted(2, 2, -2, -2), _WRAP, self._text
        )
        return needed.height() <= self.contentsRect().height() - 2

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect().adjusted(2, 2, -2, -2), _WRAP, self._text)


_WRAP = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap)


def save_widget_png(widget: QWidget, path: str) -> None:
    """Grab ``widget`` as it is on screen and write it to ``path`` as PNG (OSError on failure).

    Written atomically, like every file the app writes: a failure leaves any old file.
    """
    from attn_explorer.render.figure import png_bytes
    from attn_explorer.state.storage.safe_files import os_error_reason, write_atomic

    try:
        data = png_bytes(widget.grab().toImage())
    except RuntimeError as exc:
        raise OSError(f"could not make the PNG image for {path!r}: {exc}") from None
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise OSError(f"could not write {path}: {os_error_reason(exc)}") from None


class CodeView(QPlainTextEdit):
    """Read-only source of one strategy, exactly as the compute layer runs it, with the line
    that just ran highlighted like a debugger's current line."""

    def __init__(self, font: QFont, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setFont(font)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keep arrows / Space for the panel
        self.setToolTip("The code the compute layer runs; the highlighted line just ran")
        # tall enough for the longest strategy and a horizontal scroll bar, so the panel
        # keeps its size when the strategy changes
        lines = max(strategy_source(name).count("\n") + 1 for name in STRATEGIES)
        height = self.fontMetrics().lineSpacing() * (lines + 1)
        scroll = self.horizontalScrollBar().sizeHint().height()
        # Tall enough for the longest strategy where the dock allows, and never shorter than
        # six lines: the highlighted line scrolls into view (ensureCursorVisible).
        spacing = self.fontMetrics().lineSpacing()
        self.setMaximumHeight(height + 2 * self.frameWidth() + scroll)
        self.setMinimumHeight(spacing * 6 + 2 * self.frameWidth() + scroll)
        self._full_height = height + 2 * self.frameWidth() + scroll
        self._shown: tuple[str, int | None, int | None] | None = None

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self._full_height)

    def set_code(self, strategy: str, ran: int | None, also: int | None = None) -> None:
        """Show ``strategy_source(strategy)``; highlight line ``ran`` (and ``also``, lighter)."""
        if self._shown == (strategy, ran, also):
            return  # unchanged: no repaint
        if self._shown is None or self._shown[0] != strategy:
            self.setPlainText(strategy_source(strategy))
        self._shown = (strategy, ran, also)
        selections = []
        for line, colour in ((ran, RAN_COLOUR), (also, ALSO_COLOUR)):
            if line is None:
                continue
            selection = QTextEdit.ExtraSelection()
            selection.format.setBackground(colour)
            selection.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            selection.cursor = QTextCursor(self.document().findBlockByNumber(line))
            selections.append(selection)
        self.setExtraSelections(selections)
        if ran is not None:
            self.setTextCursor(QTextCursor(self.document().findBlockByNumber(ran)))
            self.ensureCursorVisible()

    def highlighted_lines(self) -> list[str]:
        """Text of the highlighted lines, the line that just ran first."""
        return [s.cursor.block().text() for s in self.extraSelections()]


#: The shape must stay put this long (ms) before the strategies are timed on it.
SUMMARY_DELAY_MS = 300


class StrategySummary(QWidget):
    """How the three strategies divide the current shape's work, and their measured times.

    Times come from ``compute.time_strategies`` in a worker thread, once the shape
    stops changing (debounced); a newer shape supersedes older work.
    """

    def __init__(self, measure_times: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.measure_times = measure_times
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        self.timing_label = QLabel()
        self.timing_label.setWordWrap(True)
        self.timing_label.setStyleSheet("color: palette(placeholder-text)")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.timing_label)
        self._key: tuple[object, ...] | None = None
        self._inputs: tuple[np.ndarray, np.ndarray] | None = None
        self._delay = QTimer(self)
        self._delay.setSingleShot(True)
        self._delay.setInterval(SUMMARY_DELAY_MS)
        self._delay.timeout.connect(self._start)
        self._runner = LatestRunner(self)
        self._runner.finished.connect(self._on_timing_finished)
        self._runner.failed.connect(self._on_timing_failed)

    def set_trace(self, trace: LoopTrace, dtype: str) -> None:
        """Follow the stepper's trace; only a new shape or dtype changes the texts."""
        key = (trace.query.shape, trace.key.shape, dtype)
        if key == self._key:
            return
        self._key = key
        # The shape waiting to be timed, or being timed, is not this one: its times would
        # replace this shape's text when they came.
        self._delay.stop()
        self._runner.cancel(quiet=True)
        self.summary_label.setText(summary_text(trace.query.shape, trace.key.shape))
        if not self.measure_times:
            self.timing_label.setText("")
        elif len(trace) // trace.d > TIMING_MAX_CELLS:
            self.timing_label.setText("measured times: see the timing panel for shapes this big")
        else:
            self._inputs = (np.array(trace.query), np.array(trace.key))  # the worker's own copy
            self.timing_label.setText("measuring…")
            self._delay.start()

    def shutdown(self) -> None:
        """Stop waiting and tell any running timing to stop."""
        self._delay.stop()
        self._runner.cancel(quiet=True)

    def _start(self) -> None:
        if self._inputs is None:
            return
        query, key = self._inputs

        def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            return time_strategies(
                query,
                key,
                repeats=3,
                min_seconds=0.005,
                loop_budget=LOOP_BUDGET.summary,
                progress=progress,
                should_stop=should_stop,
            )

        self._runner.submit(job)

    def _on_timing_finished(self, results: object) -> None:
        assert isinstance(results, dict)  # what time_strategies returns
        self.timing_label.setText(timing_text(results))

    def _on_timing_failed(self, message: str) -> None:
        self.timing_label.setText(f"timing failed: {message}")
