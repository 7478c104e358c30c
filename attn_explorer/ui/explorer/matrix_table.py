"""Editable Q / K / V tables: a QAbstractTableModel over one session matrix, and its view.

The model never keeps a copy of the numbers: it reads the session on demand, so a
4096-token table costs nothing until rows scroll into view. Edits go through
``Session.set_cell_text``, which validates (C-locale floats, finite) and reports
rejections to the status bar — the model only returns False.
"""

from __future__ import annotations

import re

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    Qt,
)
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QKeyEvent, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHeaderView,
    QInputDialog,
    QLineEdit,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionHeader,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from attn_explorer.compute import LIMITS, MAX_PASTE_CELLS
from attn_explorer.state import Session, parse_number
from attn_explorer.state.formatting import display_number, format_number
from attn_explorer.state.types import MATRIX_LETTER
from attn_explorer.state.views.frame import Frame
from attn_explorer.ui.common.text import plain_tooltip

ROW_HIGHLIGHT = QColor(255, 236, 179)  # amber 100: the row the loop is reading
CELL_HIGHLIGHT = QColor(255, 171, 64)  # amber 300: the entry being multiplied

_Index = QModelIndex | QPersistentModelIndex


class MatrixModel(QAbstractTableModel):
    """Rows = tokens, columns = dimensions d, of one matrix of the selected (batch, head)."""

    def __init__(self, session: Session, matrix: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.matrix = matrix
        self._highlight_row: int | None = None
        self._highlight_cell: tuple[int, int] | None = None
        events = session.events
        events.values.connect(self._on_values_changed)
        events.shape.connect(self._on_shape_changed)
        events.tokens.connect(self._on_tokens_changed)
        events.options.connect(self._on_options_changed)

    # -- state → model ---------------------------------------------------------------
    def _on_values_changed(self, matrix: str) -> None:
        if matrix == self.matrix:
            self._all_changed()

    def _on_shape_changed(self) -> None:
        self.beginResetModel()
        self._highlight_row = self._highlight_cell = None
        self.endResetModel()

    def _on_tokens_changed(self) -> None:
        self.headerDataChanged.emit(Qt.Orientation.Vertical, 0, max(0, self.rowCount() - 1))

    def _on_options_changed(self, name: str) -> None:
        if name in ("head", "batch_index", "all"):
            self._all_changed()

    def _all_changed(self) -> None:
        if self.rowCount() and self.columnCount():
            self.dataChanged.emit(
                self.index(0, 0), self.index(self.rowCount() - 1, self.columnCount() - 1)
            )

    def set_highlight(self, row: int | None, cell: tuple[int, int] | None) -> None:
        """Highlight a token row and one (row, d) cell; None clears."""
        if (row, cell) == (self._highlight_row, self._highlight_cell):
            return
        old = {self._highlight_row}
        self._highlight_row, self._highlight_cell = row, cell
        for r in old | {row}:
            if r is not None and 0 <= r < self.rowCount():
                self.dataChanged.emit(
                    self.index(r, 0),
                    self.index(r, self.columnCount() - 1),
                    [Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.FontRole],
                )

    # -- Qt model API ---------------------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.session.shape[2]

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.session.shape[3]

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            value = float(self.session.head_matrix(self.matrix)[r, c])
            return (
                format_number(value) if role == Qt.ItemDataRole.EditRole else display_number(value)
            )
        if role == Qt.ItemDataRole.ToolTipRole:
            value = float(self.session.head_matrix(self.matrix)[r, c])
            name = self.session.cell_name(self.matrix, r, c)
            return plain_tooltip(
                f"{name} = {format_number(value)}\n"
                "Double-click or type to edit; Ctrl+V pastes a block."
            )
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.BackgroundRole:
            if self._highlight_cell == (r, c):
                return QBrush(CELL_HIGHLIGHT)
            if self._highlight_row == r:
                return QBrush(ROW_HIGHLIGHT)
        if role == Qt.ItemDataRole.ForegroundRole and (
            self._highlight_row == r or self._highlight_cell == (r, c)
        ):
            return QBrush(QColor(0, 0, 0))
        if role == Qt.ItemDataRole.FontRole and self._highlight_cell == (r, c):
            font = QFont()
            font.setBold(True)
            return font
        return None

    def setData(self, index: _Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if not index.isValid() or role != Qt.ItemDataRole.EditRole:
            return False
        return self.session.set_cell_text(self.matrix, index.row(), index.column(), str(value))

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEditable

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if role == Qt.ItemDataRole.DisplayRole:
            if orientation == Qt.Orientation.Horizontal:
                return f"d{section + 1}"
            tokens = self.session.tokens
            return tokens[section] if 0 <= section < len(tokens) else None
        if role == Qt.ItemDataRole.ToolTipRole:
            if orientation == Qt.Orientation.Horizontal:
                return f"dimension {section + 1} of the {MATRIX_LETTER[self.matrix]} vectors"
            return "token (row); right-click to rename, insert or remove"
        return None


#: Pixels a cell keeps free around its text (the style's margins, both sides).
CELL_PADDING_PX = 8
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def fit_number(text: str, width: int, metrics: QFontMetrics) -> str:
    """``text`` (a number) with as many significant digits as fit ``width`` pixels.

    6 digits when they fit, fewer as the column narrows (``-0.1308`` → ``-0.131`` →
    ``-0.13``), scientific notation for a large or tiny number, never an elided "0.41…":
    the tooltip has the full value. Text that is not a number comes back unchanged.
    """
    if not _NUMBER.match(text) or metrics.horizontalAdvance(text) <= width:
        return text
    value = float(text)
    candidates = [f"{value:.{digits}g}" for digits in range(5, 0, -1)]
    candidates += [f"{value:.0e}"]
    for candidate in candidates:
        candidate = "0" if candidate in ("-0", "-0e+00") else candidate
        if metrics.horizontalAdvance(candidate) <= width:
            return candidate
    return candidates[-1]


def fitted_cell_text(option: QStyleOptionViewItem) -> str:
    """What a cell shows in ``option``'s rectangle: its number at a precision that fits."""
    return fit_number(option.text, option.rect.width() - CELL_PADDING_PX, option.fontMetrics)


def elide_label(prefix: str, token: str, width: int, metrics: QFontMetrics) -> str:
    """``prefix`` + ``token`` in ``width`` pixels: the prefix (``q3: ``, or ``k3\n`` on a
    line of its own) kept whole, the token elided in its middle (``ca…al``), so both ends
    of the name stay readable."""
    room = width - (0 if prefix.endswith("\n") else metrics.horizontalAdvance(prefix))
    return prefix + metrics.elidedText(token, Qt.TextElideMode.ElideMiddle, max(room, 0))


class TokenHeader(QHeaderView):
    """A header whose labels are ``prefix: token`` or ``prefix\ntoken`` (the model's own
    prefix, up to the first separator): the token is elided in the middle.

    Qt's header elides the whole label at one end, so narrow score-grid columns read
    ``: capita``; here the index prefix stays and the token keeps its first and last
    letters. The model's ``ToolTipRole`` has the full name.
    """

    def section_text(self, logical: int) -> str:
        """The label as painted in the section's current size."""
        model = self.model()
        text = model.headerData(logical, self.orientation(), Qt.ItemDataRole.DisplayRole)
        if text is None:
            return ""
        text = str(text)
        # "k3\ncapital": the index on a line of its own; "q3: capital": one line
        sep = "\n" if "\n" in text else ": "
        prefix, found, token = text.partition(sep)
        if not found:
            prefix, token = "", text
        else:
            prefix += found
        width = self.sectionSize(logical) - CELL_PADDING_PX
        if self.orientation() == Qt.Orientation.Vertical:
            width = self.width() - CELL_PADDING_PX
        return elide_label(prefix, token, width, self.fontMetrics())

    def paintSection(self, painter: QPainter, rect: QRect, logical: int) -> None:
        if not rect.isValid():
            return
        option = QStyleOptionHeader()
        self.initStyleOption(option)
        self.initStyleOptionForIndex(option, logical)
        option.rect = rect
        option.text = self.section_text(logical)
        option.textAlignment = Qt.AlignmentFlag.AlignCenter
        painter.save()
        self.style().drawControl(QStyle.ControlElement.CE_Header, option, painter, self)
        painter.restore()


class FittingDelegate(QStyledItemDelegate):
    """Cells whose number is shown at the precision their column fits (full in the tooltip)."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: _Index) -> None:
        super().initStyleOption(option, index)
        if option.text:
            option.text = fitted_cell_text(option)


def shown_cell_text(view: QTableView, row: int, column: int) -> str:
    """The text the user reads in a cell of ``view`` as it is painted now (tests, tools)."""
    index = view.model().index(row, column)
    option = QStyleOptionViewItem()
    view.initViewItemOption(option)
    option.rect = view.visualRect(index)
    delegate = view.itemDelegateForIndex(index)
    assert isinstance(delegate, QStyledItemDelegate)
    delegate.initStyleOption(option, index)
    return option.text


class NumberDelegate(FittingDelegate):
    """A plain line editor: any float in C locale, full precision (no 2-decimal spin box).

    Validation happens in the session, so a rejected value gets a status-bar
    message naming the cell instead of a silent refusal.
    """

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: _Index) -> QWidget:
        editor = QLineEdit(parent)
        editor.setFrame(False)
        editor.setAlignment(Qt.AlignmentFlag.AlignRight)
        return editor

    def setEditorData(self, editor: QWidget, index: _Index) -> None:
        assert isinstance(editor, QLineEdit)
        editor.setText(str(index.data(Qt.ItemDataRole.EditRole)))
        editor.selectAll()

    def setModelData(self, editor: QWidget, model: object, index: _Index) -> None:
        assert isinstance(editor, QLineEdit) and isinstance(model, QAbstractTableModel)
        model.setData(index, editor.text(), Qt.ItemDataRole.EditRole)


_SPLIT = re.compile(r"[\t,; ]+")


def parse_block(
    text: str, max_rows: int = LIMITS.max_tokens, max_cols: int = LIMITS.max_dim
) -> list[list[float]]:
    """Numbers separated by tabs, commas or spaces, one row per line; ValueError if ragged.

    A block bigger than any table can be (``max_rows`` × ``max_cols``) is refused from
    its line and field counts before anything is parsed, so a huge clipboard never
    freezes the window. Each number is read exactly as a typed cell is
    (:func:`~attn_explorer.state.session.parse_number`): the same text is refused in both.
    """
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    if not lines:
        raise ValueError("the clipboard holds no numbers")
    if len(lines) > max_rows:
        raise ValueError(
            f"the pasted text has {len(lines):,} rows; a table has at most {max_rows:,} tokens"
        )
    first = len([c for c in _SPLIT.split(lines[0].strip()) if c])
    if len(lines) * first > MAX_PASTE_CELLS:
        raise ValueError(
            f"the pasted block has {len(lines):,} × {first:,} numbers, over the limit of "
            f"{MAX_PASTE_CELLS:,}"
        )
    rows = []
    for line in lines:
        cells = [c for c in _SPLIT.split(line.strip()) if c]
        if len(cells) > max_cols:
            raise ValueError(
                f"a pasted row has {len(cells):,} numbers; a table has at most {max_cols:,} "
                "dimensions"
            )
        values = []
        for cell in cells:
            try:
                values.append(parse_number(cell))
            except ValueError as exc:
                raise ValueError(f"in the pasted text, {exc}") from None
        rows.append(values)
    if len({len(r) for r in rows}) != 1:
        raise ValueError("the pasted rows have different lengths; paste a rectangular block")
    return rows


class MatrixTable(QTableView):
    """The view of one matrix: keyboard editing, block copy/paste, token context menu."""

    def __init__(self, session: Session, matrix: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.matrix = matrix
        self.setModel(MatrixModel(session, matrix, self))
        self.setItemDelegate(NumberDelegate(self))
        self.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.AnyKeyPressed
        )
        self.setSelectionMode(QAbstractItemView.SelectionMode.ContiguousSelection)
        self.horizontalHeader().setMinimumSectionSize(56)
        self.horizontalHeader().setDefaultSectionSize(64)
        self._fit_columns()
        session.events.shape.connect(self._fit_columns)
        self.verticalHeader().setDefaultSectionSize(24)
        self.verticalHeader().setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.verticalHeader().customContextMenuRequested.connect(self._token_menu)
        self.verticalHeader().sectionDoubleClicked.connect(self.rename_token)
        self.setToolTip(
            f"{MATRIX_LETTER[matrix]}: rows are tokens, columns are dimensions d. "
            "Type to edit, Ctrl+C / Ctrl+V copy and paste blocks."
        )
        # Copy and paste are the window's Edit actions (Ctrl+C / Ctrl+V), which act on this
        # table while it has the focus: one definition of each shortcut, no ambiguity.

    def _fit_columns(self) -> None:
        """Few dimensions stretch to fill the table; many keep a readable width and scroll."""
        mode = (
            QHeaderView.ResizeMode.Stretch
            if self.session.shape[3] <= 6
            else QHeaderView.ResizeMode.Interactive
        )
        self.horizontalHeader().setSectionResizeMode(mode)

    def matrix_model(self) -> MatrixModel:
        model = self.model()
        assert isinstance(model, MatrixModel)
        return model

    def copy_selection(self) -> str:
        """Copy the selected block as tab-separated text (full precision); returns it."""
        indexes = self.selectedIndexes()
        if not indexes:
            return ""
        rows = sorted({i.row() for i in indexes})
        cols = sorted({i.column() for i in indexes})
        data = self.session.head_matrix(self.matrix)
        text = "\n".join("\t".join(format_number(float(data[r, c])) for c in cols) for r in rows)
        QApplication.clipboard().setText(text)
        return text

    def event(self, event: QEvent) -> bool:
        # Plain typing starts editing a cell, as in a spreadsheet, instead of firing the
        # window's bare-key shortcuts (1 / 2 / 3, F); chords with Ctrl or Alt (Alt+1…3,
        # Ctrl+V) still reach the window.
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            chord = event.modifiers() & (
                Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
            )
            if event.text() and event.text().isprintable() and not chord:
                event.accept()
                return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        # Escape (not editing) hands the keyboard back to the window, so the bare
        # strategy keys 1 / 2 / 3 work again instead of starting to edit a cell.
        if event.key() == Qt.Key.Key_Escape and self.state() != self.State.EditingState:
            self.clearFocus()
            return
        super().keyPressEvent(event)

    def paste(self, text: str | None = None) -> bool:
        """Paste a block of numbers (default: the clipboard's) at the current cell."""
        if text is None:
            text = QApplication.clipboard().text()
        if not isinstance(text, str):
            raise TypeError(f"paste: expected text, got {type(text).__name__}")
        letter = MATRIX_LETTER[self.matrix]
        try:
            block = parse_block(text)
        except ValueError as exc:
            self.session.report(f"{letter}: cannot paste: {exc}; nothing changed")
            return False
        current = self.currentIndex()
        row, col = (current.row(), current.column()) if current.isValid() else (0, 0)
        return self.session.set_block(self.matrix, row, col, block)

    def _token_menu(self, pos: QPoint) -> None:
        row = self.verticalHeader().logicalIndexAt(pos)
        menu = QMenu(self)
        if row >= 0:
            menu.addAction("Rename token…", lambda: self.rename_token(row))
            menu.addAction("Insert token above", lambda: self.session.insert_token(row))
            menu.addAction("Insert token below", lambda: self.session.insert_token(row + 1))
            menu.addAction("Remove token", lambda: self.session.remove_token(row))
        else:
            menu.addAction("Add token", lambda: self.session.insert_token())
        menu.exec(self.verticalHeader().mapToGlobal(pos))

    def rename_token(self, row: int) -> None:
        tokens = self.session.tokens
        if not 0 <= row < len(tokens):
            return
        name, ok = QInputDialog.getText(self, "Rename token", "Token name:", text=tokens[row])
        if ok:
            self.session.rename_token(row, name)

    def set_frame(self, frame: Frame | None) -> None:
        """Highlight the row and entry the stepper's current multiply-add reads."""
        model = self.matrix_model()
        step = frame.step if frame is not None else None
        if step is None or (step.batch, step.head) != (
            self.session.options.batch_index,
            self.session.options.head,
        ):
            model.set_highlight(None, None)
            return
        row = step.i if self.matrix == "query" else step.j
        if self.matrix == "value":
            model.set_highlight(None, None)
            return
        model.set_highlight(row, (row, step.d))
        self.scrollTo(model.index(row, step.d))
