"""The pyqtgraph items the heatmap grid is built of: one head's plot, its token axes, a colour bar.

Each is a small, dumb graphics item: :class:`HeadPlot` is a title over a view box
with token axes (none on a thumbnail), :class:`ColourBar` a gradient with the
range's axis. :class:`~attn_explorer.ui.explorer.heatmaps.HeatmapGrid` lays them out,
colours them and reads the mouse over them.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QImage, QPainter

from attn_explorer.state.colormaps import colour_table, lut

#: Widest a tick label grows (pixels) before its token is elided in the middle.
MAX_TICK_PX = 60
#: Tokens an axis measures one by one; a longer text is thinned for its widest possible label.
MEASURED_TOKENS = 256
#: Pixels kept free between two neighbouring labels.
TICK_GAP_PX = 6


def elide_tick(token: str, metrics: QFontMetrics) -> str:
    """A token as a tick label: at most ``MAX_TICK_PX`` wide, elided in the middle."""
    return metrics.elidedText(token, Qt.TextElideMode.ElideMiddle, MAX_TICK_PX)


def tick_step(labels: list[str], length: float, vertical: bool, metrics: QFontMetrics) -> int:
    """Every how many cells a label fits along an axis ``length`` pixels long.

    A horizontal label needs its width and a gap, a vertical one a line. The step is
    the same along the whole axis, so the labels shown are evenly spaced (pyqtgraph
    would drop the ones that overlap, leaving gaps of any size).
    """
    if vertical:
        needed = metrics.height() + 2
    else:
        needed = max(metrics.horizontalAdvance(label) for label in labels) + TICK_GAP_PX
    cell = max(length, 1.0) / len(labels)
    return max(1, math.ceil(needed / cell))


BAR_PX = 70  # a colour bar with its tick labels
EMPTY_RGB = (250, 250, 250)
#: The row of :func:`rgba_table` for cells the stepper has not reached yet.
EMPTY_INDEX = 258


def cell_number(value: float) -> str:
    """A cell's value in the hover read-out (−∞ says why)."""
    return "−∞ (hidden by the mask)" if value == -np.inf else f"{value:.6g}"


def hover_hint(rows: int, cols: int, diverging: bool, many_heads: bool) -> str:
    """What the read-out says before a hover: how to read a pixel that is a block of cells."""
    which = "value farthest from 0" if diverging else "largest value"
    blocks = f"each pixel is a block of {rows} × {cols} cells (its {which}); "
    if rows * cols <= 1:
        blocks = ""
    if many_heads or blocks:
        return (
            f"rows = query i, columns = key j — {blocks}hover a cell for its value; "
            "double-click a head to enlarge it"
        )
    return "Hover a heatmap for (head, query i, key j, value)."


@cache
def rgba_table(name: str) -> np.ndarray:
    """(259,) uint32: colour map ``name``'s colour_table rows and EMPTY_RGB, as RGBA bytes.

    One 4-byte lookup per pixel (np.take) instead of three 1-byte ones.
    """
    rgba = np.full((EMPTY_INDEX + 1, 4), 255, dtype=np.uint8)
    rgba[:EMPTY_INDEX, :3] = colour_table(name)
    rgba[EMPTY_INDEX, :3] = EMPTY_RGB
    table = rgba.view(np.uint32).ravel()  # the bytes R, G, B, A of each row, in order
    table.flags.writeable = False
    return table


class _TokenAxis(pg.AxisItem):
    """Token names at cell centres: every one when they fit, else every k-th (evenly)."""

    def __init__(self, orientation: str) -> None:
        self.tokens: list[str] = []  # before super(): the base class resizes while it builds
        super().__init__(orientation)
        # The first and last labels are centred on their cells and may reach past the
        # axis's ends by half a label; pyqtgraph would hide them (MiniLM: "[CLS]").
        self.setStyle(hideOverlappingLabels=MAX_TICK_PX // 2 + TICK_GAP_PX)

    def set_tokens(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._update_ticks()

    def set_dimensions(self, count: int) -> None:
        """Name the columns of V, d1 … d``count`` (the output stage), thinned as tokens are."""
        self.tokens = [f"d{j + 1}" for j in range(count)]
        self._update_ticks()

    def _update_ticks(self) -> None:
        """Label every k-th token, k the fewest cells one label needs at this axis length."""
        tokens = self.tokens
        if not tokens:
            self.setTicks(None)
            return
        vertical = self.orientation in ("left", "right")
        length = self.geometry().height() if vertical else self.geometry().width()
        metrics = self._metrics()
        if len(tokens) > MEASURED_TOKENS:  # a long text: the widest label any token may have
            widest = "W" * 64 if not vertical else "W"
            every = tick_step(
                [elide_tick(widest, metrics)] * len(tokens), length, vertical, metrics
            )
            shown = range(0, len(tokens), every)
            self.setTicks([[(i + 0.5, elide_tick(tokens[i], metrics)) for i in shown]])
            return
        labels = [elide_tick(t, metrics) for t in tokens]
        every = tick_step(labels, length, vertical, metrics)
        self.setTicks([[(i + 0.5, labels[i]) for i in range(0, len(labels), every)]])

    def _metrics(self) -> QFontMetrics:
        font = self.style.get("tickFont")
        return QFontMetrics(font if isinstance(font, QFont) else QFont())

    def labelled(self) -> list[tuple[int, str]]:
        """(token index, label) of every tick set now."""
        levels = self._tickLevels or [[]]
        return [(int(x - 0.5), str(label)) for x, label in levels[0]]

    def drawn_labels(self) -> list[str]:
        """The labels pyqtgraph paints now (it leaves out any that would overlap)."""
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        painter = QPainter(image)
        try:
            specs = self.generateDrawSpecs(painter)
        finally:
            painter.end()
        return [] if specs is None else [str(text) for _, _, text in specs[2]]

    def resizeEvent(self, event: object = None) -> None:
        super().resizeEvent(event)
        if self.tokens:
            self._update_ticks()


class HeadPlot(pg.GraphicsLayout):
    """One head: a title, a view box with the image, and token axes (none when compact).

    Lighter than a pg.PlotItem, which builds a context menu and control panel per
    plot: 16 heads now build in a few milliseconds instead of over 100.
    """

    def __init__(self, title: str, compact: bool, stage: str) -> None:
        super().__init__()
        self.layout.setContentsMargins(0, 0, 0, 0)
        self.layout.setSpacing(0)
        self.titleLabel = self.addLabel(title, row=0, col=1, size="8pt" if compact else "10pt")
        self.vb = pg.ViewBox(enableMenu=False, invertY=True)
        self.vb.setMouseEnabled(False, False)
        self.vb.disableAutoRange()
        self.addItem(self.vb, row=1, col=1)
        self.left: _TokenAxis | None = None
        self.bottom: _TokenAxis | None = None
        if compact:
            return  # thumbnails: no axes (they are the slow part to build)
        self.left = _TokenAxis("left")
        self.bottom = _TokenAxis("bottom")
        for axis, row, col in ((self.left, 1, 0), (self.bottom, 2, 1)):
            axis.linkToView(self.vb)
            self.addItem(axis, row=row, col=col)
        self.left.setLabel("query i")
        self.bottom.setLabel("key j" if stage != "output" else "dimension of V")

    def getViewBox(self) -> pg.ViewBox:
        return self.vb

    def getAxis(self, name: str) -> _TokenAxis | None:
        """The token axis ``"left"`` or ``"bottom"``; None on a thumbnail."""
        return {"left": self.left, "bottom": self.bottom}[name]


class ColourBar(pg.PlotItem):
    """A vertical gradient with an axis giving the colour scale's range."""

    def __init__(self) -> None:
        super().__init__()
        self.image = pg.ImageItem()
        self.addItem(self.image)
        self.hideAxis("bottom")
        self.hideAxis("left")
        self.showAxis("right")
        self.setMouseEnabled(False, False)
        self.hideButtons()
        self.setMenuEnabled(False)
        self.setMaximumWidth(BAR_PX)
        self.setMinimumWidth(60)

    def set_caption(self, text: str) -> None:
        """A word along the bar, e.g. "shared by all heads"."""
        self.getAxis("right").setLabel(text)

    def set_range(self, name: str, low: float, high: float) -> None:
        gradient = np.ascontiguousarray(lut(name)[:, None, :])  # (256, 1, 3): row 0 = low
        self.image.setImage(gradient, autoLevels=False, levels=(0, 255))
        self.image.setRect(0, low, 1, high - low)
        self.setYRange(low, high, padding=0)
        self.setXRange(0, 1, padding=0)
