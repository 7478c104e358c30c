"""Timing charts: median time per strategy on the current shape, and time vs T (log–log).

All measurement runs in a worker (``LatestRunner``) with a progress bar and a
Cancel button; the GUI thread only draws what comes back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.background import in_process
from attn_explorer.compute import (
    LOOP_BUDGET,
    STRATEGIES,
    TimingResult,
    call_counts,
    macs,
)
from attn_explorer.compute.timing import sweep_tokens, time_strategies
from attn_explorer.state import Session
from attn_explorer.state.formatting import format_seconds
from attn_explorer.ui.workers import LatestRunner

COLOURS = {"loop": (230, 97, 1), "matmul": (94, 60, 153), "batched": (27, 158, 119)}


class _LogSecondsAxis(pg.AxisItem):
    """Ticks at log10(seconds) positions, labelled in s / ms / µs."""

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [format_seconds(10**v) for v in values]


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
        self.runner.failed.connect(lambda msg: self._set_status(f"Timing failed: {msg}"))
        self.runner.cancelled.connect(lambda: self._set_status("Timing cancelled."))
        self.runner.progress.connect(self._on_progress)
        self.runner.busy.connect(self._on_busy)
        self._kind = ""

        self.bars = pg.PlotWidget(axisItems={"left": _LogSecondsAxis("left")})
        self.bars.setBackground("w")
        self.bars.setTitle("median time per call, current shape (log scale)", size="9pt")
        self.bars.setMouseEnabled(False, False)
        self.bars.hideButtons()
        self.bars.getAxis("bottom").setTicks([[(n, s) for n, s in enumerate(STRATEGIES)]])
        self.scaling = pg.PlotWidget()
        self.scaling.setBackground("w")
        self.scaling.setLogMode(x=True, y=True)
        self.scaling.setTitle("time vs tokens T (log–log), current H and d", size="9pt")
        self.scaling.setLabel("bottom", "tokens T")
        self.scaling.setLabel("left", "seconds")
        self.scaling.addLegend(offset=(5, 5))
        self.scaling.setMinimumHeight(140)
        self.bars.setMinimumHeight(140)

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
        charts.addWidget(self.scaling, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(buttons)
        layout.addLayout(charts, 1)
        layout.addWidget(self.summary)

    # -- actions -------------------------------------------------------------------------
    def run_timing(self, run_loop: bool = False) -> None:
        """Measure the three strategies on the current inputs, in the worker."""
        request = self.session.results.request()
        q, k = request.query, request.key
        budget = float("inf") if run_loop else LOOP_BUDGET.timing

        self._kind = "timing"
        # In a lower-priority process: the loop strategy is pure Python (see background.py).
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
        self.runner.submit(in_process(sweep_tokens, heads=h, dim=d))

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

    def _on_finished(self, result: object) -> None:
        if self._kind == "timing":
            assert isinstance(result, dict)
            self.show_timing(result)
        else:
            assert isinstance(result, dict)
            self.show_sweep(result)

    def show_timing(self, results: dict[str, TimingResult]) -> None:
        self.results = results
        self.bars.clear()
        names = [s for s in STRATEGIES if s in results]
        heights = [math.log10(max(results[s].median, 1e-9)) for s in names]
        floor = min(heights) - 1
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
        self.bars.setYRange(floor, max(heights) + 0.6)
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

    def show_sweep(self, sweep: dict[str, Any]) -> None:
        self.sweep = sweep
        self.scaling.clear()
        tokens = np.array(sweep["tokens"], dtype=float)
        for s in STRATEGIES:
            times = np.array(sweep[s], dtype=float)
            pen = pg.mkPen(COLOURS[s], width=2)
            if s == "loop":
                est = np.array(sweep["loop_estimated"], dtype=bool)
                measured = ~est
                self.scaling.plot(
                    tokens[measured],
                    times[measured],
                    pen=pen,
                    symbol="o",
                    symbolBrush=COLOURS[s],
                    name="loop (measured)",
                )
                if est.any():
                    first = max(0, int(np.argmax(est)) - 1)
                    self.scaling.plot(
                        tokens[first:],
                        times[first:],
                        pen=pg.mkPen(COLOURS[s], width=2, style=Qt.PenStyle.DashLine),
                        name="loop (estimated)",
                    )
            else:
                self.scaling.plot(
                    tokens, times, pen=pen, symbol="o", symbolBrush=COLOURS[s], name=s
                )
        last = -1
        ratio = sweep["loop"][last] / max(sweep["batched"][last], 1e-12)
        self.summary.setText(
            f"At T = {int(tokens[last])} the loop takes {format_seconds(sweep['loop'][last])}"
            f"{' (estimated)' if sweep['loop_estimated'][last] else ''} and batched "
            f"{format_seconds(sweep['batched'][last])}: batched is {ratio:,.0f}× faster. "
            "All three grow as T² (the grid has T×T cells); the loop pays Python's cost on every "
            "multiply-add, matmul once per head, batched once in total."
        )
