"""Heatmap figures drawn with QPainter, for PNG and SVG export. No widgets.

A figure is one head, or a montage of heads in a grid, of one pipeline stage.
Every panel is titled ``head n`` (numbered from 1, as everywhere in the app),
rows are ``query i`` and columns ``key j`` (``value dimension`` for ``output``),
and a colour bar shows the range: one for the whole figure when the session uses
a shared scale, one per panel otherwise. Colours come from
:mod:`attn_explorer.state.colormaps`, the same tables the window shows; masked (−∞)
cells are grey and named in a legend. Cells are filled rectangles on whole
pixels, so small grids export as crisp squares.

What is drawn is a Qt-free :class:`~attn_explorer.state.views.figure.Figure`;
:func:`layout_figure` places it and :func:`render_png` / :func:`render_svg`
paint it. The window and the command line call :func:`export_heatmaps`, which
joins the Qt-free plan of :mod:`attn_explorer.state.storage.export` (which files, which
heads, CSV and NPZ) with this painting. Every failure is an :class:`ExportError`
whose message says what to do; the session is never changed.

One job at ~500 lines: laying out and painting a figure, for one head, a montage of
heads or a model's layers × heads; what a figure shows is Qt-free in
:mod:`attn_explorer.state.views.figure`, and which files an export writes in
:mod:`attn_explorer.state.storage.export`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QImage,
    QImageWriter,
    QPaintDevice,
    QPainter,
)
from PySide6.QtWidgets import QApplication

from attn_explorer.render.qt_app import qt_application, use_offscreen_if_headless
from attn_explorer.state.colormaps import lut, to_rgb
from attn_explorer.state.storage.export import (
    DEFAULT_WIDTH,
    Exported,
    ExportJob,
    guarded_write,
    plan_export,
    write_export,
)
from attn_explorer.state.views.figure import Figure, Panel, build_figure

PNG_DPI = 300
SVG_DPI = 96
MASKED_GREY = (200, 200, 200)  # what colormaps.to_rgb gives −inf (masked) cells


def ensure_gui_app() -> QApplication:
    """The running QApplication, or a new one (offscreen when there is no display).

    A QApplication rather than a bare QGuiApplication, so that windows can still
    open later in the same process (the window exports through here too).
    """
    use_offscreen_if_headless()
    return qt_application()


def _tick(value: float) -> str:
    return f"{value:.4g}".replace("-", "−")


@dataclass(frozen=True)
class Layout:
    """Pixel geometry of a figure at one width: where each panel's grid is and its cell size."""

    width: int
    height: int
    em: float
    cell: float
    grids: list[QRectF]
    bars: list[QRectF]
    rotate_columns: bool
    row_label_width: float
    col_label_height: float
    label_stride: tuple[int, int]


def _font(pixels: float, bold: bool = False) -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont)
    font.setPixelSize(max(6, round(pixels)))
    font.setBold(bold)
    return font


def layout_figure(figure: Figure, width: int) -> Layout:
    """Compute the geometry of ``figure`` drawn ``width`` pixels wide."""
    ensure_gui_app()
    em = min(64.0, max(9.0, width / 64))
    label_metrics = QFontMetricsF(_font(em * 0.85))
    labels = figure.token_labels
    max_label = em * 8
    # +2 px so text measured at fractional width is never elided when drawn
    row_w = min(max_label, max(map(label_metrics.horizontalAdvance, figure.row_labels))) + 2
    col_w = min(max_label, max(map(label_metrics.horizontalAdvance, figure.col_labels))) + 2
    if not labels:
        row_w = col_w = 0.0
    ticks = [_tick(v) for p in figure.panels for v in (p.low, p.high, 0.0)]
    tick_w = max(label_metrics.horizontalAdvance(s) for s in ticks) + 2
    bar_w = em * 0.9 + em * 0.9 + em * 0.4 + tick_w + em * 2.0  # gap, bar, ticks, stage name
    pad = em
    gap = em if labels else em * 0.4  # between panels
    header_metrics = QFontMetricsF(_font(em, bold=True))
    header_w = (
        max(map(header_metrics.horizontalAdvance, figure.row_titles)) + em * 0.6
        if figure.row_titles
        else 0.0
    )
    columns = figure.columns
    rows_of_panels = math.ceil(len(figure.panels) / columns)
    shared_bar = bar_w if figure.shared_scale else 0.0
    panel_w = (width - 2 * pad - header_w - shared_bar - (columns - 1) * gap) / columns
    left = em * 1.5 + row_w + em * 0.4 if labels else 0.0  # "query i", row labels, gap
    right = 0.0 if figure.shared_scale else bar_w
    n_rows, n_cols = figure.panels[0].values.shape
    available = max(1.0, panel_w - left - right)
    cell = min(available / n_cols, available * 1.5 / n_rows)
    if cell >= 2:
        cell = math.floor(cell)  # whole pixels: crisp squares
    rotate = labels and col_w > cell * 0.95
    spacing = em * 0.85 * 1.25
    stride_cols = max(1, math.ceil(spacing / cell)) if rotate else 1
    stride_rows = max(1, math.ceil(spacing / cell))
    col_h = (col_w if rotate else em * 0.85) + em * 0.5 if labels else 0.0
    grid_w, grid_h = cell * n_cols, cell * n_rows
    body_h = max(grid_h, em * 6) if labels else grid_h
    title_h = em * 1.6 if any(p.title for p in figure.panels) else 0.0
    panel_h = title_h + body_h + col_h + (em * 1.5 if labels else 0.0)
    top = pad + em * 2.0 + (em * 1.6 if figure.subtitle else 0.0)
    top += em * 1.6 if figure.column_titles else 0.0
    grids, bars = [], []
    for index in range(len(figure.panels)):
        r, c = divmod(index, columns)
        x0 = pad + header_w + c * (panel_w + gap)
        y0 = top + r * (panel_h + gap)
        grid = QRectF(round(x0 + left), round(y0 + title_h), grid_w, grid_h)
        grids.append(grid)
        if not figure.shared_scale:
            bars.append(QRectF(grid.right() + em * 0.9, grid.top(), em * 0.9, body_h))
    bottom = top + rows_of_panels * panel_h + (rows_of_panels - 1) * gap
    if figure.shared_scale:
        x = width - pad - bar_w + em * 0.9 if len(figure.panels) > 1 else grids[0].right() + em
        span = max(body_h, grids[-1].bottom() - grids[0].top())  # every row of panels
        bars.append(QRectF(x, grids[0].top(), em * 0.9, span))
    footer = em * 1.6 if figure.masked else 0.0
    height = math.ceil(bottom + footer + pad)
    return Layout(
        width, height, em, cell, grids, bars, rotate, row_w, col_h, (stride_rows, stride_cols)
    )


def _draw_cells(
    painter: QPainter, grid: QRectF, rgb: np.ndarray, cell: float, vector: bool
) -> None:
    rows, cols, _ = rgb.shape
    if rows * cols <= 65536:
        # In SVG, rectangles that only touch show hairline seams in most viewers, so each
        # cell overlaps its right and lower neighbour by half a pixel (drawn before them).
        grow = 0.5 if vector else 0.0
        for i in range(rows):
            for j in range(cols):
                r, g, b = (int(v) for v in rgb[i, j])
                w = cell + (grow if j < cols - 1 else 0.0)
                h = cell + (grow if i < rows - 1 else 0.0)
                painter.fillRect(
                    QRectF(grid.left() + j * cell, grid.top() + i * cell, w, h), QColor(r, g, b)
                )
        return
    data = np.ascontiguousarray(rgb)
    image = QImage(data.data, cols, rows, cols * 3, QImage.Format.Format_RGB888)
    smooth = cell < 1  # averaging is the honest way to shrink; never blur when enlarging
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smooth)
    painter.drawImage(grid, image)


def _text(painter: QPainter, rect: QRectF, flags: Qt.AlignmentFlag, text: str) -> None:
    elided = painter.fontMetrics().elidedText(
        text, Qt.TextElideMode.ElideRight, math.ceil(rect.width())
    )
    painter.drawText(rect, int(flags), elided)


def _rotated_text(
    painter: QPainter,
    center: QPointF,
    length: float,
    size: float,
    text: str,
    flags: Qt.AlignmentFlag = Qt.AlignmentFlag.AlignCenter,
) -> None:
    """Text turned 90° anticlockwise, centred on ``center`` (reads bottom to top)."""
    painter.save()
    painter.translate(center)
    painter.rotate(-90)
    _text(painter, QRectF(-length / 2, -size / 2, length, size), flags, text)
    painter.restore()


def _draw_bar(painter: QPainter, figure: Figure, bar: QRectF, panel: Panel, em: float) -> None:
    table = lut(figure.colormap)
    steps = len(table)
    for k in range(steps):  # top = high end of the map
        r, g, b = (int(v) for v in table[steps - 1 - k])
        y0 = bar.top() + bar.height() * k / steps
        y1 = bar.top() + bar.height() * (k + 1) / steps
        painter.fillRect(QRectF(bar.left(), y0, bar.width(), y1 - y0 + 0.5), QColor(r, g, b))
    painter.setPen(QColor(0, 0, 0))
    painter.drawRect(bar)
    painter.setFont(_font(em * 0.85))
    middle = 0.0 if figure.colormap == "diverging" else (panel.low + panel.high) / 2
    span = (panel.high - panel.low) or 1.0
    for value in (panel.high, middle, panel.low):
        y = bar.bottom() - (value - panel.low) / span * bar.height()
        painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + em * 0.3, y))
        _text(
            painter,
            QRectF(bar.right() + em * 0.4, y - em * 0.6, em * 8, em * 1.2),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            _tick(value),
        )
    tick_w = max(
        painter.fontMetrics().horizontalAdvance(_tick(v)) for v in (panel.low, panel.high, middle)
    )
    painter.setFont(_font(em))
    _rotated_text(
        painter,
        QPointF(bar.right() + em * 0.4 + tick_w + em * 0.9, bar.center().y()),
        bar.height(),
        em * 1.4,
        figure.stage,
    )


def paint_figure(painter: QPainter, figure: Figure, layout: Layout, vector: bool = False) -> None:
    """Draw ``figure`` with ``painter`` on a white page of ``layout``'s size (``vector``: SVG)."""
    em = layout.em
    painter.fillRect(QRectF(0, 0, layout.width, layout.height), QColor(255, 255, 255))
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
    painter.setPen(QColor(0, 0, 0))
    painter.setFont(_font(em * 1.15, bold=True))
    _text(
        painter,
        QRectF(em, em * 0.5, layout.width - 2 * em, em * 1.5),
        Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
        figure.title,
    )
    if figure.subtitle:
        painter.setFont(_font(em * 0.85))
        _text(
            painter,
            QRectF(em, em * 2.0, layout.width - 2 * em, em * 1.4),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            figure.subtitle,
        )
    _paint_panel_titles(painter, figure, layout)
    for index, panel in enumerate(figure.panels):
        grid = layout.grids[index]
        _paint_cells(painter, figure, panel, grid, layout, vector)
        if figure.token_labels:
            _paint_token_labels(painter, figure, grid, layout)
            _paint_axis_names(painter, figure, grid, layout)
        if not figure.shared_scale:
            _draw_bar(painter, figure, layout.bars[index], panel, em)
    if figure.shared_scale:
        _draw_bar(painter, figure, layout.bars[0], figure.panels[0], em)
    if figure.masked:
        _paint_mask_legend(painter, layout)


def _paint_panel_titles(painter: QPainter, figure: Figure, layout: Layout) -> None:
    """A montage's row titles (left of each row of panels) and column titles (above)."""
    em = layout.em
    painter.setPen(QColor(0, 0, 0))
    painter.setFont(_font(em, bold=True))
    for r, title in enumerate(figure.row_titles):
        grid = layout.grids[r * figure.columns]
        _text(
            painter,
            QRectF(em, grid.top(), grid.left() - em * 1.3, grid.height()),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            title,
        )
    for c, title in enumerate(figure.column_titles):
        grid = layout.grids[c]
        _text(
            painter,
            QRectF(grid.left(), grid.top() - em * 1.5, grid.width(), em * 1.4),
            Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignVCenter,
            title,
        )


def _paint_cells(
    painter: QPainter, figure: Figure, panel: Panel, grid: QRectF, layout: Layout, vector: bool
) -> None:
    """The coloured cells of one panel, its frame and its title."""
    em = layout.em
    rgb = to_rgb(panel.values, figure.colormap, panel.low, panel.high)  # (rows, cols, 3)
    _draw_cells(painter, grid, rgb, layout.cell, vector)
    painter.setPen(QColor(0, 0, 0))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawRect(grid)
    if panel.title:
        painter.setFont(_font(em, bold=True))
        _text(
            painter,
            QRectF(grid.left(), grid.top() - em * 1.6, max(grid.width(), em * 6), em * 1.4),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            panel.title,
        )


def _paint_token_labels(painter: QPainter, figure: Figure, grid: QRectF, layout: Layout) -> None:
    """Row labels (queries) on the left, column labels under the grid (turned when long)."""
    em, cell = layout.em, layout.cell
    stride_rows, stride_cols = layout.label_stride
    label_h = em * 0.85 * 1.25
    painter.setFont(_font(em * 0.85))
    for i in range(0, len(figure.row_labels), stride_rows):
        y = grid.top() + (i + 0.5) * cell
        rect = QRectF(
            grid.left() - em * 0.3 - layout.row_label_width,
            y - label_h / 2,
            layout.row_label_width,
            label_h,
        )
        _text(
            painter,
            rect,
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            figure.row_labels[i],
        )
    for j in range(0, len(figure.col_labels), stride_cols):
        x = grid.left() + (j + 0.5) * cell
        if layout.rotate_columns:
            length = layout.col_label_height - em * 0.5
            painter.save()
            painter.translate(QPointF(x, grid.bottom() + em * 0.3))
            painter.rotate(-90)
            _text(
                painter,
                QRectF(-length, -label_h / 2, length, label_h),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                figure.col_labels[j],
            )
            painter.restore()
        else:
            rect = QRectF(x - cell / 2, grid.bottom() + em * 0.2, cell, label_h)
            _text(painter, rect, Qt.AlignmentFlag.AlignCenter, figure.col_labels[j])


def _paint_axis_names(painter: QPainter, figure: Figure, grid: QRectF, layout: Layout) -> None:
    """ "key j →" under the grid and "← query i" beside it, so the axes are never ambiguous."""
    em = layout.em
    painter.setFont(_font(em))
    axis_y = grid.bottom() + layout.col_label_height
    _text(
        painter,
        QRectF(grid.left(), axis_y, max(grid.width(), em * 8), em * 1.4),
        Qt.AlignmentFlag.AlignLeft if grid.width() < em * 8 else Qt.AlignmentFlag.AlignHCenter,
        f"{figure.x_label} →",
    )
    _rotated_text(
        painter,
        QPointF(grid.left() - layout.row_label_width - em * 1.1, grid.top() + grid.height() / 2),
        max(grid.height(), em * 6),
        em * 1.4,
        "← query i",
    )


def _paint_mask_legend(painter: QPainter, layout: Layout) -> None:
    """What a grey cell means, at the foot of the page."""
    em = layout.em
    y = layout.height - em * 2.4
    painter.fillRect(QRectF(em, y + em * 0.25, em, em), QColor(*MASKED_GREY))
    painter.setPen(QColor(0, 0, 0))
    painter.drawRect(QRectF(em, y + em * 0.25, em, em))
    painter.setFont(_font(em * 0.85))
    _text(
        painter,
        QRectF(em * 2.4, y, layout.width - em * 3.4, em * 1.5),
        Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
        "masked (−∞): key hidden from this query; weight 0",
    )


def _paint_on(device: QPaintDevice, figure: Figure, layout: Layout, vector: bool = False) -> None:
    painter = QPainter(device)
    try:
        paint_figure(painter, figure, layout, vector)
    finally:
        painter.end()  # release the device before anything else touches it


def render_image(figure: Figure, width: int = 1600) -> QImage:
    """The figure as a QImage ``width`` pixels wide, tagged 300 dpi."""
    layout = layout_figure(figure, width)
    image = QImage(layout.width, layout.height, QImage.Format.Format_RGB32)
    if image.isNull():
        raise MemoryError(f"a {layout.width}×{layout.height} image is too large")
    dots_per_meter = round(PNG_DPI / 0.0254)
    image.setDotsPerMeterX(dots_per_meter)
    image.setDotsPerMeterY(dots_per_meter)
    image.setText("Title", figure.title)
    image.setText("Software", "Attention Explorer")
    _paint_on(image, figure, layout)
    return image


def render_png(figure: Figure, width: int = 1600) -> bytes:
    """PNG bytes of the figure ``width`` pixels wide (300 dpi metadata)."""
    return png_bytes(render_image(figure, width))


def png_bytes(image: QImage) -> bytes:
    """``image`` encoded as PNG in memory (a file is then written atomically)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # QImageWriter rather than QImage.save: the same encoder, and a format argument whose
    # type PySide6's stubs and its binding agree on.
    if not QImageWriter(buffer, QByteArray(b"PNG")).write(image):
        raise RuntimeError("Qt could not encode the PNG")
    buffer.close()
    return bytes(data.data())


def render_svg(figure: Figure, width: int = 1600) -> bytes:
    """SVG bytes of the figure (vector axes, labels and colour bar) via QSvgGenerator."""
    from PySide6.QtSvg import QSvgGenerator  # not at start-up (the heatmap preview)

    layout = layout_figure(figure, width)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(QSize(layout.width, layout.height))
    generator.setViewBox(QRectF(0, 0, layout.width, layout.height))
    generator.setResolution(SVG_DPI)  # other values misplace text against the axes
    generator.setTitle(figure.title)
    generator.setDescription("Attention Explorer heatmap export")
    _paint_on(generator, figure, layout, vector=True)
    buffer.close()
    return bytes(data.data())


# -- export ------------------------------------------------------------------------------------
def image_bytes(figure: Figure, fmt: str, width: int) -> bytes:
    """PNG or SVG bytes of ``figure`` (what :func:`export_heatmaps` gives ``write_export``)."""
    return render_png(figure, width) if fmt == "png" else render_svg(figure, width)


def export_heatmaps(
    exported: Exported,
    target: str | os.PathLike[str],
    *,
    stage: str | None = None,
    heads: str | Sequence[int] = "current",
    fmt: str | None = None,
    width: int = DEFAULT_WIDTH,
) -> list[Path]:
    """Write heatmaps (PNG, SVG), CSV or NPZ of ``exported`` (an app state: the session, its
    results, the document's name); see :func:`state.export.plan_export`.

    Returns the paths written. Raises :class:`ExportError` with a message saying
    what to do; a failed file leaves any previous file of that name as it was.
    """
    jobs = plan_export(exported, target, stage=stage, heads=heads, fmt=fmt, width=width)

    def draw(job: ExportJob) -> bytes:
        return image_bytes(build_figure(exported, job.stage, job.heads), job.fmt, width)

    return [guarded_write(job.path, partial(write_export, exported, job, draw)) for job in jobs]
