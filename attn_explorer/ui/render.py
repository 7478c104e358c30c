"""Heatmap figures drawn with QPainter, for PNG and SVG export. No widgets.

A figure is one head, or a montage of heads in a grid, of one pipeline stage.
Every panel is titled ``head n`` (numbered from 1, as everywhere in the app),
rows are ``query i`` and columns ``key j`` (``value dimension`` for ``output``),
and a colour bar shows the range: one for the whole figure when the session uses
a shared scale, one per panel otherwise. Colours come from
:mod:`attn_explorer.colormaps`, the same tables the window shows; masked (−∞)
cells are grey and named in a legend. Cells are filled rectangles on whole
pixels, so small grids export as crisp squares.

The window and the command line call :func:`export_heatmaps`; it picks the
files, :func:`build_figure` collects what to draw, :func:`render_png` /
:func:`render_svg` paint it, and CSV / NPZ come from the Qt-free
:mod:`attn_explorer.state.io`. Every failure is an :class:`ExportError` whose
message says what to do; the session is never changed.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QGuiApplication,
    QImage,
    QPaintDevice,
    QPainter,
)
from PySide6.QtSvg import QSvgGenerator

from attn_explorer.colormaps import lut, stage_range, to_rgb
from attn_explorer.compute import STAGES
from attn_explorer.state.io import (
    ExportError,
    column_labels,
    guarded_write,
    os_error_reason,
    stage_array,
    write_atomic,
    write_csv,
    write_npz,
)
from attn_explorer.state.session import Session
from attn_explorer.state.types import Options

PNG_DPI = 300
SVG_DPI = 96
MASKED_GREY = (200, 200, 200)  # what colormaps.to_rgb gives −inf / NaN cells
STAGE_TITLES = {
    "scores": "scores S = Q Kᵀ",
    "scaled": "scaled scores S · scale",
    "masked": "masked scores",
    "weights": "weights softmax(S)",
    "output": "output = weights · V",
}
_app: QGuiApplication | None = None


def ensure_gui_app() -> QGuiApplication:
    """The running QGuiApplication, or a new one (offscreen when there is no display)."""
    global _app
    app = QGuiApplication.instance()
    if app is None:
        headless = sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        )
        if headless and not os.environ.get("QT_QPA_PLATFORM"):
            os.environ["QT_QPA_PLATFORM"] = "offscreen"
        _app = QGuiApplication(["attn-explorer"])
        return _app
    if not isinstance(app, QGuiApplication):
        raise RuntimeError("rendering needs a QGuiApplication, but a QCoreApplication is running")
    return app


def stage_colormap(options: Options, stage: str) -> str:
    """The colour map a stage is shown with: the weight map for weights, else the score map."""
    return options.weight_colormap if stage == "weights" else options.score_colormap


@dataclass(frozen=True)
class Panel:
    """One heatmap: its title, its (rows, columns) values and its colour range."""

    title: str
    values: np.ndarray
    low: float
    high: float


@dataclass(frozen=True)
class Figure:
    """Everything a heatmap figure shows; built by :func:`build_figure`, painted by render_*."""

    title: str
    stage: str
    colormap: str
    row_labels: list[str]
    col_labels: list[str]
    x_label: str
    panels: list[Panel]
    shared_scale: bool
    columns: int

    @property
    def masked(self) -> bool:
        return any(not np.isfinite(p.values).all() for p in self.panels)


def build_figure(session: Session, stage: str, heads: Sequence[int]) -> Figure:
    """The figure of ``heads`` of the selected batch at ``stage``, ranged as on screen."""
    options = session.options
    batch = options.batch_index
    data = stage_array(session, stage)[batch]  # (H, T, T) or output (H, T, d_v)
    cmap = stage_colormap(options, stage)
    shared = stage_range(data, stage, cmap)  # over every head, like the window's shared scale
    panels = []
    for head in heads:
        values = np.asarray(data[head], dtype=np.float64)
        low, high = shared if options.shared_scale else stage_range(values, stage, cmap)
        panels.append(Panel(f"head {head + 1}", values, low, high))
    b = session.shape[0]
    title = f"{session.name} · {STAGE_TITLES[stage]}" + (f" · batch {batch + 1}" if b > 1 else "")
    return Figure(
        title=title,
        stage=stage,
        colormap=cmap,
        row_labels=session.tokens,
        col_labels=column_labels(session, stage),
        x_label="value dimension" if stage == "output" else "key j",
        panels=panels,
        shared_scale=options.shared_scale or len(panels) == 1,
        columns=max(1, math.ceil(math.sqrt(len(panels)))),
    )


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
    max_label = em * 8
    # +2 px so text measured at fractional width is never elided when drawn
    row_w = min(max_label, max(label_metrics.horizontalAdvance(s) for s in figure.row_labels)) + 2
    col_w = min(max_label, max(label_metrics.horizontalAdvance(s) for s in figure.col_labels)) + 2
    ticks = [_tick(v) for p in figure.panels for v in (p.low, p.high, 0.0)]
    tick_w = max(label_metrics.horizontalAdvance(s) for s in ticks) + 2
    bar_w = em * 0.9 + em * 0.9 + em * 0.4 + tick_w + em * 2.0  # gap, bar, ticks, stage name
    pad = em
    columns = figure.columns
    rows_of_panels = math.ceil(len(figure.panels) / columns)
    shared_bar = bar_w if figure.shared_scale else 0.0
    panel_w = (width - 2 * pad - shared_bar - (columns - 1) * em) / columns
    left = em * 1.5 + row_w + em * 0.4  # "query i", row labels, gap
    right = 0.0 if figure.shared_scale else bar_w
    n_rows, n_cols = figure.panels[0].values.shape
    available = max(1.0, panel_w - left - right)
    cell = min(available / n_cols, available * 1.5 / n_rows)
    if cell >= 2:
        cell = math.floor(cell)  # whole pixels: crisp squares
    rotate = col_w > cell * 0.95
    spacing = em * 0.85 * 1.25
    stride_cols = max(1, math.ceil(spacing / cell)) if rotate else 1
    stride_rows = max(1, math.ceil(spacing / cell))
    col_h = (col_w if rotate else em * 0.85) + em * 0.5
    grid_w, grid_h = cell * n_cols, cell * n_rows
    body_h = max(grid_h, em * 6)
    panel_h = em * 1.6 + body_h + col_h + em * 1.5
    top = pad + em * 2.0
    grids, bars = [], []
    for index in range(len(figure.panels)):
        r, c = divmod(index, columns)
        x0 = pad + c * (panel_w + em)
        y0 = top + r * (panel_h + em)
        grid = QRectF(round(x0 + left), round(y0 + em * 1.6), grid_w, grid_h)
        grids.append(grid)
        if not figure.shared_scale:
            bars.append(QRectF(grid.right() + em * 0.9, grid.top(), em * 0.9, body_h))
    bottom = top + rows_of_panels * panel_h + (rows_of_panels - 1) * em
    if figure.shared_scale:
        x = width - pad - bar_w + em * 0.9 if len(figure.panels) > 1 else grids[0].right() + em
        bars.append(QRectF(x, grids[0].top(), em * 0.9, body_h))
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
    stride_rows, stride_cols = layout.label_stride
    label_h = em * 0.85 * 1.25
    for index, panel in enumerate(figure.panels):
        grid, cell = layout.grids[index], layout.cell
        rgb = to_rgb(panel.values, figure.colormap, panel.low, panel.high)  # (rows, cols, 3)
        _draw_cells(painter, grid, rgb, cell, vector)
        painter.setPen(QColor(0, 0, 0))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(grid)
        painter.setFont(_font(em, bold=True))
        _text(
            painter,
            QRectF(grid.left(), grid.top() - em * 1.6, max(grid.width(), em * 6), em * 1.4),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            panel.title,
        )
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
            QPointF(
                grid.left() - layout.row_label_width - em * 1.1, grid.top() + grid.height() / 2
            ),
            max(grid.height(), em * 6),
            em * 1.4,
            "← query i",
        )
        if not figure.shared_scale:
            _draw_bar(painter, figure, layout.bars[index], panel, em)
    if figure.shared_scale:
        _draw_bar(painter, figure, layout.bars[0], figure.panels[0], em)
    if figure.masked:
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
    image = render_image(figure, width)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError("Qt could not encode the PNG")
    buffer.close()
    return bytes(data.data())


def render_svg(figure: Figure, width: int = 1600) -> bytes:
    """SVG bytes of the figure (vector axes, labels and colour bar) via QSvgGenerator."""
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
FORMATS = ("png", "svg", "csv", "npz")
HEAD_CHOICES = ("current", "montage", "all")
MIN_WIDTH, MAX_WIDTH = 200, 16000


def _safe_name(name: str) -> str:
    """ASCII letters, digits and ._- only, at most 100 characters (file names allow 255 bytes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name[:100]).strip("-.") or "session"


def default_filename(session: Session, stage: str, head_index: int | str, fmt: str) -> str:
    """What a file holds, in its name: ``worked-scores-head2.png``, ``worked-scores-all-heads.svg``.

    ``head_index`` is a head's index (0 is ``head1``, the first head) or ``"montage"``;
    NPZ files hold every stage and head.
    """
    name = _safe_name(session.name)
    if session.shape[0] > 1:
        name += f"-batch{session.options.batch_index + 1}"
    if fmt == "npz":
        return f"{name}-all-stages.npz"
    what = f"head{head_index + 1}" if isinstance(head_index, int) else "all-heads"
    return f"{name}-{stage}-{what}.{fmt}"


def _head_list(session: Session, heads: str | Sequence[int]) -> list[int]:
    """Head indices from ``current`` / ``montage`` / ``all`` or head numbers (from 1)."""
    count = session.shape[1]
    if isinstance(heads, str):
        if heads == "current":
            return [session.options.head]
        if heads in ("all", "montage"):
            return list(range(count))
        raise ExportError(f"heads: unknown {heads!r}; use current, montage, all or head numbers")
    chosen = list(heads)
    if not chosen:
        raise ExportError("heads: no head chosen; give at least one head number")
    for head in chosen:
        if isinstance(head, bool) or not isinstance(head, int) or not 1 <= head <= count:
            have = "only head 1" if count == 1 else f"heads 1..{count}"
            raise ExportError(f"heads: there is no head {head}; this session has {have}")
    return [head - 1 for head in chosen]


def _resolve_format(target: Path, fmt: str | None) -> tuple[bool, str]:
    """(target is a folder, format)."""
    suffix = target.suffix.lower().lstrip(".")
    is_folder = target.is_dir() or not suffix
    if fmt is not None and fmt.lower() not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if is_folder:
        return True, (fmt or "png").lower()
    if suffix not in FORMATS:
        raise ExportError(
            f"{target.name}: unknown file type .{suffix}; name the file .png, .svg, .csv or .npz"
        )
    if fmt is not None and fmt.lower() != suffix:
        raise ExportError(f"{target.name}: the name ends in .{suffix} but the format is {fmt}")
    return False, suffix


def export_heatmaps(
    session: Session,
    target: str | os.PathLike[str],
    *,
    stage: str | None = None,
    heads: str | Sequence[int] = "current",
    fmt: str | None = None,
    width: int = 1600,
) -> list[Path]:
    """Write heatmaps of ``session`` and return the paths written.

    ``target`` is a file (its extension gives the format) or a folder (files get
    :func:`default_filename` names; a missing folder is created). ``stage``
    defaults to the session's. ``heads``: ``"current"`` (the selected head),
    ``"montage"`` (all heads in one figure; for CSV one file per head),
    ``"all"`` (one file per head) or a list of head numbers (from 1, one file
    each). ``fmt``: png, svg, csv or npz (NPZ always holds every head and stage).
    Raises :class:`ExportError` with a message saying what to do.
    """
    target = Path(target)
    stage = session.options.stage if stage is None else stage
    if stage not in STAGES:
        raise ExportError(f"stage: unknown {stage!r}; choose one of {', '.join(STAGES)}")
    is_folder, fmt = _resolve_format(target, fmt)
    if isinstance(width, bool) or not isinstance(width, int) or not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ExportError(f"width: {width!r} pixels is not allowed; use {MIN_WIDTH}..{MAX_WIDTH}")
    head_list = _head_list(session, heads)
    stage_array(session, stage)  # raises ExportError when the stage is not available
    # Each job is one file: a head index, or "montage" for every head in one figure.
    jobs: list[int | str]
    if fmt == "npz" or (heads == "montage" and fmt in ("png", "svg")):
        jobs = ["montage"]
    else:
        jobs = list(head_list)
    if is_folder:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExportError(f"could not create {target}: {os_error_reason(exc)}") from None
        paths = [target / default_filename(session, stage, job, fmt) for job in jobs]
    elif len(jobs) == 1:
        paths = [target]
    else:
        paths = [
            target.with_name(f"{target.stem}-head{int(job) + 1}{target.suffix}") for job in jobs
        ]
    written = []
    for path, job in zip(paths, jobs, strict=True):
        written.append(
            guarded_write(
                path, lambda p=path, j=job: _write_one(session, p, stage, j, fmt, width, head_list)
            )
        )
    return written


def _write_one(
    session: Session,
    path: Path,
    stage: str,
    job: int | str,
    fmt: str,
    width: int,
    head_list: list[int],
) -> Path:
    if fmt == "npz":
        return write_npz(path, session)
    if fmt == "csv":
        assert isinstance(job, int)
        return write_csv(path, session, stage, job)
    figure = build_figure(session, stage, head_list if job == "montage" else [int(job)])
    try:
        data = render_png(figure, width) if fmt == "png" else render_svg(figure, width)
    except MemoryError:
        raise ExportError(
            f"{path.name}: the image would be too large; choose a smaller width or fewer heads"
        ) from None
    return write_atomic(path, data)
