"""Per-head heatmaps: one pyqtgraph ImageItem per head, a colour bar, hover read-out.

Rows are queries (top to bottom), columns are keys (left to right). Colours come
from :mod:`attn_explorer.state.colormaps` (diverging about 0 for scores, sequential
0..1 for weights). Thumbnails colour the result's :mod:`~attn_explorer.state.results.preview`
(blocks of cells reduced to about the pixels on screen, made with the result), so
16 heads of 2048×2048 redraw without freezing; the hover read-out says when a
pixel is a block. The enlarged head shows every cell.

One job: the explorer's live view of a stage, head by head. The plots' layout in the view
(how many columns: :func:`attn_explorer.state.views.figure.best_columns`), their colours
and the mouse belong together because each redraw touches all of them; the plot items
themselves (a head's plot, its token axes, the colour bar) are in :mod:`.heatmap_items`.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from pyqtgraph.GraphicsScene.mouseEvents import MouseClickEvent
from PySide6.QtCore import QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QMenu, QToolTip, QVBoxLayout, QWidget

from attn_explorer.state import Session
from attn_explorer.state.colormaps import colour_index, head_ranges
from attn_explorer.state.labels import STAGE_NAMES
from attn_explorer.state.results.preview import Preview, block_all, make_preview
from attn_explorer.state.results.results import Results
from attn_explorer.state.storage.export import Named
from attn_explorer.state.types import head_label
from attn_explorer.state.views.figure import best_columns
from attn_explorer.state.views.frame import Frame
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.ui.common.graphics import retire
from attn_explorer.ui.common.text import plain_tooltip
from attn_explorer.ui.explorer.heatmap_items import (
    BAR_PX,
    EMPTY_INDEX,
    ColourBar,
    HeadPlot,
    cell_number,
    hover_hint,
    rgba_table,
)

# Dark text on the white plot background: titles and axes must read well.
pg.setConfigOptions(imageAxisOrder="row-major", antialias=False, foreground=(40, 40, 40))

#: More heads than this are drawn as thumbnails without axes.
COMPACT_HEADS = 4


RELAYOUT_MS = 120  # after a resize settles, choose the number of columns again
MIN_HEAD_PX = 48  # one head's column: its title ("head 16", 8 pt) over a few cells
TITLE_PX = 18  # a thumbnail's title row
SHARED_BAR_PX = 85  # the shared bar, with its caption


class HeatmapGrid(QWidget):
    """A grid of heads (or one enlarged head), a shared or per-head colour bar, hover text."""

    cellClicked = Signal(int, int, int)  # head, i, j
    exportRequested = Signal(str)  # "current" or "montage"

    def __init__(
        self,
        session: Session,
        results: Results,
        stepper: Stepper,
        parent: QWidget | None = None,
        *,
        document: Named | None = None,
    ) -> None:
        super().__init__(parent)
        self.session = session
        self.results = results
        self.stepper = stepper
        self.document = document  # its source names a taken model head
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.hover = QLabel("Hover a heatmap for (head, query i, key j, value).")
        self.hover.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hover.setTextFormat(Qt.TextFormat.PlainText)  # token names are text, never HTML
        self.hover.setWordWrap(True)  # a long read-out wraps, never widening the window
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.hover)
        self.plots: list[HeadPlot] = []
        self.images: list[pg.ImageItem] = []
        self.bars: list[ColourBar] = []
        self.enlarged: int | None = None
        self._layout_key: tuple[object, ...] | None = None
        self._values: np.ndarray | None = None  # (H, T_q, T_k) of the shown stage
        self._preview: Preview | None = None  # the same, reduced for thumbnails
        #: (preview, it folded to the screen's pixels, by how much): see _on_screen.
        self._fold: tuple[Preview, Preview, tuple[int, int]] | None = None
        self._hinted_blocks = (1, 1)  # the block size the hover text last named
        #: Per image, what it shows: (pixels, range, colour map); None: draw it again.
        self._drawn: list[tuple[np.ndarray, tuple[float, float], str] | None] = []
        self._stage = "scores"
        self._frame: Frame | None = None
        self.ranges: list[tuple[float, float]] = []
        self._hover_cell: tuple[int, int, int] | None = None  # the cell the read-out names
        self._relayout = QTimer(self)
        self._relayout.setSingleShot(True)
        self._relayout.setInterval(RELAYOUT_MS)
        self._relayout.timeout.connect(self._relayout_if_needed)
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setToolTip(
            "Click a cell to step the loop to it; double-click a head to enlarge it; "
            "right-click to export."
        )
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        results.changed.connect(self.refresh)
        session.events.options.connect(self._on_option_changed)
        session.events.tokens.connect(self._on_tokens_changed)
        session.events.shape.connect(lambda: self.set_enlarged(None, redraw=False))
        stepper.changed.connect(self.set_frame)
        session.events.document.connect(self._retitle)
        self._frame = stepper.frame()
        self.refresh()

    def _context_menu(self, pos: object) -> None:
        menu = QMenu(self)
        menu.addAction("Export current head…", lambda: self.exportRequested.emit("current"))
        menu.addAction(
            "Export all heads as a montage…", lambda: self.exportRequested.emit("montage")
        )
        menu.exec(self.view.mapToGlobal(pos))

    # -- building ------------------------------------------------------------------
    def _heads_shown(self) -> list[int]:
        # The heads of the values on screen, which may lag the session by one recompute.
        heads = self._values.shape[0] if self._values is not None else self.session.shape[1]
        if self.enlarged is not None and self.enlarged < heads:
            return [self.enlarged]
        return list(range(heads))

    def _rebuild(self, t_q: int, t_k: int) -> None:
        heads = self._heads_shown()
        shared = self.session.options.shared_scale
        columns = self._columns_for(len(heads), t_q, t_k)
        key = (tuple(heads), t_q, t_k, shared, tuple(self.session.tokens), columns)
        if key == self._layout_key:
            return
        old_key, self._layout_key = self._layout_key, key
        kept = (0, 3, 5)  # the same heads, colour-scale choice and columns
        same = old_key is not None and [old_key[n] for n in kept] == [key[n] for n in kept]
        if same:
            self._resize_plots(t_q, t_k)  # same heads and layout: keep the plots
            return
        self.view.clear()
        retire([*self.plots, *self.images, *self.bars])  # deleted by Qt first, then let go
        self.plots, self.images, self.bars = [], [], []
        self._drawn = [None] * len(heads)
        tokens = self.session.tokens
        # Many small heads: thumbnails show only a title; hover and enlarging carry labels.
        compact = len(heads) > COMPACT_HEADS
        self.hover.setText(self._hover_hint())
        for n, h in enumerate(heads):
            row, col = divmod(n, columns)
            plot = HeadPlot(self.head_title(h), compact, self._stage)
            if plot.left is not None and len(tokens) == t_q:
                plot.left.set_tokens(tokens)
            if plot.bottom is not None and self._stage == "output":
                plot.bottom.set_dimensions(t_k)  # columns of V: d1, d2, …
            elif plot.bottom is not None and len(tokens) == t_k:
                plot.bottom.set_tokens(tokens)
            image = pg.ImageItem()
            image.setRect(0, 0, t_k, t_q)
            plot.vb.addItem(image)
            plot.vb.setRange(xRange=(0, t_k), yRange=(0, t_q), padding=0)
            grid_col = col * (1 if shared else 2)
            self.view.addItem(plot, row=row, col=grid_col)
            self.plots.append(plot)
            self.images.append(image)
            if not shared:
                bar = ColourBar()
                self.view.addItem(bar, row=row, col=grid_col + 1)
                self.bars.append(bar)
        if shared:
            bar = ColourBar()
            if len(heads) > 1:
                bar.set_caption("one scale shared by all heads")
                bar.setMaximumWidth(SHARED_BAR_PX)
            rows = math.ceil(len(heads) / columns)
            self.view.addItem(bar, row=0, col=columns, rowspan=max(1, rows))
            self.bars.append(bar)
        # Room for one column of heads and its colour bar(s): a narrow view gets fewer
        # columns (best_columns), never a bar past its edge; heads with axes need theirs.
        if compact:
            least = MIN_HEAD_PX + (SHARED_BAR_PX if shared else 2 * BAR_PX)
        else:
            hint = self.view.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize).width()
            least = math.ceil(hint / columns + (0 if shared else BAR_PX)) + 8
        self.view.setMinimumWidth(least)
        self._relayout.start()  # new plots settle after their first paint: fold again then

    def layout_items(self) -> dict[str, pg.GraphicsObject]:
        """What must be on screen, by name: each head's cells and title, each colour bar."""
        items: dict[str, pg.GraphicsObject] = {}
        for plot, h in zip(self.plots, self._heads_shown(), strict=True):
            items[f"head {h + 1} cells"] = plot.vb
            items[f"head {h + 1} title"] = plot.titleLabel
        for n, bar in enumerate(self.bars):
            items[f"colour bar {n + 1}"] = bar
        return items

    def _columns_for(self, count: int, t_q: int, t_k: int) -> int:
        width, height = self.view.width(), self.view.height()
        if width < 50 or height < 50:  # not laid out yet: a square grid
            return max(1, math.ceil(math.sqrt(count)))
        if self.session.options.shared_scale:
            bar, per_column = SHARED_BAR_PX, 0
        else:
            bar, per_column = 0, BAR_PX
        return best_columns(
            count, width, height, t_q, t_k, bar, per_column,
            min_column_px=MIN_HEAD_PX, title_px=TITLE_PX,
        )  # fmt: skip

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._relayout.start()  # once the size settles: maybe another number of columns

    @property
    def settling(self) -> bool:
        """A resize is waiting to settle before the heads are laid out and folded again."""
        return self._relayout.isActive()

    def _relayout_if_needed(self) -> None:
        if self._values is None or self._layout_key is None:
            return
        _, t_q, t_k = self._values.shape
        columns = self._columns_for(len(self._heads_shown()), t_q, t_k)
        fold = self._fold[2] if self._fold is not None else None
        if columns != self._layout_key[5] or (
            self.enlarged is None and fold is not None and self._screen_fold() != fold
        ):
            self.redraw()

    def _hover_hint(self) -> str:
        rows, cols = self._blocks()
        many = len(self._heads_shown()) > COMPACT_HEADS
        return hover_hint(rows, cols, self.colormap() == "diverging", many)

    def _resize_plots(self, t_q: int, t_k: int) -> None:
        """New T or token names for the same heads: update ranges and ticks in place.

        Far fewer Qt calls than building the plots again, which matters while a
        worker runs Python code: every Qt call here waits for the GIL.
        """
        tokens = self.session.tokens
        for plot, image in zip(self.plots, self.images, strict=True):
            image.setRect(0, 0, t_k, t_q)
            plot.vb.setRange(xRange=(0, t_k), yRange=(0, t_q), padding=0)
            if plot.left is not None:
                plot.left.set_tokens(tokens if len(tokens) == t_q else [])
            if plot.bottom is not None and self._stage == "output":
                plot.bottom.set_dimensions(t_k)
            elif plot.bottom is not None:
                plot.bottom.set_tokens(tokens if len(tokens) == t_k else [])
        self._retitle()  # an undo past a taken head keeps the plots, not its name

    def head_title(self, head: int) -> str:
        """A head's title: ``head 2``, or where a taken model head came from."""
        source = self.document.source if self.document is not None else None
        return html.escape(head_label(head, source))  # LabelItem reads HTML

    def _retitle(self) -> None:
        for plot, h in zip(self.plots, self._heads_shown(), strict=False):
            plot.titleLabel.setText(self.head_title(h))

    # -- updates ---------------------------------------------------------------------
    def _on_option_changed(self, name: str) -> None:
        if name in ("stage", "batch_index", "all"):
            self.refresh()
        elif name in ("shared_scale", "score_colormap", "weight_colormap"):
            self.redraw()

    def _on_tokens_changed(self) -> None:
        self.redraw()  # the layout key holds the token names: axes relabel in place

    def refresh(self) -> None:
        """Show the selected stage of every head of the selected batch entry of the result."""
        result = self.results.result
        stage = self.session.options.stage
        values = result.stage(stage) if result is not None else None
        if values is None:
            return
        b = min(self.session.options.batch_index, values.shape[0] - 1)
        if stage != self._stage:
            self._layout_key = None
        self._stage = stage
        self.set_values(values[b], self.results.preview(stage, b))

    def set_values(self, values: np.ndarray, preview: Preview | None = None) -> None:
        """Show ``values`` (H, T_q, T_k) of the current stage; ``preview`` is their
        :func:`~attn_explorer.state.results.preview.make_preview` when already made."""
        shape_changed = self._values is None or self._values.shape != values.shape
        self._values = values
        self._preview = preview if preview is not None else make_preview(values)
        self._hover_cell = None  # new numbers: the next move describes its cell afresh
        if shape_changed:
            self.hover.setText(self._hover_hint())  # a read-out of the old shape is wrong now
        self.redraw()

    def set_frame(self, frame: Frame | None) -> None:
        if frame is None and self._frame is None:
            return  # not stepping before or after: nothing to redraw
        self._frame = frame
        self.redraw()

    def set_enlarged(self, head: int | None, redraw: bool = True) -> None:
        """Show one head large (None: all heads)."""
        if head != self.enlarged:
            self.enlarged = head
            self._layout_key = None  # a different set of heads: build the plots again
        if redraw:
            self.redraw()

    def colormap(self) -> str:
        return self.session.options.colormap_for(self._stage)

    @property
    def cells_per_pixel(self) -> tuple[int, int]:
        """Cells (rows, columns) each pixel of a head's image stands for: 1 × 1 when enlarged."""
        return self._blocks()

    def _blocks(self) -> tuple[int, int]:
        """Cells per pixel (rows, columns) of the heads on screen: 1 × 1 when enlarged."""
        if self._preview is None or self.enlarged is not None:
            return 1, 1
        drawn = self._drawn_preview()
        return drawn.rows, drawn.cols

    def _drawn_preview(self) -> Preview:
        """The preview as the thumbnails were last drawn (folded or not)."""
        assert self._preview is not None
        if self._fold is not None and self._fold[0] is self._preview:
            return self._fold[1]
        return self._preview

    def _screen_fold(self) -> tuple[int, int]:
        """How many of the preview's blocks one screen pixel of a thumbnail must show."""
        if self._preview is None or not self.plots:
            return 1, 1
        if min(plot.vb.width() for plot in self.plots) < 8:
            self.view.ci.layout.activate()  # plots just built: give them their sizes now
        ratio = self.view.devicePixelRatioF()
        height = min(plot.vb.height() for plot in self.plots) * ratio
        width = min(plot.vb.width() for plot in self.plots) * ratio
        if height < 8 or width < 8:  # the view itself is not laid out yet
            return 1, 1
        n_q, n_k = self._preview.highest[0].shape
        return max(1, math.ceil(n_q / height)), max(1, math.ceil(n_k / width))

    def _on_screen(self) -> Preview:
        """The preview folded to at most the thumbnails' pixels: drawn bigger, Qt would drop
        every other pixel again. Kept while the preview and the factors stay."""
        assert self._preview is not None
        fold = self._screen_fold()
        last = self._fold
        if last is not None and last[0] is self._preview and last[2] == fold:
            return last[1]
        reuse = (last[0], last[1]) if last is not None and last[2] == fold else None
        shown = self._preview.folded(*fold, reuse=reuse)
        self._fold = (self._preview, shown, fold)
        return shown

    def redraw(self) -> None:
        """Recolour every shown head from the current values, scale and stepper frame."""
        if self._values is None or self._preview is None:
            return
        heads_total, t_q, t_k = self._values.shape
        self._rebuild(t_q, t_k)
        heads = self._heads_shown()
        preview = self._preview
        name = self.colormap()
        # Each head's exact extremes, kept by the preview: the ranges an export gets.
        extremes = [preview.extremes([h]) for h in range(heads_total)]
        self.ranges = head_ranges(extremes, self._stage, name, self.session.options.shared_scale)
        on_screen = self._on_screen() if self.enlarged is None else preview
        shown = on_screen.shown(diverging=name == "diverging")  # per head, ≤ pixels
        filled = self._filled(heads_total, t_q, t_k)
        blocks = self._blocks()
        if blocks != self._hinted_blocks:  # the hint names the block size; a read-out too
            self._hinted_blocks = blocks
            self._hover_cell = None
            self.hover.setText(self._hover_hint())
        table = rgba_table(name)
        for n, (image, h) in enumerate(zip(self.images, heads, strict=True)):
            pixels = self._values[h] if self.enlarged is not None else shown[h]
            drawn = (pixels, self.ranges[h], name)
            last = self._drawn[n]
            if filled is None and last is not None and last[0] is pixels and last[1:] == drawn[1:]:
                continue  # the same numbers in the same colours: this head is on screen
            index = colour_index(pixels, *self.ranges[h])  # (rows, cols) rows of the table
            if filled is not None:
                index[~block_all(filled[h], *blocks)] = EMPTY_INDEX
            rgba = np.take(table, index).view(np.uint8).reshape(*index.shape, 4)
            image.setImage(rgba, autoLevels=False, levels=None)
            image.setRect(0, 0, t_k, t_q)
            self._drawn[n] = drawn if filled is None else None
        if self.session.options.shared_scale:
            self.bars[0].set_range(name, *self.ranges[heads[0]])
        else:
            for bar, h in zip(self.bars, heads, strict=True):
                bar.set_range(name, *self.ranges[h])

    def _filled(self, heads: int, t_q: int, t_k: int) -> np.ndarray | None:
        frame = self._frame
        if frame is None or self._stage == "output":
            return None
        b = self.session.options.batch_index
        if frame.filled.shape[1:] != (heads, t_q, t_k) or b >= frame.filled.shape[0]:
            return None
        return frame.filled[b]

    # -- mouse ---------------------------------------------------------------------------
    def _cell_at(self, pos: QPointF) -> tuple[int, int, int] | None:
        if self._values is None:
            return None
        _, t_q, t_k = self._values.shape
        for plot, h in zip(self.plots, self._heads_shown(), strict=True):
            box = plot.getViewBox()
            if box.sceneBoundingRect().contains(pos):
                point = box.mapSceneToView(pos)
                i, j = math.floor(point.y()), math.floor(point.x())
                if 0 <= i < t_q and 0 <= j < t_k:
                    return h, i, j
        return None

    def describe(self, head: int, i: int, j: int) -> str:
        """Hover text for one cell (and for the block its pixel stands for, on a thumbnail)."""
        assert self._values is not None
        tokens = self.session.tokens
        value = float(self._values[head, i, j])
        q = tokens[i] if i < len(tokens) else str(i)
        source = self.document.source if self.document is not None else None
        name = source.describe() if source is not None and head == 0 else f"head {head + 1}"
        if self._stage == "output":
            text = f"{name} · query {q} (i={i + 1}) · dimension {j + 1} · value {value:.6g}"
        else:
            k = tokens[j] if j < len(tokens) else str(j)
            text = (
                f"{name} · query {q} (i={i + 1}) · key {k} (j={j + 1}) · "
                f"{STAGE_NAMES[self._stage]} {cell_number(value)}"
            )
        return text + self._describe_block(head, i, j)

    def _describe_block(self, head: int, i: int, j: int) -> str:
        """What the pixel over cell (i, j) shows when it stands for a block of cells."""
        rows, cols = self._blocks()
        if rows == cols == 1 or self._preview is None or self._values is None:
            return ""
        _, t_q, t_k = self._values.shape
        r, c = i // rows, j // cols
        i0, i1 = r * rows, min((r + 1) * rows, t_q)
        j0, j1 = c * cols, min((c + 1) * cols, t_k)
        diverging = self.colormap() == "diverging"
        shown = float(self._drawn_preview().shown(diverging)[head][r, c])
        which = "value farthest from 0" if diverging else "largest value"
        second = "dimensions" if self._stage == "output" else "keys"
        return (
            f" — this pixel is a block of {i1 - i0} × {j1 - j0} cells (queries i={i0 + 1}–{i1}, "
            f"{second} j={j0 + 1}–{j1}) coloured by its {which}, {cell_number(shown)}; "
            "double-click to see every cell"
        )

    def _on_mouse_moved(self, pos: QPointF) -> None:
        cell = self._cell_at(pos)
        if cell == self._hover_cell:
            return  # same cell (or still outside): nothing to say again
        self._hover_cell = cell
        if cell is not None:
            text = self.describe(*cell)
            self.hover.setText(text)
            # the same read-out beside the pointer, where the eye is (thumbnails are small)
            point = self.view.mapFromScene(pos)
            QToolTip.showText(self.view.mapToGlobal(point), plain_tooltip(text), self.view)
        else:
            QToolTip.hideText()

    def _on_mouse_clicked(self, event: MouseClickEvent) -> None:
        cell = self._cell_at(event.scenePos())
        if cell is None:
            return
        if event.double():
            self.set_enlarged(None if self.enlarged is not None else cell[0])
        else:
            self.cellClicked.emit(*cell)
