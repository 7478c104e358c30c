"""Timing charts: median time per strategy on the current shape, and time vs T (log–log).

All measurement runs in a worker (``LatestRunner``) with a progress bar and a
Cancel button; the GUI thread only draws what comes back. Time axes are labelled at
whole decades with their unit (``1 µs``, ``1 ms``), the tokens axis at ``10¹, 10², …``;
an empty chart says which key fills it, and the sweep's legend sits beside its plot.

A chart says what it was measured on. When the session's shape no longer matches
(the sweep: H or d; the bars: the whole shape) its title says so ("out of date — run
again") and its lines fade; while a sweep runs again the chart shown is marked as
the previous run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import (
    LOOP_BUDGET,
    STRATEGIES,
    TimingResult,
    call_counts,
    macs,
)
from attn_explorer.compute.background import in_process
from attn_explorer.compute.timing import SWEEP_TOKENS, sweep_tokens, time_strategies
from attn_explorer.state import Session
from attn_explorer.state.formatting import format_seconds
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.timing.axes import DecadeAxis, seconds_text
from attn_explorer.ui.timing.memory_chart import MemoryChart, format_bytes, memory_summary

COLOURS = {
    "loop": (230, 97, 1),
    "matmul": (94, 60, 153),
    "batched": (27, 158, 119),
    "tiled": (33, 113, 181),
}


#: Shown on a chart until its first measurement arrives.
BARS_PLACEHOLDER = "Press Ctrl+T (Time strategies)\nto time the strategies on the current shape"
SWEEP_PLACEHOLDER = "Press Ctrl+Shift+T (Scaling sweep)\nto time every strategy for T = 4 … 1024"
BARS_TITLE = "median time per call (log scale)"
SWEEP_TITLE = "time vs T (log–log)"
OUT_OF_DATE = "out of date — run again"
#: Opacity of the lines of a chart that no longer matches the session.
FADED = 0.35
#: log10 ranges an empty chart shows: 1 µs … 10 s, and T = 4 … 1024.
EMPTY_SECONDS, EMPTY_TOKENS = (-6.0, 1.0), (math.log10(4) - 0.15, math.log10(1024) + 0.15)
#: A chart's width its title may not use: the time axis and a little air.
TITLE_MARGIN_PX = 70


def speedup_text(results: dict[str, TimingResult]) -> str:
    """E.g. "batched is 2,600× faster than loop (estimated) and 1.8× faster than matmul"."""
    if "batched" not in results:
        return ""
    base = results["batched"].median
    parts = []
    for name in ("loop", "matmul"):
        if name in results and base > 0:
            ratio = results[name].median / base
            est = " (loop estimated)" if results[name].estimated else ""
            word = "faster" if ratio >= 1 else "slower"
            factor = ratio if ratio >= 1 else 1 / ratio
            parts.append(f"{factor:,.1f}× {word} than {name}{est}")
    return "batched is " + " and ".join(parts) + " here" if parts else ""


class TimingPanel(QWidget):
    """Bar chart for the current shape, scaling chart, speed-ups, progress and cancel."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.results: dict[str, TimingResult] = {}
        self.sweep: dict[str, Any] | None = None
        self.runner = LatestRunner(self)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(lambda msg: self._on_stopped(f"Timing failed: {msg}"))
        self.runner.cancelled.connect(lambda: self._on_stopped("Timing cancelled."))
        self.runner.progress.connect(self._on_progress)
        self.runner.busy.connect(self._on_busy)
        self._kind = ""
        #: T values the sweep measures (a test may ask for fewer).
        self.sweep_sizes: tuple[int, ...] = SWEEP_TOKENS
        #: (H, d) the shown sweep was measured at; (H, d) of a sweep being measured.
        self.sweep_at: tuple[int, int] | None = None
        self._measuring: tuple[int, int] | None = None
        #: (B, H, T, d) the shown bars were measured on.
        self.timed_shape: tuple[int, int, int, int] | None = None
        self._timing_shape: tuple[int, int, int, int] | None = None

        self.bars = pg.PlotWidget(axisItems={"left": DecadeAxis("left", seconds_text)})
        self.bars.setBackground("w")
        self.bars.setTitle(f"{BARS_TITLE}, current shape", size="9pt")
        self.bars.setMouseEnabled(False, False)
        self.bars.hideButtons()
        self.bars.setMenuEnabled(False)
        self.bars.getAxis("bottom").setTicks([[(n, s) for n, s in enumerate(STRATEGIES)]])
        self.bars.setLabel("bottom", "strategy")
        self.bars.setLabel("left", "time per call")
        axes = {"bottom": DecadeAxis("bottom"), "left": DecadeAxis("left", seconds_text)}
        self.scaling = pg.PlotWidget(axisItems=axes)
        self.scaling.setBackground("w")
        self.scaling.setLogMode(x=True, y=True)
        self.scaling.setMenuEnabled(False)
        self.scaling.hideButtons()
        self.scaling.setTitle(f"{SWEEP_TITLE}, current H and d", size="9pt")
        self.scaling.setLabel("bottom", "tokens T")
        self.scaling.setLabel("left", "time per call")
        # Right of the plot, in a column of its own: a legend inside the plot covers the
        # curves, and one under the axis leaves a short dock (720-pixel screens) no plot.
        self.legend = pg.LegendItem(colCount=1, labelTextSize="8pt", verSpacing=-6)
        self.scaling.getPlotItem().layout.addItem(self.legend, 2, 3)
        self.scaling.setMinimumHeight(160)
        self.bars.setMinimumHeight(140)
        self._show_empty(self.bars, BARS_PLACEHOLDER, (-0.6, len(STRATEGIES) - 0.4))
        self._show_empty(self.scaling, SWEEP_PLACEHOLDER, EMPTY_TOKENS)

        self.summary = QLabel("Press “Time strategies” to measure.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.time_button = QPushButton("Time strategies")
        self.time_button.setToolTip(
            "Measure loop, matmul and batched on the current Q and K (Ctrl+T)"
        )
        self.time_button.clicked.connect(lambda: self.run_timing(run_loop=False))
        self.loop_button = QPushButton("Run loop anyway")
        self.loop_button.setToolTip(
            "Really run the loop strategy even though it is predicted to be slow"
        )
        self.loop_button.clicked.connect(lambda: self.run_timing(run_loop=True))
        self.loop_button.hide()
        self.sweep_button = QPushButton("Scaling sweep")
        self.sweep_button.setToolTip("Time every strategy for T = 4 … 1024 at the current H and d")
        self.sweep_button.clicked.connect(self.run_sweep)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the measurement now")
        self.cancel_button.clicked.connect(self.runner.cancel)
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("idle")

        buttons = QHBoxLayout()
        for w in (self.time_button, self.loop_button, self.sweep_button, self.cancel_button):
            buttons.addWidget(w)
        buttons.addWidget(self.progress, 1)
        charts = QHBoxLayout()
        charts.addWidget(self.bars, 1)
        # The sweep's time and memory charts share one place; a choice in the button row
        # (a tab bar would take a short dock's height from the chart) picks which is shown.
        self.memory = MemoryChart(COLOURS, DecadeAxis)  # peak bytes vs T, filled by the sweep
        self.sweep_charts = QStackedWidget()
        self.sweep_charts.addWidget(self.scaling)
        self.sweep_charts.addWidget(self.memory)
        # the legend's five lines, a two-line title and the T axis: the dock keeps room
        self.sweep_charts.setMinimumHeight(160)
        self.sweep_view = QComboBox()
        self.sweep_view.addItems(["sweep: time", "sweep: peak memory"])
        self.sweep_view.setToolTip(
            "Which chart of the scaling sweep is shown: time per call, or the peak bytes "
            "each strategy holds (T² for the grid, T·d for tiled)"
        )
        self.sweep_view.currentIndexChanged.connect(self._show_sweep_chart)
        buttons.insertWidget(buttons.count() - 1, self.sweep_view)  # before the progress bar
        charts.addWidget(self.sweep_charts, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(buttons)
        layout.addLayout(charts, 1)
        # The summary scrolls in a short dock instead of pushing over the charts' axes.
        summary_area = QScrollArea()
        summary_area.setWidgetResizable(True)
        summary_area.setFrameShape(QFrame.Shape.NoFrame)
        summary_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        summary_area.setWidget(self.summary)
        summary_area.setMinimumHeight(2 * self.summary.fontMetrics().lineSpacing())
        layout.addWidget(summary_area)
        session.events.shape.connect(self.update_titles)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self._wrap_titles)  # once the charts have their sizes

    def _show_sweep_chart(self, index: int) -> None:
        """Bring the sweep's time (0) or memory (1) chart forward, its title fitted to it (a
        chart laid out while hidden kept a one-line title too wide for it, which pushed
        its legend's names past the edge)."""
        self.sweep_charts.setCurrentIndex(index)
        QTimer.singleShot(0, self, self._wrap_titles)

    def _wrap_titles(self) -> None:
        """A chart title wider than its chart wraps onto two lines instead of widening the
        plot past the chart's edge (which cut the title, the legend and the last bar)."""
        for chart in (self.bars, self.scaling, self.memory):
            item = chart.getPlotItem()
            title = item.titleLabel
            legend = item.layout.columnMinimumWidth(3)  # the sweep's legend column, if any
            room = max(80.0, chart.width() - TITLE_MARGIN_PX - legend)
            title.item.setTextWidth(-1)  # its natural width, to compare
            if title.item.boundingRect().width() > room:
                title.item.setTextWidth(room)
            title.updateMin()
            item.setGeometry(0, 0, chart.width(), chart.height())  # refit to the chart

    # -- actions -------------------------------------------------------------------------
    def run_timing(self, run_loop: bool = False) -> None:
        """Measure the three strategies on the current inputs, in the worker."""
        dtype = np.dtype(self.session.options.dtype)  # as the results compute: copies to own
        q = self.session.matrix("query").astype(dtype, copy=True)
        k = self.session.matrix("key").astype(dtype, copy=True)
        budget = float("inf") if run_loop else LOOP_BUDGET.timing

        self._kind = "timing"
        self._measuring = None  # a sweep still running is dropped for this
        self._timing_shape = self.session.shape
        # In a lower-priority process: the loop strategy is pure Python (see compute/background.py).
        self.runner.submit(
            in_process(
                time_strategies,
                query=q,
                key=k,
                repeats=5,
                loop_budget=budget,
            )
        )

    def run_sweep(self) -> None:
        _, h, _, d = self.session.shape
        self._kind = "sweep"
        self.runner.submit(in_process(sweep_tokens, heads=h, dim=d, tokens=self.sweep_sizes))
        self._measuring = (h, d)
        self.update_titles()

    def _on_stopped(self, text: str) -> None:
        """Cancelled or failed: the chart shown is the latest again, not a previous run."""
        self._measuring = None
        self._set_status(text)
        self.update_titles()

    # -- what each chart was measured on --------------------------------------------------------
    # Titles are short lines (a chart may be a third of a 1000-pixel window wide): what it
    # was measured on, then what no longer holds; the tooltip says the whole of it.
    def sweep_note(self) -> str:
        """What no longer holds about the sweep shown ("" while it matches the session)."""
        if self.sweep_at is None:
            return ""
        at = "H = {}, d = {}".format(*self.sweep_at)
        if self._measuring is not None:
            return f"previous run, at {at}\nmeasuring again …"
        if self.sweep_stale():
            return f"at {at}\n{OUT_OF_DATE}"
        return ""

    def sweep_title(self) -> str:
        """The sweep chart's title: what it was measured at, and whether that still holds."""
        if self.sweep_at is None:
            return f"{SWEEP_TITLE}, current H and d"
        fresh = "{}, H = {}, d = {}".format(SWEEP_TITLE, *self.sweep_at)
        note = self.sweep_note()
        return note if self._measuring is not None else f"time vs T, {note}" if note else fresh

    def sweep_tip(self) -> str:
        if self.sweep_at is None:
            return "Time every strategy for T = 4 … 1024 at the current H and d (Ctrl+Shift+T)"
        at = "H = {}, d = {}".format(*self.sweep_at)
        if self._measuring is not None:
            now = "H = {}, d = {}".format(*self._measuring)
            return f"The previous sweep, at {at}, while {now} is measured."
        _, h, _, d = self.session.shape
        if self.sweep_stale():
            return f"Measured at {at}; the session has H = {h}, d = {d} now. Ctrl+Shift+T again."
        return f"Measured at {at}, the session's H and d."

    def sweep_stale(self) -> bool:
        """True while the sweep shown was measured at another H or d than the session's."""
        _, h, _, d = self.session.shape
        return self.sweep_at is not None and self.sweep_at != (h, d)

    def bars_title(self) -> str:
        if self.timed_shape is None:
            return f"{BARS_TITLE}, current shape"
        shape = "({},{},{},{})".format(*self.timed_shape)
        if self.timed_shape != self.session.shape:
            return f"time per call, at {shape}\n{OUT_OF_DATE}"
        return f"time per call, (B,H,T,d) = {shape}"

    def bars_tip(self) -> str:
        if self.timed_shape is None:
            return "Time the strategies on the current shape (Ctrl+T)"
        at = "(B, H, T, d) = ({}, {}, {}, {})".format(*self.timed_shape)
        if self.timed_shape != self.session.shape:
            now = "({}, {}, {}, {})".format(*self.session.shape)
            return f"Measured at {at}; the session is {now} now. Ctrl+T again."
        return f"Median time per call, measured at {at}, the session's shape."

    def update_titles(self) -> None:
        """Say on each chart what it was measured on; fade the lines that no longer match."""
        self.scaling.setTitle(self.sweep_title().replace("\n", "<br>"), size="9pt")
        note = self.sweep_note()
        self.memory.set_note(
            note if self._measuring is not None or not note else f"peak memory vs T, {note}"
        )
        for item in (self.scaling.getPlotItem().vb, self.memory.getPlotItem().vb):
            item.setOpacity(FADED if note else 1.0)
        self.scaling.setToolTip(self.sweep_tip())
        self.memory.setToolTip(self.sweep_tip())
        self.bars.setTitle(self.bars_title().replace("\n", "<br>"), size="9pt")
        self.bars.setToolTip(self.bars_tip())
        stale_bars = self.timed_shape is not None and self.timed_shape != self.session.shape
        self.bars.getPlotItem().vb.setOpacity(FADED if stale_bars else 1.0)

    # -- results ----------------------------------------------------------------------------
    def _on_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.progress.setFormat(f"{text} — %p%")

    def _on_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
        self.time_button.setEnabled(not busy)
        self.sweep_button.setEnabled(not busy)
        if not busy:
            self.progress.setValue(0)
            self.progress.setFormat("idle")

    def _set_status(self, text: str) -> None:
        self.summary.setText(text)

    @staticmethod
    def _show_empty(plot: pg.PlotWidget, text: str, x_range: tuple[float, float]) -> None:
        """Before any measurement: a sane range (1 µs … 10 s) and what to press, centred."""
        plot.setXRange(*x_range, padding=0)
        plot.setYRange(*EMPTY_SECONDS, padding=0)
        hint = pg.TextItem(text, color=(90, 90, 90), anchor=(0.5, 0.5))
        hint.setPos(sum(x_range) / 2, sum(EMPTY_SECONDS) / 2)
        plot.addItem(hint)

    def _on_finished(self, result: object) -> None:
        if self._kind == "timing":
            assert isinstance(result, dict)
            self.show_timing(result, self._timing_shape)
        else:
            assert isinstance(result, dict)
            at, self._measuring = self._measuring, None
            self.show_sweep(result, at)

    def show_timing(
        self, results: dict[str, TimingResult], shape: tuple[int, int, int, int] | None = None
    ) -> None:
        """Draw timings measured on ``shape`` (default: the session's)."""
        self.results = results
        self.timed_shape = shape or self.session.shape
        self.bars.clear()
        names = [s for s in STRATEGIES if s in results]
        heights = [math.log10(max(results[s].median, 1e-9)) for s in names]
        floor = math.floor(min(heights) - 0.5)  # bars rise from a whole decade
        for n, s in enumerate(names):
            colour = COLOURS[s]
            brush = pg.mkBrush(*colour, 90 if results[s].estimated else 255)
            pen = pg.mkPen(
                colour,
                width=2,
                style=Qt.PenStyle.DashLine if results[s].estimated else Qt.PenStyle.SolidLine,
            )
            self.bars.addItem(
                pg.BarGraphItem(
                    x=[n], height=[heights[n] - floor], y0=[floor], width=0.6, brush=brush, pen=pen
                )
            )
            label = pg.TextItem(
                format_seconds(results[s].median) + (" (est.)" if results[s].estimated else ""),
                color=(0, 0, 0),
                anchor=(0.5, 1),
            )
            label.setPos(n, heights[n])
            self.bars.addItem(label)
        # headroom above the tallest bar for its time label (a short chart: ~a decade)
        self.bars.setYRange(floor, max(heights) + max(0.6, 0.3 * (max(heights) - floor)))
        self.bars.setXRange(-0.6, len(names) - 0.4)
        shape_q = self.session.matrix("query").shape
        counts = call_counts(shape_q, shape_q)
        n_macs = macs(shape_q, shape_q)
        lines = [
            f"{n_macs:,} multiply-adds (MACs) for S = Q Kᵀ on (B, H, T, d) = {shape_q}.",
            " · ".join(
                f"{s}: {format_seconds(results[s].median)}"
                + (" (estimated)" if results[s].estimated else f", {results[s].gflops:.3g} GFLOP/s")
                + f" — {counts[s]}"
                + (
                    f", peak {format_bytes(results[s].peak_bytes)} held"
                    if math.isfinite(results[s].peak_bytes)
                    else ""
                )
                for s in names
            ),
            speedup_text(results),
        ]
        self.summary.setText("\n".join(line for line in lines if line))
        loop = results.get("loop")
        self.loop_button.setVisible(bool(loop and loop.estimated))
        if loop and loop.estimated:
            self.loop_button.setToolTip(
                f"The loop is predicted to take {format_seconds(loop.median)}; run it anyway"
            )
        self.update_titles()

    def _curve(self, tokens: np.ndarray, times: np.ndarray, name: str, **style: Any) -> None:
        """One line of the sweep, named in the legend beside the chart."""
        self.legend.addItem(self.scaling.plot(tokens, times, **style), name)
        # the legend's column as wide as its longest entry, so no name is cut off
        text = max(label.item.boundingRect().width() for _, label in self.legend.items)
        self.scaling.getPlotItem().layout.setColumnMinimumWidth(3, text + 38)  # + line sample

    def show_sweep(self, sweep: dict[str, Any], at: tuple[int, int] | None = None) -> None:
        """Draw a sweep measured at (H, d) = ``at`` (default: the session's)."""
        self.sweep = sweep
        _, h, _, d = self.session.shape
        self.sweep_at = at or (h, d)
        self.scaling.clear()
        self.legend.clear()
        tokens = np.array(sweep["tokens"], dtype=float)
        shown = [s for s in STRATEGIES if s in sweep]
        for s in shown:
            times = np.array(sweep[s], dtype=float)
            pen = pg.mkPen(COLOURS[s], width=2)
            if s == "loop":
                est = np.array(sweep["loop_estimated"], dtype=bool)
                measured = ~est
                self._curve(
                    tokens[measured],
                    times[measured],
                    pen=pen,
                    symbol="o",
                    symbolBrush=COLOURS[s],
                    name="loop",
                )
                if est.any():
                    first = max(0, int(np.argmax(est)) - 1)
                    self._curve(
                        tokens[first:],
                        times[first:],
                        pen=pg.mkPen(COLOURS[s], width=2, style=Qt.PenStyle.DashLine),
                        name="loop (est.)",
                    )
            else:
                self._curve(tokens, times, pen=pen, symbol="o", symbolBrush=COLOURS[s], name=s)
        # Whole decades of time, and a margin beside the first and last T: no point sits
        # on the frame and the decade labels at the ends have room.
        seconds = np.log10(np.clip([sweep[s] for s in shown], 1e-12, None))
        self.scaling.setYRange(math.floor(seconds.min()), math.ceil(seconds.max()), padding=0)
        x_low, x_high = np.log10(tokens.min()), np.log10(tokens.max())
        self.scaling.setXRange(x_low - 0.15, x_high + 0.15, padding=0)
        last = -1
        ratio = sweep["loop"][last] / max(sweep["batched"][last], 1e-12)
        self.summary.setText(
            f"At T = {int(tokens[last])} the loop takes {format_seconds(sweep['loop'][last])}"
            f"{' (estimated)' if sweep['loop_estimated'][last] else ''} and batched "
            f"{format_seconds(sweep['batched'][last])}: batched is {ratio:,.0f}× faster. "
            "Q Kᵀ grows as T² (the grid has T×T cells); the loop pays Python's cost on every "
            "multiply-add, matmul once per head, batched once in total. Tiled is timed for the "
            "whole attention, tile by tile, and holds no T×T grid. " + memory_summary(sweep)
        )
        self.memory.show_sweep(sweep)
        self.update_titles()
        QTimer.singleShot(0, self, self._wrap_titles)  # the legend's column took room
