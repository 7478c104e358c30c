"""The sweep's memory chart: peak bytes each strategy holds vs tokens T (log–log).

The score strategies hold the (H, T, T) grid, so their line rises as T²; the tiled
strategy holds its output and one tile per head, so its line rises as T·d. The
numbers are measured (``compute.timing.peak_bytes``), not estimated; a strategy not
measured at some T (the loop, when tracing it would take too long) has no point there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg

from attn_explorer.compute import STRATEGIES

_UNITS = ((10**9, "GB"), (10**6, "MB"), (10**3, "kB"))  # SI: the axis's decades read 1 kB, 10 kB…
MEMORY_TITLE = "peak memory vs tokens T (log–log): T² grid vs T·d tiles"


def format_bytes(count: float) -> str:
    """Bytes as the user reads them: ``512 B``, ``1.5 kB``, ``268 MB`` (powers of 1000, so the
    log axis's decades read 1 kB, 10 kB, 100 kB, not 977 kB and 95.4 MB)."""
    for size, unit in _UNITS:
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.3g} B"


def bytes_text(power: float) -> str:
    """10 to a whole ``power`` bytes, for the memory axis: ``1 kB``, ``100 MB``."""
    return format_bytes(10.0 ** round(power))


def memory_lines(sweep: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(tokens, bytes) of each strategy's measured points in a sweep (missing ones left out)."""
    tokens = np.array(sweep["tokens"], dtype=float)
    lines = {}
    for name in STRATEGIES:
        held = np.array(sweep.get(f"{name}_bytes", []), dtype=float)
        if held.shape != tokens.shape:
            continue
        measured = np.isfinite(held) & (held > 0)
        if measured.any():
            lines[name] = (tokens[measured], held[measured])
    return lines


def memory_summary(sweep: dict[str, Any]) -> str:
    """E.g. "Peak memory at T = 1024: batched 64 MB, tiled 1.2 MB (2% of batched)"."""
    lines = memory_lines(sweep)
    last = int(sweep["tokens"][-1]) if sweep["tokens"] else 0
    at_last = {name: held[-1] for name, (tokens, held) in lines.items() if tokens[-1] == last}
    if not at_last:
        return ""
    parts = [f"{name} {format_bytes(held)}" for name, held in at_last.items()]
    text = f"Peak memory at T = {last}: " + ", ".join(parts)
    if "batched" in at_last and "tiled" in at_last:
        text += f" (tiled holds {100 * at_last['tiled'] / at_last['batched']:.2g}% of batched's)"
    return text + "."


class MemoryChart(pg.PlotWidget):
    """Peak memory vs T, one line per strategy, coloured as in the timing charts."""

    def __init__(self, colours: dict[str, tuple[int, int, int]], decade_axis: type) -> None:
        axes = {"bottom": decade_axis("bottom"), "left": decade_axis("left", bytes_text)}
        super().__init__(axisItems=axes)
        self.colours = colours
        self.setBackground("w")
        self.setLogMode(x=True, y=True)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setTitle(MEMORY_TITLE, size="9pt")
        self.setLabel("bottom", "tokens T")
        self.setLabel("left", "bytes held")
        self.setMinimumHeight(160)  # as the time chart: they share one place
        self.legend = pg.LegendItem(colCount=1, labelTextSize="8pt")
        self.getPlotItem().layout.addItem(self.legend, 2, 3)
        self.getPlotItem().layout.setColumnMinimumWidth(3, 90)

    def set_note(self, note: str) -> None:
        """Title the chart ``note`` (lines), what no longer holds about the sweep shown;
        "" for its usual title."""
        self.setTitle(note.replace("\n", "<br>") if note else MEMORY_TITLE, size="9pt")

    def show_sweep(self, sweep: dict[str, Any]) -> None:
        """Draw the measured bytes of every strategy in ``sweep`` (see compute.timing)."""
        self.clear()
        self.legend.clear()
        lines = memory_lines(sweep)
        for name, (tokens, held) in lines.items():
            colour = self.colours.get(name, (0, 0, 0))
            item = self.plot(
                tokens, held, pen=pg.mkPen(colour, width=2), symbol="o", symbolBrush=colour
            )
            self.legend.addItem(item, name)
        if lines:  # the legend's column as wide as its longest name, so none is cut off
            text = max(label.item.boundingRect().width() for _, label in self.legend.items)
            self.getPlotItem().layout.setColumnMinimumWidth(3, text + 38)  # + line sample
            held = np.log10(np.concatenate([h for _, h in lines.values()]))
            self.setYRange(math.floor(held.min()), math.ceil(held.max()), padding=0)
            tokens = np.log10(np.concatenate([t for t, _ in lines.values()]))
            self.setXRange(tokens.min() - 0.15, tokens.max() + 0.15, padding=0)
