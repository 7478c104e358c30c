"""The Model dock's enlarged head: one head's heatmap with its tokens, colour bar and name.

A :class:`HeadDetail` is the plot under the grid: the selected head's (T, T) values
(rows = query i, columns = key j, query 1 at the top, as in a matrix), the tokens on
both axes, a slim colour bar with the scale's label and the head's name as its title.
It never reads the session: the dock hands it what to show
(:meth:`HeadDetail.set_head`) and holds it wide enough for its axes
(:meth:`HeadDetail.hold_width`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer

from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.session import Head, ShownValues
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.model.model_grid import TEXT_RGB, HeatmapItem, TokenAxis, color_map

#: The enlarged head's least size (pixels) before any tokens; long tokens widen it.
DETAIL_MIN_PX = (200, 180)
#: A long head zoomed to at most this many rows (and keys) is drawn cell by cell, its rows
#: recomputed on demand; the zoom settles for this many ms first.
ZOOM_ROWS, ZOOM_DEBOUNCE_MS = 1024, 80


class HeadDetail(pg.PlotWidget):
    """The enlarged head: ``image`` (its heatmap) and ``colorbar`` on token axes.

    ``on_click(head)`` and ``on_hover(head, cell)`` hear the heatmap as the grid's
    thumbnails do (``head`` None: this one).
    """

    def __init__(
        self,
        on_click: Callable[[Head], None],
        on_hover: Callable[[Head | None, tuple[int, int] | None], None],
    ) -> None:
        left, bottom = TokenAxis("left"), TokenAxis("bottom")
        super().__init__(axisItems={"left": left, "bottom": bottom})
        self.setBackground("w")
        self.setMinimumSize(*DETAIL_MIN_PX)  # token axes and colour bar stay whole
        self._color_maps = {name: color_map(name) for name in ("sequential", "diverging")}
        plot = self.getPlotItem()
        plot.setMenuEnabled(False)
        plot.hideButtons()
        box = plot.getViewBox()
        box.invertY(True)  # query i = 1 at the top, as in a matrix
        box.setMouseEnabled(False, False)
        left.setLabel("query i")
        bottom.setLabel("key j")
        self.image = HeatmapItem(None, on_click, on_hover)
        plot.addItem(self.image)
        self.colorbar = pg.ColorBarItem(
            values=(0, 1),
            colorMap=self._color_maps["sequential"],
            interactive=False,
            colorMapMenu=False,
            width=14,  # a slim bar: the dock is narrow, and its numbers matter more
        )
        self.colorbar.setImageItem(self.image, insert_in=plot)
        self.colorbar.axis.setTextPen(TEXT_RGB)
        self.colorbar.axis.setPen(TEXT_RGB)
        self.zoomed = pg.ImageItem(axisOrder="row-major")  # exact cells over the blocks
        self.zoomed.setVisible(False)
        plot.addItem(self.zoomed)
        self._zoom_source: tuple[HeadStack, Head, ShownValues] | None = None
        self._zoom_timer = QTimer(self, singleShot=True, interval=ZOOM_DEBOUNCE_MS)
        self._zoom_timer.timeout.connect(self._zoom_in)
        box.sigRangeChanged.connect(lambda *_: self._zoom_timer.start())

    def _zoom_in(self) -> None:
        """Draw the visible cells exactly when the view spans at most ZOOM_ROWS rows."""
        if self._zoom_source is None:
            return
        stack, (layer, head), shown = self._zoom_source
        (x0, x1), (y0, y1) = self.getPlotItem().getViewBox().viewRange()
        t = stack.shape[-1]
        i0, i1 = max(0, int(y0)), min(t, int(np.ceil(y1)))
        j0, j1 = max(0, int(x0)), min(t, int(np.ceil(x1)))
        if i1 - i0 > ZOOM_ROWS or j1 - j0 > ZOOM_ROWS or i1 <= i0 or j1 <= j0:
            self.zoomed.setVisible(False)
            return
        cells = stack.rows(layer, head, i0, i1)[:, j0:j1]  # (rows, keys), recomputed
        self.zoomed.setImage(cells, levels=shown.levels, lut=lut(shown.colormap), autoLevels=False)
        self.zoomed.setRect(QRectF(j0, i0, j1 - j0, i1 - i0))
        self.zoomed.setVisible(True)

    def set_tokens(self, tokens: list[str]) -> None:
        """Write ``tokens`` on both axes (query i on the left, key j at the bottom)."""
        plot = self.getPlotItem()
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            if isinstance(axis, TokenAxis):
                axis.set_tokens(tokens)

    def set_head(
        self, values: np.ndarray, shown: ShownValues, title: str, head: Head | None = None
    ) -> None:
        """Show one head's (T, T) ``values`` on ``shown``'s colour scale, named ``title``.

        ``values`` may be blocks of a longer head (``shown.values`` a HeadStack, each pixel
        a block): the image is stretched over T × T token units, the title says so, and
        the plot zooms (wheel, drag): a view of at most ZOOM_ROWS rows is drawn cell by
        cell from rows of ``head`` recomputed on demand.
        """
        plot = self.getPlotItem()
        extent = shown.values.shape[-1]
        stack = shown.values if isinstance(shown.values, HeadStack) else None
        self._zoom_source = None
        if stack is not None and head is not None and values.shape[1] < extent:
            self._zoom_source = (stack, head, shown)
        self.zoomed.setVisible(False)
        plot.getViewBox().setMouseEnabled(
            self._zoom_source is not None, self._zoom_source is not None
        )
        self.image.setImage(values, autoLevels=False)
        self.image.setRect(QRectF(0, 0, extent, extent))
        self.colorbar.setColorMap(self._color_maps[shown.colormap])
        self.colorbar.setLevels(shown.levels)
        self.colorbar.axis.setLabel(shown.label)
        if values.shape[1] < extent:
            block = -(-extent // values.shape[1])
            title = f"{title} · {block} × {block} tokens a pixel"
        plot.setTitle(title, color=TEXT_RGB)
        plot.getViewBox().setRange(xRange=(0, extent), yRange=(0, extent), padding=0)

    def hold_width(self) -> None:
        """Never narrower than the axes, image and colour bar need.

        A dock that cannot give that room is held wider instead of cutting off the
        colour bar.
        """
        needed = math.ceil(self.getPlotItem().layout.minimumWidth()) + 2
        self.setMinimumWidth(max(DETAIL_MIN_PX[0], needed))
