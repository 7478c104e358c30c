"""The Compare view's "Head" tab: the head under view in both runs, and their difference.

Three heatmaps on the same axes (rows = query i, columns = key j): the clean run's head,
the corrupted run's, and clean − corrupted on a diverging map centred on 0. They show
what the model dock shows (softmax weights, or raw Q·Kᵀ with "Raw Q·Kᵀ" ticked); the two
runs share one colour range so their colours compare. Side by side when the dock is wide
enough, else one above the other.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QBoxLayout, QLabel, QVBoxLayout, QWidget

from attn_explorer.models.session import ModelSession, head_name
from attn_explorer.state.colormaps import value_range
from attn_explorer.ui.model.compare.charts import ChartExport, Heatmap
from attn_explorer.ui.model.compare.state import CompareState

#: Narrower than this, the three heatmaps stack.
SIDE_BY_SIDE_PX = 3 * 260


class SideBySide(QWidget):
    """Clean, corrupted and difference of the selected head (see the module docstring)."""

    def __init__(self, session: ModelSession, state: CompareState, report) -> None:
        super().__init__()
        self.session, self.state = session, state
        self.clean = Heatmap("query i", "key j", diverging=False)
        self.corrupt = Heatmap("query i", "key j", diverging=False)
        self.difference = Heatmap("query i", "key j")
        self.title = QLabel("")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        self.export = ChartExport(
            "head difference", self.difference.widget, self._difference_table, report
        )
        self._row = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        for heatmap in (self.clean, self.corrupt, self.difference):
            self._row.addWidget(heatmap.widget, 1)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.title)
        column.addLayout(self._row, 1)
        column.addWidget(self.export, 0, Qt.AlignmentFlag.AlignRight)
        state.events.outcome.connect(self.refresh)
        session.events.selection.connect(lambda *_: self.refresh())
        session.events.values.connect(self.refresh)
        self.refresh()

    def resizeEvent(self, event: QResizeEvent) -> None:
        wide = event.size().width() >= SIDE_BY_SIDE_PX
        self._row.setDirection(
            QBoxLayout.Direction.LeftToRight if wide else QBoxLayout.Direction.TopToBottom
        )
        super().resizeEvent(event)

    def refresh(self) -> None:
        """Draw the selected head of both runs (nothing without a comparison)."""
        outcome, result = self.state.outcome, self.session.result
        if outcome is None or result is None:
            for heatmap in (self.clean, self.corrupt, self.difference):
                heatmap.clear("")
            self.title.setText("Type a corrupted prompt above to see a head in both runs.")
            return
        corrupt = outcome.corrupt
        layer, head = self.session.selected_head
        scores = self.session.show_scores
        pick = "scores" if scores else "weights"
        clean_values = np.asarray(getattr(result, pick)[layer, head], dtype=np.float64)
        corrupt_values = np.asarray(getattr(corrupt, pick)[layer, head], dtype=np.float64)
        if clean_values.shape != corrupt_values.shape:  # the clean result is being replaced
            return
        clean_values = np.where(np.isfinite(clean_values), clean_values, np.nan)
        corrupt_values = np.where(np.isfinite(corrupt_values), corrupt_values, np.nan)
        if scores:
            both = np.stack([clean_values, corrupt_values])
            levels = value_range(np.nan_to_num(both), diverging=True)
            self.clean.diverging = self.corrupt.diverging = True
        else:
            levels = (0.0, 1.0)
            self.clean.diverging = self.corrupt.diverging = False
        what = "raw score" if scores else "weight"
        self.title.setText(
            f"{head_name(layer, head)}: clean, corrupted, and clean − corrupted ({what})."
        )
        self.clean.show(clean_values, result.tokens, result.tokens, "clean", levels)
        self.corrupt.show(corrupt_values, corrupt.tokens, corrupt.tokens, "corrupted", levels)
        self.difference.show(
            clean_values - corrupt_values,
            result.tokens,
            result.tokens,
            "clean − corrupted",
        )

    def _difference_table(self):
        values = self.difference.values
        if values is None:
            return None
        return self.difference.rows, self.difference.columns, values
