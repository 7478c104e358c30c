"""The model view's "Positions" tab: how RoPE turns one head's q·k score with distance.

A thin view over :func:`attn_explorer.models.decoder.rope.head_position_curve`. For the
selected decoder head it takes the last token's query and the key it attends to most,
undoes their rotation, and plots q·k with the key at some position p and the query at
p + Δ, for Δ = 0 … 256: one line, the same for every p, because RoPE's angles subtract.
A dashed line marks the plain q·k (before any rotation, the value at Δ = 0) and a dot
the pair's real distance in the sentence with the score the model computed. A BERT
result shows why there is nothing to rotate instead.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.rope import MAX_DISTANCE, PositionCurve, head_position_curve
from attn_explorer.models.session import ModelSession, head_name
from attn_explorer.ui.common.token_axis import TEXT_RGB

BERT_MESSAGE = "BERT adds learned position embeddings before attention; no rotation per head."
WAITING_MESSAGE = (
    "Choose a decoder (.gguf) and type a sentence: its heads' rotary positions show here."
)
#: The curve, the plain q·k and the real pair.
CURVE_RGB, UNROTATED_RGB, PAIR_RGB = "#1f5fbf", "#888888", "#d9480f"


class PositionPanel(QWidget):
    """Score of one q·k pair against relative distance Δ, for the selected decoder head."""

    def __init__(self, session: ModelSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.curve: PositionCurve | None = None
        self._build()
        session.events.result.connect(self.refresh)
        session.events.selection.connect(lambda *_: self.refresh())
        self.refresh()

    def _build(self) -> None:
        self.message = QLabel(WAITING_MESSAGE)
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setMargin(16)

        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setMinimumSize(200, 140)
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.showGrid(x=True, y=True, alpha=0.2)
        item.getViewBox().setMouseEnabled(False, False)
        labels = (("bottom", "relative distance Δ (tokens)"), ("left", "q·k after rotation"))
        for name, label in labels:
            axis = item.getAxis(name)
            axis.setLabel(label, color=TEXT_RGB)
            axis.setTextPen(TEXT_RGB)
            axis.setPen(TEXT_RGB)
        self.line = item.plot([], [], pen=pg.mkPen(CURVE_RGB, width=2))
        self.unrotated_line = pg.InfiniteLine(
            angle=0, pen=pg.mkPen(UNROTATED_RGB, width=1, style=Qt.PenStyle.DashLine)
        )
        item.addItem(self.unrotated_line)
        self.pair_dot = item.plot(
            [], [], pen=None, symbol="o", symbolSize=9, symbolBrush=PAIR_RGB,
            symbolPen=pg.mkPen("w"),
        )  # fmt: skip
        self.caption = QLabel("")
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.PlainText)  # it quotes tokens

        curve_page = QWidget()
        curve_layout = QVBoxLayout(curve_page)
        curve_layout.setContentsMargins(0, 4, 0, 0)
        curve_layout.addWidget(self.plot, 1)
        curve_layout.addWidget(self.caption)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.message)
        self.pages.addWidget(curve_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.pages)

    def _theta(self) -> float | None:
        """The RoPE base of the model that made the result, if it is the loaded decoder."""
        result, folder = self.session.result, self.session.folder
        model = self.session.cache.loaded(folder) if folder else None
        if result is None or not isinstance(model, DecoderModel):
            return None
        if model.name != result.model_name or model.config.head_dim != result.query.shape[-1]:
            return None  # the picker moved on; the result is another model's
        return model.config.rope_theta

    def _show_message(self, text: str) -> None:
        self.curve = None
        self.message.setText(text)
        self.pages.setCurrentWidget(self.message)

    @Slot()
    def refresh(self) -> None:
        """Draw the selected head's curve, or say why there is none."""
        result = self.session.result
        if result is None:
            self._show_message(WAITING_MESSAGE)
            return
        if not result.causal:
            self._show_message(BERT_MESSAGE)
            return
        theta = self._theta()
        if theta is None:
            self._show_message("Waiting for the chosen model's result (type a sentence).")
            return
        layer, head = self.session.selected_head
        curve = head_position_curve(result, layer, head, theta, MAX_DISTANCE)
        self.curve = curve
        self.line.setData(curve.distances, curve.scores)
        self.unrotated_line.setValue(curve.unrotated)
        self.pair_dot.setData([curve.actual_distance], [curve.actual_score])
        self.plot.getPlotItem().setTitle(
            f"{head_name(layer, head)} · key/value head {curve.kv_head + 1}", color=TEXT_RGB
        )
        self.caption.setText(
            f"Query {curve.query_token!r} (the last token) and the key it attends to most, "
            f"{curve.key_token!r}, un-rotated, then rotated as the model does (RoPE base "
            f"{theta:g}): key at any position p, query at p + Δ. Every p gives this line: "
            f"the score depends only on Δ. Dashed: the plain q·k, equal at Δ = 0. "
            f"Dot: this pair in the sentence, Δ = {curve.actual_distance}."
        )
        self.pages.setCurrentIndex(1)
