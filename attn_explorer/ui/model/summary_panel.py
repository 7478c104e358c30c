"""The Model dock's "Summary" tab (a summary per head): one summary, as a layers × heads table.

A :class:`SummaryPanel` offers the summaries :data:`attn_explorer.models.SUMMARY_NAMES`
names (entropy, attention to [CLS] / [SEP] / the previous token) and shows the chosen
one for every head, two decimals a cell, with the selected head as the current cell.
The dock hands it the values (:meth:`SummaryPanel.set_values`) and hears a click on a
cell through ``table.cellClicked``.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.models import SUMMARY_NAMES
from attn_explorer.models.session import Head


class SummaryPanel(QWidget):
    """``combo`` picks the summary; ``table`` shows it, rows = layers, columns = heads."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setMinimumContentsLength(8)  # long names elide in a narrow dock
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        for key, label in SUMMARY_NAMES.items():
            self.combo.addItem(label, key)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setMinimumHeight(60)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Show:"))
        row.addWidget(self.combo, 1)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)

    def summary(self) -> str:
        """The key of the chosen summary (a key of ``SUMMARY_NAMES``)."""
        return str(self.combo.currentData())

    def set_values(self, values: np.ndarray, selected: Head) -> None:
        """Fill the table with (L, H) ``values``; ``selected`` becomes the current cell."""
        n_layers, n_heads = values.shape
        table = self.table
        with QSignalBlocker(table):
            table.setRowCount(n_layers)
            table.setColumnCount(n_heads)
            table.setVerticalHeaderLabels([f"layer {layer + 1}" for layer in range(n_layers)])
            table.setHorizontalHeaderLabels([f"head {head + 1}" for head in range(n_heads)])
            for layer in range(n_layers):
                for head in range(n_heads):
                    item = QTableWidgetItem(f"{values[layer, head]:.2f}")
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                    table.setItem(layer, head, item)
            table.setCurrentCell(*selected)
        table.resizeColumnsToContents()

    def set_selected(self, selected: Head) -> None:
        """Make ``selected`` the current cell, without a click signal."""
        with QSignalBlocker(self.table):
            self.table.setCurrentCell(*selected)
