"""The code panel: the selected strategy's core lines, how the result was made, where H enters.

The lines are the very text the compute layer runs (``strategy_source``); the
provenance comes from :class:`~attn_explorer.state.results.results.Results`.
"""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QLabel,
    QPlainTextEdit,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import stage_source, strategy_source
from attn_explorer.state import Session
from attn_explorer.state.labels import STAGE_NAMES
from attn_explorer.state.results.results import Results

STAGE_COLOUR = QColor(255, 214, 102, 110)  # the lines that made the shown stage


@cache
def _source(strategy: str) -> str:
    return strategy_source(strategy)  # reads the module's source: do it once


@cache
def _stage_source(stage: str) -> str:
    return stage_source(stage)


class CodePanel(QWidget):
    """The strategy's core lines — the very text the compute layer runs — and how it agreed."""

    def __init__(self, session: Session, results: Results, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.results = results
        self.provenance = QLabel()
        self.provenance.setWordWrap(True)
        self.provenance.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.code = QPlainTextEdit()
        self.code.setReadOnly(True)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.code.setFont(font)
        # Wrapped, so the shape comments stay visible in a narrow column.
        self.code.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.code.setToolTip(
            "The core lines of the selected strategy, as the compute layer runs them"
        )
        self.where = QLabel()
        self.where.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.provenance)
        layout.addWidget(self.code, 1)
        layout.addWidget(self.where)
        session.events.options.connect(lambda name: self.set_strategy(session.options.strategy))
        session.events.shape.connect(lambda: self.set_strategy(session.options.strategy))
        results.changed.connect(self.set_provenance)
        self.set_strategy(session.options.strategy)
        self.set_provenance()

    def set_strategy(self, name: str) -> None:
        """The strategy's lines for S, then, for a later stage, the lines that made it from S
        (highlighted and scrolled into view)."""
        stage = self.session.options.stage
        text = _source(name)
        extra = _stage_source(stage)
        if stage == "masked" and not self.session.options.causal:
            # nothing is hidden: the masked scores are the scaled ones
            extra = _stage_source("scaled") + "\n# no mask (causal is off): masked = scaled"
        elif stage == "masked" and self.session.options.mask_window is not None:
            w = self.session.options.mask_window
            extra += f"\n# keep: j ≤ i and j > i − {w} (a sliding window of {w} keys)"
        if name == "tiled":  # its lines hold the softmax and the output already
            extra = ""
            text += (
                "\n\n# The grid on screen was never held: it is rebuilt from the same tiles,"
                "\n# weights = exp(score · scale − m) / ℓ with each row's kept m and ℓ."
            )
        if extra:
            text += f"\n\n# then {STAGE_NAMES[stage]} (compute/pipeline.py):\n{extra}"
        if self.code.toPlainText() != text:
            self.code.setPlainText(text)
            self._mark_stage(extra)
        b, h, t, d = self.session.shape
        where = {
            "loop": f"Every one of the B·H·T·T = {b * h * t * t:,} cells is a visit of the loop "
            f"body, and each does d = {d} multiply-adds in Python.",
            "matmul": f"The head dimension is still a Python loop: {b * h} call(s) of "
            f"(T={t}, d={d}) @ (d={d}, T={t}).",
            "batched": f"The head dimension enters the call: one matmul on (B={b}, H={h}, T={t}, "
            f"d={d}) @ (B={b}, H={h}, d={d}, T={t}) → (B={b}, H={h}, T={t}, T={t}).",
            "tiled": f"Blocks of {self.session.options.block} query rows meet blocks of as many "
            f"keys: one tile per (B={b}, H={h}) at a time, never the T×T = {t * t:,}-cell grid.",
        }[name]
        self.where.setText(where)

    def _mark_stage(self, extra: str) -> None:
        selections = []
        if extra:
            document = self.code.document()
            first = document.blockCount() - extra.count("\n") - 1
            for n in range(first, document.blockCount()):
                selection = QTextEdit.ExtraSelection()
                selection.format.setBackground(STAGE_COLOUR)
                selection.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                selection.cursor = QTextCursor(document.findBlockByNumber(n))
                selections.append(selection)
            self.code.moveCursor(QTextCursor.MoveOperation.End)
            self.code.ensureCursorVisible()
        else:
            self.code.moveCursor(QTextCursor.MoveOperation.Start)
        self.code.setExtraSelections(selections)

    def set_provenance(self) -> None:
        """How the shown result was computed and whether the strategies agree."""
        self.provenance.setText(self.results.provenance())
