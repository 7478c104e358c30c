"""The heatmaps as a still picture for the first paint, until the interactive ones are built.

The interactive heatmaps (:mod:`.heatmaps`) need pyqtgraph, whose import alone takes
~130 ms, so the window builds them just after its first paint. So that the first paint
is already complete, this widget stands in their place: the same values, colours,
ranges, head titles, axis names and colour bars, painted with QPainter by
:func:`~attn_explorer.render.figure.paint_figure` (the exports' painter). It follows the
results until the window swaps it out. A result too big to paint quickly here shows a
one-line note instead.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from attn_explorer.render.figure import layout_figure, paint_figure
from attn_explorer.state import Session
from attn_explorer.state.colormaps import head_ranges, heads_extremes
from attn_explorer.state.results.results import Results
from attn_explorer.state.storage.export import column_labels
from attn_explorer.state.views.figure import Figure, Panel

#: Most cells (all heads together) painted here; bigger results show a note for a moment.
MAX_CELLS = 4096
#: More heads than this are thumbnails without token labels, as in the interactive grid.
COMPACT_HEADS = 4
#: How much larger than an export of the same width the figure is drawn (readable labels).
ZOOM = 1.3


def preview_figure(session: Session, results: Results) -> Figure | None:
    """The figure of the shown stage of every head, ranged as the interactive grid ranges
    it; None when there is no result yet, it is too big, or it lags the session's tokens."""
    result = results.result
    options = session.options
    stage = options.stage
    values = result.stage(stage) if result is not None else None
    if values is None or values.size == 0:
        return None
    data = values[min(options.batch_index, values.shape[0] - 1)]  # (H, T_q, T_k)
    heads, t_q, t_k = data.shape
    rows, columns = session.tokens, column_labels(session, stage)
    if data.size > MAX_CELLS or len(rows) != t_q or len(columns) != t_k:
        return None
    cmap = options.colormap_for(stage)
    ranges = head_ranges(heads_extremes(data), stage, cmap, options.shared_scale)
    panels = [
        Panel(f"head {head + 1}", np.asarray(data[head], np.float64), *ranges[head])
        for head in range(heads)
    ]
    return Figure(
        title="",
        stage=stage,
        colormap=cmap,
        row_labels=list(rows),
        col_labels=list(columns),
        x_label="value dimension" if stage == "output" else "key j",
        panels=panels,
        shared_scale=options.shared_scale or heads == 1,
        columns=max(1, math.ceil(math.sqrt(heads))),
        token_labels=heads <= COMPACT_HEADS,
    )


class HeatmapPreview(QWidget):
    """Paints :func:`preview_figure` above the grid's hover hint, where the grid will be;
    call :meth:`detach` before dropping it (it listens to the session and the results)."""

    def __init__(self, session: Session, results: Results, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.results = results
        self.canvas = _Canvas(self)
        # The grid's hover line, so nothing moves when the grid takes this place.
        self.hint = QLabel(_hint(session))
        self.hint.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.hint)
        results.changed.connect(self._on_changed)
        session.events.options.connect(self._on_option_changed)

    def detach(self) -> None:
        """Stop following the session and the results (the interactive grid took over)."""
        self.results.changed.disconnect(self._on_changed)
        self.session.events.options.disconnect(self._on_option_changed)

    def _on_option_changed(self, name: str) -> None:
        self._on_changed()

    def _on_changed(self) -> None:
        self.hint.setText(_hint(self.session))
        self.canvas.update()


def _hint(session: Session) -> str:
    """The hover hint :class:`~attn_explorer.ui.explorer.heatmaps.HeatmapGrid` shows at first."""
    if session.shape[1] > COMPACT_HEADS:
        return (
            "rows = query i, columns = key j — hover a cell for its value; double-click a "
            "head to enlarge it"
        )
    return "Hover a heatmap for (head, query i, key j, value)."


class _Canvas(QWidget):
    def __init__(self, preview: HeatmapPreview) -> None:
        super().__init__(preview)
        self.preview = preview

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        try:
            painter.fillRect(self.rect(), QColor(255, 255, 255))  # the grid's background
            if not self._paint_figure(painter):
                painter.setPen(QColor(90, 90, 90))
                painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Drawing heatmaps…")
        finally:
            painter.end()

    def _paint_figure(self, painter: QPainter) -> bool:
        width, height = self.width(), self.height()
        if width < 50 or height < 50:
            return False
        painter.save()
        try:
            figure = preview_figure(self.preview.session, self.preview.results)
            if figure is None:
                return False
            # The exports' layout at 1/ZOOM of the width, drawn ZOOM times larger: their
            # smallest fonts (9 px) would be hard to read here. Narrower if it is too tall.
            layout = layout_figure(figure, max(100, round(width / ZOOM)))
            if layout.height * ZOOM > height:
                fit = layout.width * height / (layout.height * ZOOM)
                layout = layout_figure(figure, max(100, math.floor(fit)))
            zoom = min(ZOOM, width / layout.width, height / layout.height)
            painter.translate((width - layout.width * zoom) / 2, 0)
            painter.scale(zoom, zoom)
            paint_figure(painter, figure, layout)
            return True
        except Exception:  # a stand-in for a moment must never break the start: the note
            painter.resetTransform()
            painter.fillRect(self.rect(), QColor(255, 255, 255))
            return False
        finally:
            painter.restore()
