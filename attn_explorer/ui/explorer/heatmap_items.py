"""The pyqtgraph items the heatmap grid is built of: one head's plot, its token axes, a colour bar.

Each is a small, dumb graphics item: :class:`HeadPlot` is a title over a view box
with token axes (none on a thumbnail), :class:`ColourBar` a gradient with the
range's axis. :class:`~attn_explorer.ui.explorer.heatmaps.HeatmapGrid` lays them out,
colours them and reads the mouse over them.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from attn_explorer.state.colormaps import lut

#: Most token names an axis labels one by one; more are numbered instead.
MAX_TOKEN_TICKS = 24
BAR_PX = 70  # a colour bar with its tick labels


class _TokenAxis(pg.AxisItem):
    """Token names at integer positions (cell centres) when they fit, else numbers."""

    def __init__(self, orientation: str) -> None:
        self.tokens: list[str] = []  # before super(): the base class resizes while it builds
        self._any_count = False
        super().__init__(orientation)

    def set_tokens(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._any_count = False
        self._update_ticks()

    def set_dimensions(self, count: int) -> None:
        """Name the columns of V, d1 … d``count`` (the output stage), thinned as tokens are."""
        self.tokens = [f"d{j + 1}" for j in range(count)]
        self._any_count = True  # short labels: thinning alone keeps them apart
        self._update_ticks()

    def _update_ticks(self) -> None:
        """Label every token if they fit, else every k-th, else fall back to numbers."""
        tokens = self.tokens
        if not tokens or (len(tokens) > MAX_TOKEN_TICKS and not self._any_count):
            self.setTicks(None)
            return
        vertical = self.orientation in ("left", "right")
        length = self.geometry().height() if vertical else self.geometry().width()
        longest = max(len(t) for t in tokens)
        needed = 14 if vertical else 7 * longest + 8  # pixels one label needs
        every = max(1, math.ceil(needed * len(tokens) / max(length, 1.0)))
        self.setTicks([[(i + 0.5, t) for i, t in enumerate(tokens) if i % every == 0]])

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
