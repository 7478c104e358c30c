"""The Compare view's charts: clickable heatmaps, two runs' next-token bars, and their export.

Every chart here is a pyqtgraph plot with labelled axes and, for a heatmap, a colour bar
of its range (diverging maps are centred on 0). :class:`ChartExport` puts an "Export…"
button under a chart: the existing export form asks PNG, SVG or CSV (and the PNG width),
a file dialog asks where, and :func:`write_chart` does the work (tested on bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QFileDialog, QPushButton, QWidget

from attn_explorer.analysis.next_token import Candidate
from attn_explorer.state.colormaps import lut
from attn_explorer.state.storage.export import csv_text, safe_name
from attn_explorer.state.storage.safe_files import write_atomic
from attn_explorer.ui.common.token_axis import TEXT_RGB, TokenAxis
from attn_explorer.ui.model.model_grid import color_map
from attn_explorer.ui.vectors.widget_image import widget_image_bytes

CLEAN_RGB, CORRUPT_RGB = "#1f5fbf", "#d9480f"
CHART_FORMATS = ("png", "svg", "csv")


class CellImage(pg.ImageItem):
    """A row-major heatmap that reports the (row, column) cell a left click hits."""

    def __init__(self, clicked: Callable[[int, int], None] | None = None) -> None:
        super().__init__(axisOrder="row-major")  # image[row, column]
        self._clicked = clicked

    def mouseClickEvent(self, ev: Any) -> None:
        left = ev.button() == Qt.MouseButton.LeftButton
        if self._clicked is not None and left and self.image is not None:
            ev.accept()
            pos = ev.pos()
            self._clicked(int(np.floor(pos.y())), int(np.floor(pos.x())))


def chart(left: str, bottom: str, invert: bool = True) -> tuple[pg.PlotWidget, pg.PlotItem]:
    """A white plot with token-capable axes named ``left`` and ``bottom``, no mouse panning."""
    widget = pg.PlotWidget(axisItems={"left": TokenAxis("left"), "bottom": TokenAxis("bottom")})
    widget.setBackground("w")
    widget.setMinimumSize(200, 170)
    item = widget.getPlotItem()
    item.setMenuEnabled(False)
    item.hideButtons()
    item.getViewBox().invertY(invert)
    item.getViewBox().setMouseEnabled(False, False)
    item.getAxis("left").setLabel(left, color=TEXT_RGB)
    item.getAxis("bottom").setLabel(bottom, color=TEXT_RGB)
    return widget, item


class Heatmap:
    """A labelled heatmap with a colour bar: ``show(values, rows, columns, title)``.

    ``diverging``: blue–white–red symmetric about 0 (a recovered logit difference, a
    difference of two heads); else sequential from ``levels``. NaN cells show as 0.
    """

    def __init__(
        self,
        left: str,
        bottom: str,
        clicked: Callable[[int, int], None] | None = None,
        diverging: bool = True,
    ) -> None:
        self.widget, self.item = chart(left, bottom)
        self.image = CellImage(clicked)
        self.item.addItem(self.image)
        self.diverging = diverging
        name = "diverging" if diverging else "sequential"
        self.bar = pg.ColorBarItem(
            values=(-1, 1), colorMap=color_map(name), interactive=False, width=14
        )
        self.bar.setImageItem(self.image, insert_in=self.item)
        self.values: np.ndarray | None = None
        self.rows: list[str] = []
        self.columns: list[str] = []

    def show(
        self,
        values: np.ndarray,
        rows: Sequence[str],
        columns: Sequence[str],
        title: str,
        levels: tuple[float, float] | None = None,
    ) -> None:
        """Draw ``values`` (rows × columns) with its tick labels and title."""
        self.values, self.rows, self.columns = values, list(rows), list(columns)
        finite = values[np.isfinite(values)]
        if levels is None:
            if self.diverging:
                bound = float(np.abs(finite).max()) if finite.size else 1.0
                levels = (-(bound or 1.0), bound or 1.0)
            else:
                levels = (0.0, float(finite.max()) if finite.size and finite.max() > 0 else 1.0)
        shown = np.nan_to_num(values.astype(np.float64), nan=0.0)
        name = "diverging" if self.diverging else "sequential"
        self.image.setImage(shown, levels=levels, lut=lut(name))
        self.bar.setLevels(levels)
        self.item.getAxis("left").set_tokens(self.rows)
        self.item.getAxis("bottom").set_tokens(self.columns)
        self.item.setTitle(title)

    def clear(self, title: str = "") -> None:
        self.values = None
        self.image.clear()
        self.item.setTitle(title)


class TwoRunBars:
    """The next-token bars of both runs (blue: clean, orange: corrupted) over the tokens
    either run ranks high; ``picked(token_id)`` follows a click on a token's row."""

    def __init__(self, picked: Callable[[int], None]) -> None:
        self.widget, self.item = chart("next token", "probability")
        self.ids: list[int] = []
        self.labels: list[str] = []  # each id's token, as its row is labelled
        self._picked = picked
        self.widget.scene().sigMouseClicked.connect(self._on_click)

    def show(self, clean: list[Candidate], corrupt: list[Candidate], probs: np.ndarray) -> None:
        """``probs``: (2, n) probabilities of the listed ids in the clean and corrupted run."""
        self.item.clear()
        labels = {c.id: c.token for c in [*clean, *corrupt]}
        self.ids = list(labels)
        self.labels = [repr(labels[t]) for t in self.ids]
        rows = np.arange(len(self.ids))
        for offset, values, brush in ((-0.2, probs[0], CLEAN_RGB), (0.2, probs[1], CORRUPT_RGB)):
            self.item.addItem(
                pg.BarGraphItem(x0=0, y=rows + offset, height=0.4, width=values, brush=brush)
            )
        self.item.getAxis("left").setTicks([list(enumerate(self.labels))])
        self.item.setXRange(0, 1)
        self.item.setYRange(-0.6, len(self.ids) - 0.4)
        self.item.setTitle("blue: clean · orange: corrupted")

    def row_at(self, scene_pos: Any) -> int | None:
        """The token row under a scene position, or None outside the bars."""
        box = self.item.getViewBox()
        if not box.sceneBoundingRect().contains(scene_pos):
            return None
        row = round(box.mapSceneToView(scene_pos).y())
        return row if 0 <= row < len(self.ids) else None

    def _on_click(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        row = self.row_at(event.scenePos())
        if row is not None:
            self._picked(self.ids[row])


def write_chart(
    path: str | Path,
    widget: QWidget,
    table: tuple[Sequence[str], Sequence[str], np.ndarray],
    width: int | None = None,
) -> Path:
    """Write a chart as PNG (``width`` pixels wide), SVG (as drawn) or CSV (``table``: row
    labels, column labels, values), by the file's suffix, atomically."""
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt == "csv":
        rows, columns, values = table
        return write_atomic(target, csv_text(rows, columns, values).encode("utf-8"))
    if fmt not in ("png", "svg"):
        raise ValueError(f"{target.name}: choose a .png, .svg or .csv file name")
    scale = 2.0 if width is None else width / max(1, widget.width())
    painted = cast(QWidget, _Painted(widget))
    return write_atomic(target, widget_image_bytes(painted, fmt, scale, "Attention Explorer"))


class _Painted:
    """A plot as ``widget_image_bytes`` paints it: pyqtgraph's ``GraphicsView.render``
    takes a scene's arguments, so the widget is painted by ``QWidget.render`` itself."""

    def __init__(self, widget: QWidget) -> None:
        self._widget = widget

    def size(self) -> QSize:
        return self._widget.size()

    def render(self, painter: QPainter, offset: QPoint) -> None:
        QWidget.render(self._widget, painter, offset)


class ChartExport(QPushButton):
    """ "Export…" under a chart: the export form, a file name, then :func:`write_chart`.

    ``table()`` gives the chart's numbers for CSV, or None while it shows nothing;
    ``report(text, level)`` says what happened on the dock's status line.
    """

    def __init__(
        self,
        name: str,
        widget: QWidget,
        table: Callable[[], tuple[Sequence[str], Sequence[str], np.ndarray] | None],
        report: Callable[[str, str], None],
    ) -> None:
        super().__init__("Export…")
        self.setToolTip(f"Save the {name} as PNG, SVG or CSV")
        self.name, self.chart, self.table, self.report = name, widget, table, report
        self.clicked.connect(self.export_dialog)

    def export_dialog(self) -> Path | None:
        """Ask the format and where, then write; None when cancelled or nothing to export."""
        from attn_explorer.ui.common.export_form import image_options
        from attn_explorer.ui.common.settings import last_dir

        table = self.table()
        if table is None:
            self.report(f"Nothing to export yet: the {self.name} is empty.", "error")
            return None
        options = image_options(self, f"Export {self.name}", CHART_FORMATS, heads=False)
        if options is None:
            return None
        ext, width, _ = options
        default = Path(last_dir()) / f"{safe_name(self.name)}.{ext}"
        path, _ = QFileDialog.getSaveFileName(
            self, f"Export {self.name}", str(default), f"{ext.upper()} (*.{ext})"
        )
        if not path:
            return None
        if not Path(path).suffix:
            path += f".{ext}"
        try:
            written = write_chart(path, self.chart, table, width)
        except (OSError, ValueError) as exc:
            self.report(f"Export failed: {exc}", "error")
            return None
        self.report(f"Exported {written}", "info")
        return written
