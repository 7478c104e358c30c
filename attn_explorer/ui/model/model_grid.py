"""The Model dock's drawing pieces: a heatmap item and the layers × heads grid.

Private to :mod:`attn_explorer.ui.model.model_view` (the token axis is
:mod:`~attn_explorer.ui.common.token_axis`): a heatmap image that reports clicks and hovers,
and a scrolling grid of square thumbnails whose "layer n" / "head n" labels stay in view. For a
decoder whose query heads share key/value heads, a colour band under the "head n"
labels brackets each group: "KV 1" spans the query heads that read KV head 1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from pyqtgraph.GraphicsScene.mouseEvents import HoverEvent, MouseClickEvent
from PySide6 import QtGui
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QGraphicsItem, QScrollArea, QWidget

from attn_explorer.models.session import Head
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.graphics import retire
from attn_explorer.ui.common.token_axis import TEXT_RGB

#: Thumbnail side in pixels: cells grow to fill the grid within these; else it scrolls.
MIN_CELL_PX, MAX_CELL_PX = 14, 160
#: Gap between thumbnails, width of the "layer n" column, height of the "head n" row (px).
CELL_GAP_PX, ROW_LABEL_PX, HEAD_LABEL_PX = 4, 56, 30
#: Height of the "KV n" band under the head labels (only when query heads share keys).
GROUP_BAND_PX = 18
#: The bands' colours, alternating so neighbouring groups stay apart (light, text readable).
GROUP_RGB = ((214, 230, 245), (250, 224, 196), (216, 238, 210), (236, 218, 240))
#: Below this cell width the column label breaks into "head" over "n", in a smaller font.
ONE_LINE_HEAD_PX = 56
#: Under the label of the layer a long pass is computing (the later layers are blank).
COMPUTING = "computing"
#: The frame of the selected thumbnail.
SELECTION_PEN = pg.mkPen((0, 0, 0), width=3)


def color_map(name: str) -> pg.ColorMap:
    """The :mod:`attn_explorer.state.colormaps` table ``name`` as a pyqtgraph ColorMap."""
    table = lut(name)  # (256, 3) uint8
    return pg.ColorMap(np.linspace(0.0, 1.0, len(table)), table)


class HeatmapItem(pg.ImageItem):
    """An attention heatmap that reports a left click and the hovered (query i, key j).

    ``head`` is the (layer, head) it shows, or None for the enlarged (the selected) head.
    """

    def __init__(
        self,
        head: Head | None,
        clicked: Callable[[Head], None],
        hovered: Callable[[Head | None, tuple[int, int] | None], None],
    ) -> None:
        super().__init__(axisOrder="row-major")  # image[i, j]: row = query i, column = key j
        self.head = head
        self._clicked, self._hovered = clicked, hovered
        self.setAcceptHoverEvents(True)

    def mouseClickEvent(self, ev: MouseClickEvent) -> None:
        if ev.button() == Qt.MouseButton.LeftButton and self.head is not None:
            ev.accept()
            self._clicked(self.head)

    def hoverEvent(self, ev: HoverEvent) -> None:
        if ev.isExit() or self.image is None:
            self._hovered(self.head, None)
            return
        pos = self.mapToParent(ev.pos())  # token units, also where an image shows blocks
        self._hovered(self.head, (int(np.floor(pos.y())), int(np.floor(pos.x()))))


class GridHeader(QWidget):
    """The "head n" row or the "layer n" column of the thumbnail grid: it stays in view.

    Painted in the scroll area's margin, shifted with the thumbnails; the selected bold.
    """

    def __init__(self, grid: ThumbnailGrid, columns: bool) -> None:
        super().__init__(grid)
        self._grid, self._columns = grid, columns

    def texts(self) -> list[str]:
        """The labels, from 1: "head n" (over two lines in narrow cells) or "layer n"."""
        grid = self._grid
        if grid.shape is None:
            return []
        if not self._columns:
            n_layers = grid.shape[0]
            notes = (grid.layer_notes + [""] * n_layers)[:n_layers]
            if grid.pending is not None and grid.pending < n_layers:
                notes[grid.pending] = COMPUTING  # the layer a long pass is on
            return [
                f"layer {layer + 1}" + (f"\n{note}" if note else "")
                for layer, note in enumerate(notes)
            ]
        gap = " " if grid.cell >= ONE_LINE_HEAD_PX else "\n"
        return [f"head{gap}{head + 1}" for head in range(grid.shape[1])]

    def _words_and_room(self) -> tuple[list[str], float]:
        """The words a label must show whole, and the pixels each label has for them."""
        if self._columns:
            return ["head"], self._grid.cell + CELL_GAP_PX - 2
        return "\n".join(self.texts()).split("\n"), ROW_LABEL_PX - 6

    def label_font(self) -> QFont:
        """The widget's font, smaller where a word would not fit ("head", "computing")."""
        font, columns = QFont(self.font()), self._columns
        if columns and self._grid.cell >= ONE_LINE_HEAD_PX:
            return font
        words, room = self._words_and_room()
        font.setPointSizeF(font.pointSizeF() * (0.85 if columns else 1))
        while font.pointSizeF() > 5 and _widest(font, words) > room:
            font.setPointSizeF(font.pointSizeF() - 0.5)
        return font

    def selected_font(self, font: QFont, text: str) -> QFont:
        """``font`` marking the selected head's or layer's label ``text``: bold where bold
        fits its room, else underlined. Over many narrow cells a bold "head" ran into its
        neighbour's label ("headhead") and, over the first cell, lost its "h" at the grid's
        edge."""
        marked = QFont(font)
        _, room = self._words_and_room()
        marked.setBold(True)
        if _widest(marked, text.split("\n")) > room:
            marked.setBold(False)
            marked.setUnderline(True)
        return marked

    def groups(self) -> list[tuple[int, int, str]]:
        """The "KV n" bands: (first head, last head, text) per shared key/value head."""
        kv_heads = self._grid.kv_heads
        if not self._columns or kv_heads is None:
            return []
        bands = []
        for kv in range(int(kv_heads.max()) + 1):
            members = np.flatnonzero(kv_heads == kv)
            bands.append((int(members[0]), int(members[-1]), f"KV {kv + 1}"))
        return bands

    def column_label_rect(self, index: int, text: str, font: QFont) -> QRectF:
        """Where head ``index``'s label ``text`` is drawn in ``font``: centred over its cell,
        as wide as its longest line, and moved inside the grid's own width where it would
        pass an edge (a bold "head" over the first of many narrow cells lost its "h")."""
        grid, metrics = self._grid, QFontMetrics(font)
        pitch = grid.cell + CELL_GAP_PX
        need = max(grid.cell + 4, *(metrics.horizontalAdvance(line) for line in text.split("\n")))
        left_edge = float(grid.canvas.pos().x())  # the grid's left: moves as it scrolls
        centre = left_edge + index * pitch + grid.cell / 2
        left = min(max(centre - need / 2, left_edge), left_edge + grid.canvas.width() - need)
        band = GROUP_BAND_PX if self.groups() else 0
        return QRectF(left, 0, need, self.height() - band - 2)

    def paintEvent(self, event: QPaintEvent) -> None:
        grid = self._grid
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("white"))
        cell, pitch = grid.cell, grid.cell + CELL_GAP_PX
        band = GROUP_BAND_PX if self.groups() else 0
        for index, (first, last, text) in enumerate(self.groups()):
            left = grid.canvas.pos().x() + first * pitch
            rect = QRectF(left, self.height() - band, (last - first) * pitch + cell, band - 2)
            p.fillRect(rect, QColor(*GROUP_RGB[index % len(GROUP_RGB)]))
            p.setPen(QColor(*TEXT_RGB))
            room = QFontMetrics(self.font()).horizontalAdvance(text) <= rect.width()
            p.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), text if room else text[3:])
        p.setPen(QColor(*TEXT_RGB))
        origin = grid.canvas.pos()  # in the viewport: moves as the grid scrolls
        selected = grid.selected[1] if self._columns else grid.selected[0]
        plain = self.label_font()
        for index, text in enumerate(self.texts()):
            font = self.selected_font(plain, text) if index == selected else plain
            p.setFont(font)
            if self._columns:
                rect = self.column_label_rect(index, text, font)
                align = Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom
            else:
                rect = QRectF(0, origin.y() + index * pitch, self.width() - 6, cell)
                align = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
            p.drawText(rect, int(align), text)
        p.end()


def _widest(font: QFont, words: list[str]) -> int:
    """The width in pixels of the widest of ``words`` in ``font``."""
    return max(map(QFontMetrics(font).horizontalAdvance, words))


class ThumbnailGrid(QScrollArea):
    """Layers × heads thumbnails, square, in rows "layer n" and columns "head n".

    The cells grow to fill the visible area (``MIN_CELL_PX`` to ``MAX_CELL_PX``); when
    even the smallest do not fit, the grid scrolls under its labels, which stay in view.
    """

    def __init__(
        self,
        clicked: Callable[[Head], None],
        hovered: Callable[[Head | None, tuple[int, int] | None], None],
    ) -> None:
        super().__init__()
        self._clicked, self._hovered = clicked, hovered
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.canvas.ci.layout.setContentsMargins(0, 0, 0, 0)
        self.canvas.ci.layout.setSpacing(CELL_GAP_PX)
        self.setWidget(self.canvas)
        self.setWidgetResizable(False)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)  # by its labels
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setStyleSheet("QScrollArea { background: white; }")  # one surface with the canvas
        self.setViewportMargins(ROW_LABEL_PX, HEAD_LABEL_PX, 0, 0)
        self.setMinimumSize(2 * MIN_CELL_PX + ROW_LABEL_PX, 2 * MIN_CELL_PX + HEAD_LABEL_PX)
        self._head_header = GridHeader(self, columns=True)
        self._layer_header = GridHeader(self, columns=False)
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.valueChanged.connect(self._update_headers)
        self.thumbnails: dict[Head, tuple[pg.ViewBox, HeatmapItem]] = {}
        #: (extent in tokens, image shape) each thumbnail's rect and range were set for:
        self._placed: dict[Head, tuple[int, tuple[int, ...]]] = {}
        self.shape: tuple[int, int] | None = None
        self.selected: Head = (0, 0)
        self._framed: Head | None = None  # the thumbnail with the selection's frame
        self._fitted: tuple[int, tuple[int, int]] | None = None  # (cell, shape) laid out
        self.cell = MIN_CELL_PX
        self.kv_heads: np.ndarray | None = None  # (H,): the KV head each query head reads
        #: Under each "layer n": "local 512" or "global" when the layers differ, else nothing.
        self.layer_notes: list[str] = []
        #: While a long pass runs: the first layer not finished (its label says so), else None.
        self.pending: int | None = None

    @property
    def header_height(self) -> int:
        """The column labels' height: "head n", plus the "KV n" band when heads share."""
        return HEAD_LABEL_PX + (GROUP_BAND_PX if self.kv_heads is not None else 0)

    def set_groups(self, kv_heads: np.ndarray | None) -> None:
        """Bracket the query heads that share a key/value head (None: no bands)."""
        shared = kv_heads is not None and len(np.unique(kv_heads)) < len(kv_heads)
        groups, old = (np.asarray(kv_heads) if shared else None), self.kv_heads
        if old is None if groups is None else old is not None and np.array_equal(groups, old):
            return  # the same bands: no new layout (a long pass's result keeps its own)
        self.kv_heads = groups
        self.setViewportMargins(ROW_LABEL_PX, self.header_height, 0, 0)
        self._place_headers()
        self._fit()

    def set_layer_kinds(self, kinds: tuple[str, ...], window: int) -> None:
        """Say under each layer's label whether it is local (its window) or global."""
        self.layer_notes = (
            ["local" if kind == "local" else "global" for kind in kinds]  # the window: beside
            if window and "local" in kinds
            else []
        )
        self._layer_header.update()

    def build(self, n_layers: int, n_heads: int) -> None:
        """One thumbnail per (layer, head); nothing is rebuilt when the shape is the same."""
        if (n_layers, n_heads) == self.shape:
            return
        self.canvas.clear()
        retire(part for box_and_item in self.thumbnails.values() for part in box_and_item)
        self.thumbnails.clear()  # in place: the view's tests read this dict
        self._placed.clear()
        self._framed = self._fitted = None
        for layer in range(n_layers):
            for head in range(n_heads):
                box = self.canvas.addViewBox(row=layer, col=head)
                box.invertY(True)
                box.setMouseEnabled(False, False)
                box.setMenuEnabled(False)
                item = HeatmapItem((layer, head), self._clicked, self._hovered)
                # a pixmap until its image changes: repainting 270 calls no Python paint()s
                item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
                box.addItem(item)
                self.thumbnails[(layer, head)] = (box, item)
        self.shape = (n_layers, n_heads)
        self._place_headers()
        self._fit()

    def set_images(
        self,
        values: np.ndarray,
        levels: tuple[float, float],
        table: np.ndarray,
        tokens: int | None = None,
    ) -> None:
        """Show ``values`` (L, H, T, T) on the colour scale ``levels`` through ``table``.

        ``values`` may be (L, H, n, n) block previews of ``tokens`` tokens: each image is
        stretched over T × T token units, so hovers and ranges still count tokens.
        """
        extent = tokens or values.shape[-1]
        for (layer, head), (box, item) in self.thumbnails.items():
            item.setImage(values[layer, head], levels=levels, lut=table, autoLevels=False)
            item.setRect(QRectF(0, 0, extent, extent))
            box.setRange(xRange=(0, extent), yRange=(0, extent), padding=0)
            self._placed[(layer, head)] = (extent, values.shape[2:])
        self.set_pending(None)

    def set_layer(
        self,
        layer: int,
        values: np.ndarray,
        levels: tuple[float, float],
        table: np.ndarray,
        tokens: int,
    ) -> None:
        """One layer's row of thumbnails: ``values`` (H, n, n) block previews of ``tokens``."""
        placed = (tokens, values.shape[1:])  # the rect's scale depends on the image's shape
        for head in range(values.shape[0]):
            box, item = self.thumbnails[(layer, head)]
            item.setImage(values[head], levels=levels, lut=table, autoLevels=False)
            if self._placed.get((layer, head)) != placed:  # a pass's layers: once, not each redraw
                self._placed[(layer, head)] = placed
                item.setRect(QRectF(0, 0, tokens, tokens))
                box.setRange(xRange=(0, tokens), yRange=(0, tokens), padding=0)

    def repaint_now(self, layers: range | None = None) -> None:
        """Paint the thumbnails of ``layers`` (None: all) now (a long pass's redraw, held)."""
        if layers is None:
            return self.canvas.viewport().repaint()
        region = QtGui.QRegion()
        for (layer, _), (box, _) in self.thumbnails.items():
            if layer in layers:
                region += self.canvas.mapFromScene(box.sceneBoundingRect()).boundingRect()
        self.canvas.viewport().repaint(region)

    def set_pending(self, first: int | None) -> None:
        """A long pass's layer ``first`` (from 0), marked, and later rows blank; None: none."""
        self.pending = first
        if first is not None:
            for (layer, _), (_, item) in self.thumbnails.items():
                if layer >= first and item.image is not None:
                    item.clear()
        self._layer_header.update()

    def set_selected(self, selected: Head) -> None:
        """Frame the thumbnail of ``selected`` (layer, head), embolden its labels, show it."""
        self.selected = selected
        if self._framed != selected:  # two frames change, not 270 thumbnails repainted
            for where in (self._framed, selected):
                if where in self.thumbnails:
                    self.thumbnails[where][0].setBorder(
                        SELECTION_PEN if where == selected else None
                    )
            self._framed = selected if selected in self.thumbnails else None
        layer, head = selected
        pitch = self.cell + CELL_GAP_PX
        half = self.cell // 2
        self.ensureVisible(head * pitch + half, layer * pitch + half, half + 2, half + 2)
        self._update_headers()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_headers()
        self._fit()

    def _place_headers(self) -> None:
        area, top = self.viewport().geometry(), self.header_height
        self._head_header.setGeometry(area.left(), area.top() - top, area.width(), top)
        self._layer_header.setGeometry(area.left() - ROW_LABEL_PX, area.top(),
                                       ROW_LABEL_PX, area.height())  # fmt: skip

    def _update_headers(self, *_: object) -> None:
        self._head_header.update()
        self._layer_header.update()

    def cell_for(self, width: int, height: int) -> int:
        """The side of the cells in a grid of ``width`` × ``height`` pixels, labels included.

        As large as fits both ways, between ``MIN_CELL_PX`` and ``MAX_CELL_PX``; the
        smallest cells scroll when even they do not fit.
        """
        if self.shape is None:
            return MIN_CELL_PX
        n_layers, n_heads = self.shape
        frame = 2 * self.frameWidth()
        across = (width - frame - ROW_LABEL_PX + CELL_GAP_PX) / n_heads - CELL_GAP_PX
        down = (height - frame - self.header_height + CELL_GAP_PX) / n_layers - CELL_GAP_PX
        return int(min(max(min(across, down), MIN_CELL_PX), MAX_CELL_PX))

    def size_for(self, cell: int) -> QSize:
        """The grid's size, labels included, that cells of side ``cell`` fill exactly."""
        n_layers, n_heads = self.shape or (1, 1)
        frame = 2 * self.frameWidth()
        pitch = cell + CELL_GAP_PX
        return QSize(
            frame + ROW_LABEL_PX + n_heads * pitch - CELL_GAP_PX,
            frame + self.header_height + n_layers * pitch - CELL_GAP_PX,
        )

    def _fit(self) -> None:
        if self.shape is None:
            return
        n_layers, n_heads = self.shape
        self.cell = cell = self.cell_for(self.width(), self.height())
        if self._fitted == (cell, self.shape):  # 270 boxes resized for nothing took 40 ms
            self._update_headers()
            return
        self._fitted = (cell, self.shape)
        for box, _ in self.thumbnails.values():
            box.setFixedWidth(cell)
            box.setFixedHeight(cell)
        pitch = cell + CELL_GAP_PX
        self.canvas.setFixedSize(n_heads * pitch - CELL_GAP_PX, n_layers * pitch - CELL_GAP_PX)
        self._update_headers()
