"""The model view's "Analysis" tab: issue 25's instruments on the current result.

A thin view over :mod:`attn_explorer.analysis`. Four pages:

- **Head scores**: one layers × heads heatmap for the chosen score (previous token,
  first token, duplicate token, induction, or the ablation scan's target-logit change);
  a click selects that head in the model view. "Repeated tokens" types the probe text
  (a seeded random word sequence, twice) on which induction heads light up.
- **Next token**: the top-10 next tokens as bars; "Ablate selected head" adds the
  ablated distribution beside them and the target's logit change, probability change
  and KL; "Scan all heads" ablates each head alone in a worker, with progress and Stop.
- **Logit lens**: layers × positions, each cell the top token and its probability.
- **Rollout**: the T × T attention rollout.

For an encoder the decoder-only parts say why they are absent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.analysis import (
    DECODER_ONLY,
    Ablation,
    AblationEffect,
    AblationScan,
    logit_lens,
    next_token,
    rollout,
)
from attn_explorer.analysis.head_scores import probe_text, result_head_scores
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.encoder.bert import BertModel
from attn_explorer.models.session import ModelSession, head_name
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.token_axis import TEXT_RGB, TokenAxis
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.model_grid import color_map

#: The score combo: key -> label. "ablation" is the scan's target-logit change.
SCORE_LABELS = {
    "previous_token": "previous token",
    "first_token": "first token (sink)",
    "duplicate_token": "duplicate token",
    "induction": "induction",
    "ablation": "ablation: Δ target logit",
}
CLEAN_RGB, ABLATED_RGB = "#1f5fbf", "#d9480f"
PROBE_WORDS = 20


class ScoreImage(pg.ImageItem):
    """A layers × heads score heatmap that reports the (layer, head) cell a left click hits."""

    def __init__(self, clicked: Callable[[int, int], None]) -> None:
        super().__init__(axisOrder="row-major")  # image[layer, head]
        self._clicked = clicked

    def mouseClickEvent(self, ev: Any) -> None:
        if ev.button() == Qt.MouseButton.LeftButton and self.image is not None:
            ev.accept()
            pos = ev.pos()
            self._clicked(int(np.floor(pos.y())), int(np.floor(pos.x())))


def _plot(left: str, bottom: str, invert: bool = True) -> tuple[pg.PlotWidget, pg.PlotItem]:
    widget = pg.PlotWidget(axisItems={"left": TokenAxis("left"), "bottom": TokenAxis("bottom")})
    widget.setBackground("w")
    widget.setMinimumSize(200, 160)
    item = widget.getPlotItem()
    item.setMenuEnabled(False)
    item.hideButtons()
    item.getViewBox().invertY(invert)
    item.getViewBox().setMouseEnabled(False, False)
    item.getAxis("left").setLabel(left, color=TEXT_RGB)
    item.getAxis("bottom").setLabel(bottom, color=TEXT_RGB)
    return widget, item


class AnalysisPanel(QWidget):
    """Head scores, next token with ablation, logit lens and rollout of the current result.

    ``probeRequested(text)`` asks the model view to run the repeated-tokens probe text;
    ``headOpened(layer, head)`` follows a click on a score cell (the head is selected).
    """

    probeRequested = Signal(str)
    headOpened = Signal(int, int)

    def __init__(self, session: ModelSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.scores: dict[str, np.ndarray] = {}
        self.scan: AblationScan | None = None
        self.effect: AblationEffect | None = None
        self.lens: Any = None
        self.top: list[Any] = []
        self._ablation: Ablation | None = None
        self._vocabulary: tuple[str, list[str]] | None = None  # (model name, tokens)
        self.lens_runner = LatestRunner(self)
        self.scan_runner = LatestRunner(self)
        self._build()
        self._connect()
        self.refresh()

    # -- building ------------------------------------------------------------------------

    def _build(self) -> None:
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # it quotes tokens

        self.score_combo = QComboBox()
        for key, label in SCORE_LABELS.items():
            self.score_combo.addItem(label, key)
        self.probe_button = QPushButton("Repeated tokens")
        self.probe_button.setToolTip(
            f"Type a seeded random sequence of {PROBE_WORDS} words, twice: induction heads "
            "attend to the word after the earlier copy of the current one"
        )
        self.scores_plot, self._scores_item = _plot("layer", "head")
        self.scores_image = ScoreImage(self.select_cell)
        self._scores_item.addItem(self.scores_image)
        self.scores_bar = pg.ColorBarItem(
            values=(0, 1), colorMap=color_map("sequential"), interactive=False, width=14
        )
        self.scores_bar.setImageItem(self.scores_image, insert_in=self._scores_item)
        scores_page = QWidget()
        row = QHBoxLayout()
        row.addWidget(self.score_combo, 1)
        row.addWidget(self.probe_button)
        column = QVBoxLayout(scores_page)
        column.addLayout(row)
        column.addWidget(self.scores_plot, 1)

        self.ablate_button = QPushButton("Ablate selected head")
        self.scan_button = QPushButton("Scan all heads")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.bars_plot, self._bars_item = _plot("next token", "probability")
        self.effect_label = QLabel("")
        self.effect_label.setWordWrap(True)
        self.effect_label.setTextFormat(Qt.TextFormat.PlainText)
        next_page = QWidget()
        buttons = QHBoxLayout()
        for button in (self.ablate_button, self.scan_button, self.stop_button):
            buttons.addWidget(button)
        column = QVBoxLayout(next_page)
        column.addLayout(buttons)
        column.addWidget(self.progress)
        column.addWidget(self.bars_plot, 1)
        column.addWidget(self.effect_label)

        self.lens_table = QTableWidget()
        self.lens_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.rollout_plot, self._rollout_item = _plot("query i", "input token j")
        self.rollout_image = pg.ImageItem(axisOrder="row-major")
        self._rollout_item.addItem(self.rollout_image)
        bar = pg.ColorBarItem(
            values=(0, 1), colorMap=color_map("sequential"), interactive=False, width=14
        )
        bar.setImageItem(self.rollout_image, insert_in=self._rollout_item)
        self.rollout_bar = bar

        self.pages = QTabWidget()
        self.pages.addTab(scores_page, "Head scores")
        self.pages.addTab(next_page, "Next token")
        self.pages.addTab(self.lens_table, "Logit lens")
        self.pages.addTab(self.rollout_plot, "Rollout")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.status)
        layout.addWidget(self.pages, 1)

    def _connect(self) -> None:
        self.session.events.result.connect(self.refresh)
        self.session.events.selection.connect(lambda *_: self._show_effect_hint())
        self.score_combo.currentIndexChanged.connect(lambda *_: self._show_scores())
        self.probe_button.clicked.connect(self.request_probe)
        self.ablate_button.clicked.connect(self.ablate_selected)
        self.scan_button.clicked.connect(self.start_scan)
        self.stop_button.clicked.connect(self.scan_runner.cancel)
        self.lens_runner.finished.connect(self._on_lens)
        self.lens_runner.failed.connect(lambda text: self.status.setText(text))
        self.scan_runner.finished.connect(self._on_scan)
        self.scan_runner.failed.connect(lambda text: self.status.setText(text))
        self.scan_runner.cancelled.connect(lambda: self.status.setText("Scan stopped."))
        self.scan_runner.progress.connect(self._on_progress)
        self.scan_runner.busy.connect(self._on_scan_busy)

    # -- what the panel reads --------------------------------------------------------------

    def model(self) -> BertModel | DecoderModel | None:
        """The loaded model that made the current result, or None."""
        result, folder = self.session.result, self.session.folder
        model = self.session.cache.loaded(folder) if folder else None
        if result is None or model is None or model.name != result.model_name:
            return None
        return model

    def decoder(self) -> DecoderModel | None:
        model = self.model()
        return model if isinstance(model, DecoderModel) else None

    # -- pushing state into the widgets ----------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        """Recompute for a new result: scores and rollout now, lens and next token in a worker."""
        self.scan_runner.cancel(quiet=True)
        self.scan, self.effect, self.lens, self.top, self._ablation = None, None, None, [], None
        result = self.session.result
        decoder = self.decoder()
        for button in (self.ablate_button, self.scan_button):
            button.setEnabled(decoder is not None)
        self.probe_button.setEnabled(self.model() is not None)
        self.lens_table.clear()
        self.lens_table.setRowCount(0)
        self.lens_table.setColumnCount(0)
        self._bars_item.clear()
        self.effect_label.setText("")
        if result is None:
            self.scores = {}
            self.scores_image.clear()
            self.rollout_image.clear()
            self.status.setText("Choose a model and type a sentence: its heads are scored here.")
            return
        self.scores = result_head_scores(result)  # a long text's: streamed by its pass
        self._show_scores()
        if isinstance(result.weights, np.ndarray):  # a long text has no T × T grid to roll out
            flow = rollout(result.weights)
            self.rollout_image.setImage(flow, levels=(0, float(flow.max())), lut=lut("sequential"))
            self.rollout_bar.setLevels((0, float(flow.max())))
            for axis in ("left", "bottom"):
                self._rollout_item.getAxis(axis).set_tokens(result.tokens)
        if decoder is not None and result.long is not None:
            self.status.setText(
                f"{len(result.tokens):,} tokens: head scores only (no rollout or lens)."
            )
            return
        if decoder is None:
            self.status.setText(DECODER_ONLY)
            self.effect_label.setText(DECODER_ONLY)
            return
        self.status.setText("Reading every layer through the unembedding…")
        hidden, logits = result.hidden_states, result.logits
        assert logits is not None  # a decoder's result has them
        self._ablation = Ablation(decoder, hidden, logits)

        def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]):
            lens = logit_lens(decoder, hidden, progress, should_stop)
            return lens, next_token(logits[-1], decoder.tokenizer.readable, 10)

        self.lens_runner.submit(job)

    def _show_scores(self) -> None:
        key = self.score_combo.currentData()
        result = self.session.result
        if result is None:
            return
        layers, heads = result.weights.shape[:2]
        if key == "ablation":
            if self.scan is None:
                values = np.full((layers, heads), np.nan)
            else:
                values = self.scan.logit_change
            bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
            levels, colormap = (-bound or -1.0, bound or 1.0), "diverging"
        else:
            values = self.scores.get(key, np.full((layers, heads), np.nan))
            levels, colormap = (0.0, 1.0), "sequential"
        shown = np.nan_to_num(values, nan=levels[0] if colormap == "sequential" else 0.0)
        self.scores_image.setImage(shown, levels=levels, lut=lut(colormap))
        self.scores_bar.setColorMap(color_map(colormap))
        self.scores_bar.setLevels(levels)
        self._scores_item.getAxis("left").set_tokens([str(i + 1) for i in range(layers)])
        self._scores_item.getAxis("bottom").set_tokens([str(h + 1) for h in range(heads)])
        self._scores_item.setTitle(f"{SCORE_LABELS[key]} · rows = layer, columns = head")
        if np.isnan(values).all():
            why = "run 'Scan all heads'" if key == "ablation" else "no repeated token"
            self.status.setText(f"{SCORE_LABELS[key]}: undefined here ({why}).")

    def _show_bars(self) -> None:
        self._bars_item.clear()
        if not self.top:
            return
        rows = np.arange(len(self.top))
        clean = np.array([c.prob for c in self.top])
        self._bars_item.addItem(
            pg.BarGraphItem(x0=0, y=rows - 0.2, height=0.4, width=clean, brush=CLEAN_RGB)
        )
        if self.effect is not None:
            ablated = self.effect.probs[[c.id for c in self.top]]
            self._bars_item.addItem(
                pg.BarGraphItem(x0=0, y=rows + 0.2, height=0.4, width=ablated, brush=ABLATED_RGB)
            )
        self._bars_item.getAxis("left").setTicks(
            [[(i, repr(c.token)) for i, c in enumerate(self.top)]]
        )
        self._bars_item.setXRange(0, 1)
        self._bars_item.setYRange(-0.6, len(self.top) - 0.4)

    def _show_lens(self) -> None:
        decoder, result, lens = self.decoder(), self.session.result, self.lens
        if decoder is None or result is None or lens is None:
            return
        rows, columns = lens.top_id.shape
        table = self.lens_table
        table.setRowCount(rows)
        table.setColumnCount(columns)
        table.setHorizontalHeaderLabels([repr(t) for t in result.tokens])
        table.setVerticalHeaderLabels(["embeddings", *(f"layer {n}" for n in range(1, rows))])
        colours = lut("sequential")
        for row in range(rows):
            for column in range(columns):
                token = decoder.tokenizer.readable(int(lens.top_id[row, column]))
                prob = float(lens.top_prob[row, column])
                cell = QTableWidgetItem(token)
                rgb = colours[min(255, int(prob * 255))]
                cell.setBackground(QColor(int(rgb[0]), int(rgb[1]), int(rgb[2])))
                cell.setForeground(QColor("white" if prob < 0.6 else "black"))
                cell.setToolTip(
                    f"{table.verticalHeaderItem(row).text()}, position {column + 1}: top "
                    f"{token!r} p = {prob:.3f}; the model's final choice p = "
                    f"{float(lens.final_prob[row, column]):.3f}"
                )
                table.setItem(row, column, cell)

    def _show_effect_hint(self) -> None:
        if self.decoder() is not None and self.effect is None:
            layer, head = self.session.selected_head
            self.effect_label.setText(f"Selected: {head_name(layer, head)}.")

    # -- the user's requests -----------------------------------------------------------

    def request_probe(self) -> None:
        """Ask for the repeated-tokens probe text of the current model."""
        model = self.model()
        if model is None:
            return
        if self._vocabulary is None or self._vocabulary[0] != model.name:
            if isinstance(model, DecoderModel):
                words = [model.tokenizer.readable(i) for i in range(model.config.vocab_size)]
            else:
                words = list(model.tokenizer.id_to_token)
            self._vocabulary = (model.name, words)
        try:
            if isinstance(model, DecoderModel):
                text = probe_text(self._vocabulary[1], model.tokenizer.encode, PROBE_WORDS, 0)
            else:
                tokenize = model.tokenizer.tokenize
                text = probe_text(
                    self._vocabulary[1], tokenize, PROBE_WORDS, 0, leading_space=False
                )
        except ValueError as exc:  # a vocabulary without enough whole words
            reason = str(exc).removeprefix("probe_text: ").rstrip(".")  # the API's name off
            self.status.setText(
                f"Repeated tokens: no probe for this model ({reason}); type a sentence that "
                "repeats itself instead."
            )
            return
        self.score_combo.setCurrentIndex(list(SCORE_LABELS).index("induction"))
        self.probeRequested.emit(text)

    def ablate_selected(self) -> None:
        """Zero the selected head's attention output; show the new next-token bars."""
        self.ablate([self.session.selected_head])

    def ablate(self, heads: list[tuple[int, int]]) -> None:
        """Zero these heads' attention outputs together; show the new next-token bars."""
        if self._ablation is None or not heads:
            return
        self.effect = effect = self._ablation.ablate(heads)
        token = repr(self._ablation.model.tokenizer.readable(effect.target_id))
        names = ", ".join(head_name(layer, head) for layer, head in effect.heads)
        self.effect_label.setText(
            f"{names} ablated: logit of {token} {effect.logit_change:+.3f}, "
            f"probability {effect.prob_change:+.4f}, KL {effect.kl:.4f} nats "
            "(blue: clean, orange: ablated)."
        )
        self._show_bars()
        self.pages.setCurrentIndex(1)

    def start_scan(self) -> None:
        """Ablate every head alone, in the background; Stop cancels."""
        ablation = self._ablation
        if ablation is None:
            return

        def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]):
            return ablation.scan(progress=progress, should_stop=should_stop)

        self.progress.setValue(0)
        self.status.setText("Ablating every head…")
        self.scan_runner.submit(job)

    # -- worker results ------------------------------------------------------------------

    def _on_lens(self, outcome: object) -> None:
        assert isinstance(outcome, tuple)
        self.lens, self.top = outcome
        self._show_lens()
        self._show_bars()
        first = self.top[0]
        self.status.setText(f"Next token: {first.token!r} (p = {first.prob:.3f}).")

    def _on_scan(self, scan: object) -> None:
        assert isinstance(scan, AblationScan)
        self.scan = scan
        self.progress.setValue(1000)
        layer, head = np.unravel_index(int(np.argmin(scan.logit_change)), scan.logit_change.shape)
        assert self._ablation is not None  # a scan ran on it
        token = repr(self._ablation.model.tokenizer.readable(scan.target_id))
        self.status.setText(
            f"Scan done: without {head_name(int(layer), int(head))} the logit of {token} "
            f"drops most ({scan.logit_change[layer, head]:+.3f})."
        )
        self.score_combo.setCurrentIndex(list(SCORE_LABELS).index("ablation"))
        self._show_scores()
        self.pages.setCurrentIndex(0)

    def _on_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.status.setText(f"Ablating: {text}")

    def _on_scan_busy(self, busy: bool) -> None:
        self.stop_button.setEnabled(busy)
        self.scan_button.setEnabled(not busy and self.decoder() is not None)

    def select_cell(self, layer: int, head: int) -> None:
        """Open head (layer, head) in the model view (a click on the heatmap)."""
        result = self.session.result
        if result is None:
            return
        layers, heads = result.weights.shape[:2]
        if 0 <= layer < layers and 0 <= head < heads:
            self.session.select_head(layer, head)
            self.headOpened.emit(layer, head)

    def shutdown(self) -> None:
        self.lens_runner.cancel(quiet=True)
        self.scan_runner.cancel(quiet=True)
