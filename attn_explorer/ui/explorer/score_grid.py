"""The numeric score grid (T ≤ 16): S or the selected stage, coloured, with hover working.

Rows are queries i, columns are keys j — written on the view so the axes are
never ambiguous. Hovering a cell shows q_i, k_j, the product per dimension and
the sum. During stepping, cells not reached yet are drawn empty (not zero).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPen, QResizeEvent
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.state import Session
from attn_explorer.state.colormaps import stage_range, to_rgb
from attn_explorer.state.formatting import display_number, format_number
from attn_explorer.state.labels import STAGE_NAMES, STAGE_NOTES
from attn_explorer.state.results.results import Results
from attn_explorer.state.storage.export import Named
from attn_explorer.state.types import HeadSource
from attn_explorer.state.views.frame import Frame
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.ui.common.text import plain_tooltip
from attn_explorer.ui.explorer.matrix_table import FittingDelegate, TokenHeader, shown_cell_text

MAX_GRID_TOKENS = 16
#: Options that change what the grid shows (without a recompute).
VIEW_OPTIONS = frozenset(
    ("stage", "head", "batch_index", "score_colormap", "weight_colormap", "all")
)
_Index = QModelIndex | QPersistentModelIndex


class ScoreGridModel(QAbstractTableModel):
    """The selected stage of the selected (batch, head) as a read-only table."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.values = np.zeros((0, 0))
        self.colours = np.zeros((0, 0, 3), dtype=np.uint8)
        self.filled: np.ndarray | None = None  # bool (T_q, T_k) while stepping
        self.current: tuple[int, int] | None = None
        self.stage = "scores"
        self.source: HeadSource | None = None  # the model head the numbers came from

    def set_values(self, values: np.ndarray, stage: str) -> None:
        """Show a 2-D array of one head (rows = queries)."""
        reset = values.shape != self.values.shape or stage != self.stage
        if reset:
            self.beginResetModel()
        self.values = np.asarray(values, dtype=np.float64)
        self.stage = stage
        name = self.session.options.colormap_for(stage)
        low, high = stage_range(self.values, stage, name)
        self.colours = to_rgb(self.values, name, low, high)
        if reset:
            self.endResetModel()
        elif self.values.size:
            self.dataChanged.emit(
                self.index(0, 0), self.index(self.rowCount() - 1, self.columnCount() - 1)
            )

    def set_progress(self, filled: np.ndarray | None, current: tuple[int, int] | None) -> None:
        self.filled, self.current = filled, current
        if self.values.size:
            self.dataChanged.emit(
                self.index(0, 0), self.index(self.rowCount() - 1, self.columnCount() - 1)
            )

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.values.shape[0]

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() or self.values.ndim < 2 else self.values.shape[1]

    def _being_filled(self, r: int, c: int) -> bool:
        """The stepper is inside this cell's sum: it has no value yet."""
        return self.filled is not None and self.current == (r, c) and not self.filled[r, c]

    def _hidden(self, r: int, c: int) -> bool:
        return self.filled is not None and not bool(self.filled[r, c]) and self.current != (r, c)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        value = float(self.values[r, c])
        if role == Qt.ItemDataRole.DisplayRole:
            if self._hidden(r, c):
                return ""
            if self._being_filled(r, c):
                return "…"
            return "−∞" if value == -np.inf else self.short_text(value)
        if role == Qt.ItemDataRole.BackgroundRole:
            if self._hidden(r, c) or self._being_filled(r, c):
                return QBrush(QColor(250, 250, 250))
            red, green, blue = (int(x) for x in self.colours[r, c])
            return QBrush(QColor(red, green, blue))
        if role == Qt.ItemDataRole.ForegroundRole:
            red, green, blue = (int(x) for x in self.colours[r, c])
            light = 0.299 * red + 0.587 * green + 0.114 * blue > 140
            hidden = self._hidden(r, c)
            return QBrush(QColor(0, 0, 0) if light or hidden else QColor(255, 255, 255))
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignCenter)
        if role == Qt.ItemDataRole.FontRole:
            font = QFont()
            if self.values.shape[0] > 6:
                font.setPointSizeF(font.pointSizeF() * 0.85)
            font.setBold(self.current == (r, c))
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(self.working(r, c))
        return None

    def short_text(self, value: float) -> str:
        """At most this many digits (the delegate drops more as the column narrows; the
        tooltip has them all)."""
        if self.stage == "weights":
            return f"{value:.2f}"
        text = f"{value:.4g}" if self.values.shape[0] <= 4 else f"{value:.3g}"
        return "0" if text == "-0" else text

    def working(self, r: int, c: int) -> str:
        """The hover text: q_i, k_j, the products per dimension and their sum."""
        tokens = self.session.tokens
        if self.stage == "output":
            return f"output[{tokens[r]}, d{c + 1}] = {format_number(float(self.values[r, c]))}"
        q = self.session.head_matrix("query")[r]
        k = self.session.head_matrix("key")[c]
        products = q * k
        lines = [f"{self.source.describe()}"] if self.source is not None else []
        lines += [
            f"query {tokens[r]} (row i={r + 1}) · key {tokens[c]} (column j={c + 1})",
            "q = (" + ", ".join(display_number(x) for x in q) + ")",
            "k = (" + ", ".join(display_number(x) for x in k) + ")",
            " + ".join(
                f"{display_number(a)}·{display_number(b)}" for a, b in zip(q, k, strict=True)
            )
            + f" = {display_number(float(products.sum()))}",
        ]
        lines.append(f"{STAGE_NAMES[self.stage]}: {format_number(float(self.values[r, c]))}")
        return "\n".join(lines)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        tokens = self.session.tokens
        if role == Qt.ItemDataRole.ToolTipRole and section < len(tokens):
            if orientation == Qt.Orientation.Vertical:
                return plain_tooltip(f"query i={section + 1}: {tokens[section]}")
            if self.stage != "output":
                return plain_tooltip(f"key j={section + 1}: {tokens[section]}")
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Vertical:
            return f"q{section + 1}: {tokens[section]}" if section < len(tokens) else None
        if self.stage == "output":
            return f"d{section + 1}"
        return f"k{section + 1}\n{tokens[section]}" if section < len(tokens) else None


#: Widest the query labels grow before their tokens are elided (in the middle).
MAX_ROW_LABEL_PX = 120


class _OutlineDelegate(FittingDelegate):
    """Draws a frame around the cell the stepper is filling."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        super().paint(painter, option, index)
        model = index.model()
        if isinstance(model, ScoreGridModel) and model.current == (index.row(), index.column()):
            painter.save()
            painter.setPen(QPen(QColor(255, 140, 0), 3))
            painter.drawRect(option.rect.adjusted(1, 1, -2, -2))
            painter.restore()


class ScoreGrid(QWidget):
    """Title, axis note and the coloured numeric grid; a note instead when T > 16.

    Follows the application state: ``results.changed`` and the view options
    redraw the values, the stepper's frame is an overlay on them (cells not yet
    visited are dimmed and their value hidden while a step-through is in progress).
    """

    cellClicked = Signal(int, int)

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
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.title.setWordWrap(True)  # a model's name is long: wrap, never widen the dock
        self.source_label = QLabel()  # where a taken grouped-query head's K and V came from
        self.source_label.setWordWrap(True)
        self.source_label.setTextFormat(Qt.TextFormat.PlainText)
        self.source_label.hide()
        self.axes = QLabel("rows = query i, columns = key j")
        self.axes.setToolTip("Each cell (i, j) is the dot product of query row i and key row j.")
        self.model = ScoreGridModel(session, self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setItemDelegate(_OutlineDelegate(self.table))
        self.table.setHorizontalHeader(TokenHeader(Qt.Orientation.Horizontal, self.table))
        self.table.setVerticalHeader(TokenHeader(Qt.Orientation.Vertical, self.table))
        self.table.verticalHeader().setMaximumWidth(MAX_ROW_LABEL_PX)
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        # Read-only: a selection colour would hide the cell's own colour (the stepper outlines).
        self.table.setSelectionMode(QTableView.SelectionMode.NoSelection)
        # Cells stretch to fill the view but never shrink below readable numbers:
        # a 16×16 grid scrolls rather than eliding "0.…".
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setMinimumSectionSize(46)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setMinimumSectionSize(24)
        self.table.setMouseTracking(True)
        self.table.clicked.connect(lambda idx: self.cellClicked.emit(idx.row(), idx.column()))
        self.table.setToolTip("Hover a cell for its working; click it to step the loop to it.")
        self.note = QLabel()
        self.note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addWidget(self.source_label)
        layout.addWidget(self.axes)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        layout.addStretch(0)  # takes the room only while the grid is hidden (T > 16)
        self.note.hide()
        results.changed.connect(self.refresh)
        session.events.options.connect(self._on_option_changed)
        session.events.tokens.connect(self.refresh)
        session.events.shape.connect(self.refresh)
        session.events.document.connect(self.refresh)
        stepper.changed.connect(self.set_frame)
        self.refresh()

    def minimumSizeHint(self) -> QSize:
        """At least the height the wrapped title, axes line and note take at this width.

        The splitter above the code panel reads only this, never heightForWidth: with the
        least height of one line per label it squeezed the pane (under the recovery notice
        at 1000 × 650) and the axes line ran over the note. Now the code panel, which
        scrolls, gives up the room instead.
        """
        least = super().minimumSizeHint()
        layout = self.layout()
        if layout is not None and layout.hasHeightForWidth() and self.width() > 0:
            least.setHeight(max(least.height(), layout.totalMinimumHeightForWidth(self.width())))
        return least

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # a new width wraps the labels anew: a new least height

    def _on_option_changed(self, name: str) -> None:
        if name in VIEW_OPTIONS:
            self.refresh()

    def refresh(self) -> None:
        """Show the selected stage of the selected (batch, head) of the current result."""
        options = self.session.options
        stage, b, h = options.stage, options.batch_index, options.head
        source = self.document.source if self.document is not None else None
        self.model.source = source
        head_label = f"head {h + 1}" if source is None else f"{source.model} {source.head_name()}"
        head_label += f", batch {b + 1}" if self.session.shape[0] > 1 else ""
        self.title.setText(f"{STAGE_NAMES[stage]} — {head_label}")
        self.source_label.setText(source.kv_text() if source is not None else "")
        self.source_label.setVisible(bool(self.source_label.text()))
        columns = "dimension of V" if stage == "output" else "key j"
        self.axes.setText(f"rows = query i, columns = {columns} · {STAGE_NOTES[stage]}")
        result = self.results.result
        values = result.stage(stage) if result is not None else None
        n_batch, n_heads, tokens, _ = self.session.shape
        note = ""
        if tokens > MAX_GRID_TOKENS:
            note = (
                f"The numeric grid is shown for up to {MAX_GRID_TOKENS} tokens; "
                "see the heatmaps for larger sizes."
            )
        elif result is None:
            note = self.results.error or "Computing…"
        elif result.scores.shape[:3] != (n_batch, n_heads, tokens):
            note = "Computing the new shape…"  # its result is on its way from the worker
        elif values is None:
            note = "No output: add V values to see weights @ V."
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.table.setVisible(not note)
        if note:
            return
        assert values is not None
        self.model.set_values(values[b, h], stage)
        self.set_frame(self.stepper.frame())

    def set_frame(self, frame: Frame | None) -> None:
        """Stepping: show only computed cells; outline the one being filled."""
        if frame is None or self.model.stage == "output":
            self.model.set_progress(None, None)
            return
        b, h = self.session.options.batch_index, self.session.options.head
        fb, fh = frame.filled.shape[:2]
        if b >= fb or h >= fh or frame.filled.shape[2:] != self.model.values.shape:
            self.model.set_progress(None, None)
            return
        current = None
        if frame.cell is not None and frame.cell[:2] == (b, h):
            current = (frame.cell[2], frame.cell[3])
        self.model.set_progress(frame.filled[b, h], current)

    def shown_grid(self) -> list[list[str]]:
        """The cells as painted at the columns' current width (fewer digits when narrow)."""
        if self.table.isHidden():
            return []
        m = self.model
        return [
            [shown_cell_text(self.table, r, c) for c in range(m.columnCount())]
            for r in range(m.rowCount())
        ]

    def header_labels(self, orientation: Qt.Orientation) -> list[str]:
        """The row or column labels as painted now (tokens elided in the middle)."""
        header = self.table.horizontalHeader()
        count = self.model.columnCount()
        if orientation == Qt.Orientation.Vertical:
            header, count = self.table.verticalHeader(), self.model.rowCount()
        assert isinstance(header, TokenHeader)
        return [header.section_text(n) for n in range(count)]

    def text_grid(self) -> list[list[str]]:
        """What the user reads in the grid (empty while the grid is hidden)."""
        if self.table.isHidden():
            return []
        m = self.model
        return [
            [str(m.data(m.index(r, c))) for c in range(m.columnCount())]
            for r in range(m.rowCount())
        ]
