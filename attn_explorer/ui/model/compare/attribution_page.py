"""The Compare view's "Attribution" tab: direct logit attribution of the clean run's
logit difference (issue 35), from :func:`attn_explorer.analysis.attribution.logit_attribution`.

Bars: the embeddings, then each layer's attention (blue) and MLP (orange), each the
logit difference that component writes straight to the last position (the final norm's
scale frozen at its clean value). Under them, a layers × heads heatmap of each head's
share of its layer's attention bar, or, for a family whose norm after attention mixes the
heads (Gemma 2/3), the note that says why there is none. Their total is shown beside the
logit difference it must equal, in the Compare view's header.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attn_explorer.analysis.attribution import LogitAttribution
from attn_explorer.ui.model.compare.charts import (
    CLEAN_RGB,
    CORRUPT_RGB,
    ChartExport,
    Heatmap,
    chart,
)
from attn_explorer.ui.model.compare.state import CompareState

EMBED_RGB = "#555555"


def component_table(attribution: LogitAttribution) -> tuple[list[str], list[str], np.ndarray]:
    """The bars as a table: one row per component (embeddings, then each layer), columns
    attention and MLP (the embeddings' row holds its value under both: it is one number)."""
    layers = len(attribution.attn)
    rows = ["embeddings", *(f"layer {n + 1}" for n in range(layers))]
    values = np.empty((layers + 1, 2))
    values[0] = [attribution.embed, np.nan]
    values[1:, 0] = attribution.attn
    values[1:, 1] = attribution.mlp
    return rows, ["attention", "mlp"], values


class AttributionPage(QWidget):
    """Bars per component and the heads' heatmap of the current comparison."""

    def __init__(self, state: CompareState, report) -> None:
        super().__init__()
        self.state = state
        self.bars_plot, self.bars_item = chart("logit difference", "layer (0 = embeddings)", False)
        self.heads_map = Heatmap("layer", "head")
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setVisible(False)
        self.bars_export = ChartExport(
            "logit attribution bars", self.bars_plot, self._bars_table, report
        )
        self.heads_export = ChartExport(
            "logit attribution heads", self.heads_map.widget, self._heads_table, report
        )
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.bars_plot, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.bars_export)
        column.addLayout(row)
        column.addWidget(self.note)
        column.addWidget(self.heads_map.widget, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.heads_export)
        column.addLayout(row)
        state.events.outcome.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        """Draw the current comparison's attribution (or nothing)."""
        self.bars_item.clear()
        outcome = self.state.outcome
        if outcome is None:
            self.heads_map.clear("")
            self.note.setVisible(False)
            self.bars_item.setTitle("")
            return
        a = outcome.attribution
        layers = np.arange(1, len(a.attn) + 1, dtype=np.float64)
        self.bars_item.addItem(
            pg.BarGraphItem(x=[0.0], height=[a.embed], width=0.6, brush=EMBED_RGB)
        )
        self.bars_item.addItem(
            pg.BarGraphItem(x=layers - 0.18, height=a.attn, width=0.36, brush=CLEAN_RGB)
        )
        self.bars_item.addItem(
            pg.BarGraphItem(x=layers + 0.18, height=a.mlp, width=0.36, brush=CORRUPT_RGB)
        )
        step = max(1, len(layers) // 10)
        ticks = [(0.0, "emb"), *((float(n), str(n)) for n in range(step, len(layers) + 1, step))]
        self.bars_item.getAxis("bottom").setTicks([ticks])
        self.bars_item.setXRange(-0.7, len(layers) + 0.7)
        self.bars_item.setTitle("blue: attention · orange: MLP")
        if a.heads is None:
            self.heads_map.clear("")
            self.heads_map.widget.setVisible(False)
            self.heads_export.setVisible(False)
            self.note.setText(a.note or "This family's norm after attention mixes the heads.")
            self.note.setVisible(True)
        else:
            self.note.setVisible(False)
            self.heads_map.widget.setVisible(True)
            self.heads_export.setVisible(True)
            n_layers, n_heads = a.heads.shape
            self.heads_map.show(
                np.asarray(a.heads, dtype=np.float64),
                [str(n + 1) for n in range(n_layers)],
                [str(n + 1) for n in range(n_heads)],
                "each head's share",
            )

    def _bars_table(self):
        outcome = self.state.outcome
        return None if outcome is None else component_table(outcome.attribution)

    def _heads_table(self):
        values = self.heads_map.values
        if values is None:
            return None
        rows = [f"layer {r}" for r in self.heads_map.rows]
        return rows, [f"head {c}" for c in self.heads_map.columns], values
