"""The "Model" dock: a real model's attention (BERT or a GGUF decoder), head by head.

A thin view over :class:`attn_explorer.models.session.ModelSession`. Pick a model (found in the
Hugging Face cache, LM Studio's folder or a model package, or opened from a folder or a
``.gguf`` file), type a sentence (and, for BERT, optionally a second one); after a pause in
typing the request runs in a :class:`~attn_explorer.ui.common.workers.LatestRunner` (newest
request wins). The view then shows a layers × heads grid of square thumbnails (rows = query i,
columns = key j), an enlarged heatmap of the selected head with the tokens on its axes, a
summaries table, and a button that hands the selected head to the explorer through
``headTaken``. For a decoder the grid brackets the query heads that share a key/value head, a
line says how many share, and a "Generate" tab (:mod:`.generation_panel`) writes a continuation
and a "Positions" tab (:mod:`.position_panel`) plots how RoPE turns a head's q·k with distance.
Before the first result a placeholder says what to do; errors go to the status line.

One job: the dock's controls and their wiring. Apart: grid (:mod:`.model_grid`), enlarged
head (:mod:`.head_detail`), splitter (:mod:`.heads_splitter`), tabs (:mod:`.summary_panel`,
:mod:`.generation_panel`, :mod:`.position_panel`), install offer (:mod:`.install_panel`),
batch of sentences (:mod:`.batch_controls`), model picker and remembered width
(:mod:`.model_choice`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import STRATEGIES
from attn_explorer.models import ModelAttention, find_models
from attn_explorer.models.discovery import SMOLLM2_INSTALL
from attn_explorer.models.install import Installable, forget_import_caches
from attn_explorer.models.session import Head, ModelSession
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.analysis_panel import AnalysisPanel
from attn_explorer.ui.model.batch_controls import BatchControls
from attn_explorer.ui.model.generation_panel import GenerationPanel
from attn_explorer.ui.model.head_detail import HeadDetail
from attn_explorer.ui.model.heads_splitter import HeadsSplitter, LowerTabs
from attn_explorer.ui.model.install_panel import InstallPanel
from attn_explorer.ui.model.long_context import PassPreviews, PassProgress
from attn_explorer.ui.model.model_choice import ModelPicker, remember_dock_width
from attn_explorer.ui.model.model_grid import HeatmapItem, ThumbnailGrid
from attn_explorer.ui.model.position_panel import PositionPanel
from attn_explorer.ui.model.summary_panel import SummaryPanel

#: Pause after the last key stroke (or pick) before the model runs: typing never queues
#: stale work.
DEBOUNCE_MS = 300
#: Typed for the user when a model was just installed and the sentence is empty.
SAMPLE_SENTENCE = "The cat sat on the mat because it was tired."
#: The status line when a model is chosen and the sentence box is empty (not an error).
TYPE_HINT = "Now type a sentence above: the sentence box is empty."
#: How long ``shutdown`` waits for a forward pass that is already running.
SHUTDOWN_WAIT_S = 5.0
PLACEHOLDER = (
    "<p><b>No attention to show yet.</b></p>"
    "<ol><li>Choose a model above, or <i>Open…</i> a BERT folder or a .gguf file</li>"
    "<li>Type a sentence (for BERT, if you like, a second one).</li></ol>"
    "<p>A grid of every layer × head appears here. Click a head to enlarge it "
    "and read its tokens; hover a cell for its value.</p>"
)


class ModelView(QWidget):
    """The model view: picker, sentence, layers × heads grid, enlarged head, summaries.

    ``headTaken(layer, head)`` says which head to take (both from 0); the explorer reads
    it from :attr:`result` (``models.take_head.explorer_inputs``).
    """

    headTaken = Signal(int, int)
    resultChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = ModelSession()
        self._runner = LatestRunner(self)
        self._job_done: threading.Event | None = None  # set when the newest job has returned
        self.shutdown_hooks: list[Callable[[], None]] = []
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._build_inputs()
        self._build_views()
        self._build_layout()
        self.refresh_models()  # before _connect: a model found at start waits for a sentence
        if self.session.folder is not None:  # the model chosen at the last launch
            self._show_status(TYPE_HINT, "info")
        self._connect()

    # -- building ------------------------------------------------------------------------

    def _build_inputs(self) -> None:
        self.picker = ModelPicker(self.choose_folder, self.choose_file)
        self.model_combo, self.open_button = self.picker.combo, self.picker.open_button
        self.sentence_edit = QLineEdit()
        self.sentence_edit.setPlaceholderText("Type a sentence, e.g. The cat sat on the mat.")
        self.sharing_label = QLabel("")
        self.sharing_label.setWordWrap(True)
        self.sharing_label.setVisible(False)
        self.pair_edit = QLineEdit()
        self.pair_edit.setPlaceholderText("Second sentence (optional)")
        self.strategy_combo = QComboBox()
        self.strategy_combo.addItems(list(STRATEGIES))
        self.strategy_combo.setCurrentText(self.session.strategy)
        self.scores_check = QCheckBox("Raw Q·Kᵀ")
        self.scores_check.setToolTip(
            "Colour the raw scores Q·Kᵀ (before the 1/√d scale) on a blue–white–red scale "
            "centred at 0, instead of the softmax weights (0 → 1)."
        )
        self.status_label = QLabel("Choose a model and type a sentence.")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # messages quote user text
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_views(self) -> None:
        self.placeholder = QLabel(PLACEHOLDER)
        self.placeholder.setTextFormat(Qt.TextFormat.RichText)
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setMargin(24)
        self.installer = InstallPanel()
        self.installer.setVisible(False)  # shown when no model is found

        self.grid = ThumbnailGrid(self._on_head_clicked, self._on_heatmap_hovered)

        self.detail = HeadDetail(self._on_head_clicked, self._on_heatmap_hovered)
        self.hover_label = QLabel(" ")
        self.hover_label.setTextFormat(Qt.TextFormat.PlainText)  # tokens are text, never HTML
        self.hover_label.setWordWrap(True)
        self.hover_label.setMinimumHeight(2 * self.fontMetrics().lineSpacing())
        self.hover_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.take_button = QPushButton("Take into explorer")
        self.take_button.setToolTip("Take this head's tokens and Q, K, V into the explorer")
        self.take_button.setEnabled(False)

        self.summaries = SummaryPanel()
        self.summary_table = self.summaries.table  # what the tests click
        self.generation = GenerationPanel(self.session)
        self.positions = PositionPanel(self.session)
        self.analysis = AnalysisPanel(self.session)
        self.batch = BatchControls(self)  # several sentences, one a line: one padded batch

    def _build_layout(self) -> None:
        self.text_row = text_row = QHBoxLayout()  # the Compare page adds its prompt here
        text_row.addWidget(self.sentence_edit, 2)
        text_row.addWidget(self.pair_edit, 1)
        options = QHBoxLayout()
        options.addWidget(QLabel("Strategy:"))
        options.addWidget(self.strategy_combo)
        options.addWidget(self.scores_check)
        options.addWidget(self.batch.toggle)
        options.addStretch(1)
        options.addWidget(PassProgress(self._runner, self._show_status))  # long passes: Stop
        head_panel = QWidget()
        head_layout = QVBoxLayout(head_panel)
        head_layout.setContentsMargins(0, 0, 0, 0)
        head_layout.addWidget(self.detail, 1)
        under_head = QHBoxLayout()
        under_head.addWidget(self.hover_label, 1)
        under_head.addWidget(self.take_button, 0, Qt.AlignmentFlag.AlignTop)
        head_layout.addLayout(under_head)
        # The enlarged head and the summaries share one pane, each with all of its room.
        self.lower_tabs = LowerTabs()  # short names that fit the dock whole
        self.lower_tabs.add(head_panel, "Head", "The selected head, enlarged")
        self.lower_tabs.add(self.summaries, "Summary", "One summary per head, as a table")
        self.lower_tabs.add(self.generation, "Generate", "A decoder writes a continuation")
        self.lower_tabs.add(self.positions, "Positions", "How RoPE turns q·k with distance")
        scroll = QScrollArea(widgetResizable=True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.analysis)  # its rows scroll: the dock stays narrow (≤ 360 px)
        self.lower_tabs.add(scroll, "Analysis", "Head scores, rollout, logit lens, ablation")
        # The grid above the tabs, or beside them when that gives bigger cells.
        self._heads = heads = HeadsSplitter(self.grid, self.lower_tabs, self.detail)

        self._pages = QStackedWidget()
        start_page = QWidget()
        start_layout = QVBoxLayout(start_page)
        start_layout.setContentsMargins(0, 0, 0, 0)
        start_layout.addWidget(self.placeholder, 1)
        start_layout.addWidget(self.installer)
        self._pages.addWidget(start_page)
        heads_page = QWidget()
        heads_layout = QVBoxLayout(heads_page)
        heads_layout.setContentsMargins(0, 0, 0, 0)
        heads_layout.addWidget(self.sharing_label)
        heads_layout.addWidget(heads, 1)
        self._pages.addWidget(heads_page)
        self._pages.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        # A long pass's finished layers in the grid (page 1) while the rest run.
        self.passes = PassPreviews(self._runner, self.grid, self.session, self._pages)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)  # every pixel counts in a side dock
        layout.addWidget(self.picker)
        layout.addLayout(text_row)
        layout.addLayout(options)
        layout.addWidget(self.batch)
        layout.addWidget(self.status_label)
        layout.addWidget(self._pages, 1)

    def _connect(self) -> None:
        events = self.session.events
        events.request.connect(self._debounce.start)  # restarts: the newest input wins
        events.result.connect(self._on_result)
        events.selection.connect(self._on_selection)
        events.values.connect(self._refresh_images)
        events.message.connect(self._show_status)
        self._debounce.timeout.connect(self.compute_now)
        self._runner.finished.connect(self.session.accept)
        self.passes.restore.connect(self._restore_grid)
        self._runner.failed.connect(lambda message: self._show_status(message, "error"))

        self.open_button.clicked.connect(self.choose_folder)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        self.sentence_edit.textChanged.connect(self.session.set_text)
        self.pair_edit.textChanged.connect(self.session.set_pair)
        self.strategy_combo.currentTextChanged.connect(self.session.set_strategy)
        self.scores_check.toggled.connect(self.session.set_show_scores)
        self.summaries.combo.currentIndexChanged.connect(self._refresh_summaries)
        self.summary_table.cellClicked.connect(self._on_summary_clicked)
        self.take_button.clicked.connect(self.take_head)
        self.generation.started.connect(lambda: self.lower_tabs.setCurrentWidget(self.generation))
        self.generation.showRequested.connect(lambda text: self.set_sentence(text, None, True))
        self.installer.installed.connect(self._on_installed)
        self.analysis.probeRequested.connect(self.set_sentence)
        self.analysis.headOpened.connect(lambda *_: self.lower_tabs.setCurrentIndex(0))

    # -- what the window and the tests read ----------------------------------------------

    @property
    def result(self) -> ModelAttention | None:
        """The newest computed attention, or None."""
        return self.session.result

    @property
    def selected_head(self) -> Head:
        """(layer, head) shown enlarged and taken by the button."""
        return self.session.selected_head

    @property
    def busy(self) -> bool:
        """True while a request waits for its debounce or its worker, a generation runs, or
        a long text's enlarged head is computed."""
        busy = self._debounce.isActive() or self._runner.is_busy() or self.generation.busy
        return busy or self.detail.busy

    @property
    def _thumbnails(self) -> dict[Head, tuple[pg.ViewBox, HeatmapItem]]:
        return self.grid.thumbnails

    def current_folder(self) -> str | None:
        """The folder of the chosen model, or None."""
        return self.picker.current_folder()

    # -- what the user (or a test acting for one) does -----------------------------------

    def refresh_models(self) -> None:
        """List the models found in the hub cache and in model packages."""
        try:
            found = find_models()
        except OSError as exc:
            self._show_status(f"Could not search for models: {exc}", "error")
            found = []
        self.picker.fill(found)  # at the first fill, the model chosen at the last launch
        self.session.set_folder(self.current_folder())
        nothing = not found and self.model_combo.count() == 0
        self.installer.setVisible(nothing or self.installer.busy)
        if nothing:
            self._show_status(
                f"No model found: open a BERT folder or a .gguf file, or {SMOLLM2_INSTALL}.",
                "info",
            )

    def set_model_folder(self, folder: str | Path) -> None:
        """Add a model folder to the picker (if new) and choose it; recompute after the pause."""
        index = self.picker.index_of(folder)
        if index == self.model_combo.currentIndex():
            self._debounce.start()  # the same folder again: run it again
        else:
            self.model_combo.setCurrentIndex(index)

    def set_sentence(self, text: str, pair: str | None = None, show_head: bool = False) -> None:
        """Type ``text`` (and ``pair``) as the user would; recompute after the pause.

        ``show_head``: bring the enlarged head's tab to the front (a continuation shown).
        """
        self.sentence_edit.setText(text)
        if pair is not None:
            self.pair_edit.setText(pair)
        if show_head:
            self.lower_tabs.setCurrentIndex(0)

    def set_show_scores(self, show: bool) -> None:
        """Show raw scores (True) or softmax weights (False)."""
        self.scores_check.setChecked(show)

    def select_head(self, layer: int, head: int) -> None:
        """Enlarge (layer, head) and make it the one the button takes."""
        self.session.select_head(layer, head)

    @Slot()
    def choose_folder(self) -> None:
        """Ask for a model folder and add it to the picker."""
        folder = QFileDialog.getExistingDirectory(self, "Open a BERT model folder")
        if folder:
            self.set_model_folder(folder)

    @Slot()
    def choose_file(self) -> None:
        """Ask for a .gguf decoder file and add it to the picker."""
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model file", "", "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.set_model_folder(path)

    @Slot()
    def compute_now(self) -> None:
        """Send the current model, sentence and strategy to the worker (newest wins)."""
        self._debounce.stop()
        if self.session.folder is not None and not self.session.text.strip():
            self._runner.cancel(quiet=True)  # no sentence yet: a hint, not an error
            self._show_status(TYPE_HINT, "info")
            return
        request = self.session.start()
        if request is None:
            # Incomplete now (an emptied sentence): an answer to an older request must
            # not arrive and overwrite the message that says why.
            self._runner.cancel(quiet=True)
            return
        self._job_done = self.passes.submit(request)  # set when the job has returned

    @Slot()
    def take_head(self) -> None:
        """Emit ``headTaken`` with the selected (layer, head), or say there is nothing yet."""
        if self.session.result is None:
            self.session.events.message.emit("Nothing to take yet: type a sentence first.", "error")
            return
        self.headTaken.emit(*self.session.selected_head)

    def shutdown(self) -> None:
        """Stop the debounce and the running request (its late answer is dropped).

        Waits up to ``SHUTDOWN_WAIT_S`` for a forward pass already under way, so no
        work outlives the window; whatever it would still report goes nowhere.
        """
        self._debounce.stop()
        remember_dock_width(self)
        self.generation.shutdown()
        self.analysis.shutdown()
        for stop in self.shutdown_hooks:  # pages attached from outside (the Compare page)
            stop()
        self.installer.shutdown()
        self.detail.shutdown()
        self._runner.cancel()  # new ticket: an answer still on its way is stale
        if self._job_done is not None:
            self._job_done.wait(SHUTDOWN_WAIT_S)
            self._job_done = None

    def _hold_detail_width(self) -> None:
        """The enlarged head keeps the width its axes need; the grid is arranged knowing it."""
        self.detail.hold_width()
        self._heads.arrange()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    # -- user edits into the session -----------------------------------------------------

    def _on_installed(self, package: Installable) -> None:
        """Look for models again and open the one just installed (with a sample sentence)."""
        forget_import_caches()
        self.refresh_models()
        label = f"(package {package.distribution})"
        index = next(
            (i for i in range(self.model_combo.count()) if label in self.model_combo.itemText(i)),
            -1,
        )
        if index < 0:
            self._show_status(
                f"Installed {package.label}, but it is not found here; restart the app.", "error"
            )
            return
        self.model_combo.setCurrentIndex(index)
        if not self.sentence_edit.text().strip():
            self.set_sentence(SAMPLE_SENTENCE)
        self._show_status(f"Installed {package.label}; opening it…", "info")

    @Slot()
    def _on_model_changed(self, *_: object) -> None:
        self.session.set_folder(self.current_folder())

    def _on_head_clicked(self, head: Head) -> None:
        self.select_head(*head)

    def _on_summary_clicked(self, layer: int, head: int) -> None:
        self.select_head(layer, head)
        self.lower_tabs.setCurrentIndex(0)  # the head the user picked, enlarged

    def _on_heatmap_hovered(self, head: Head | None, cell: tuple[int, int] | None) -> None:
        if cell is None or (head is not None and self.passes.active):  # a pass's preview
            self._on_hover(None)
        else:
            self._on_hover((*(head or self.selected_head), *cell))

    def _on_hover(self, where: tuple[int, int, int, int] | None) -> None:
        text = self.session.describe(*where) if where is not None else ""
        self.hover_label.setText(text or " ")

    # -- the session pushed into the widgets ---------------------------------------------

    def _show_status(self, text: str, level: str) -> None:
        self.status_label.setStyleSheet("color: #b00020;" if level == "error" else "")
        self.status_label.setText(text)

    def _on_result(self) -> None:
        result = self.session.result
        assert result is not None  # the result event only follows a new result
        self.passes.end()
        self._show_result_grid()
        sharing = self.session.sharing()
        self.sharing_label.setText(sharing)
        self.sharing_label.setVisible(bool(sharing))
        for edit in (self.pair_edit, self.strategy_combo):
            edit.setEnabled(not result.causal)  # a decoder reads one text, batched
            edit.setToolTip(
                "A decoder reads one text, in one batched pass" if result.causal else ""
            )
        self._pages.setCurrentIndex(1)
        self.detail.set_tokens(result.tokens)
        self._hold_detail_width()
        QTimer.singleShot(0, self, self._hold_detail_width)  # again once the axes have tokens
        self._refresh_images()
        self._refresh_summaries()
        self.take_button.setEnabled(True)
        self.resultChanged.emit()

    def _on_selection(self, layer: int, head: int) -> None:
        self.grid.set_selected((layer, head))
        self.summaries.set_selected((layer, head))
        self._refresh_detail()

    def _show_result_grid(self) -> None:
        result = self.session.result
        assert result is not None
        self.grid.build(*result.weights.shape[:2])
        self.grid.set_groups(result.kv_heads)
        self.grid.set_layer_kinds(result.layer_kinds, result.window)

    def _restore_grid(self) -> None:
        """A pass ended without a result (Stop, a failure): the previous result's grid again."""
        self._show_result_grid()
        self._refresh_images()

    @Slot()
    def _refresh_images(self, *_: object) -> None:
        partial = self.passes.redraw()  # a long pass under way: its layers, in the new colours
        if self.session.result is None:
            return
        shown, long = self.session.shown(), self.session.result.long
        if not partial and not self.passes.shows(long, shown.levels, shown.colormap):
            table = lut(shown.colormap)
            self.grid.set_images(shown.grid, shown.levels, table, shown.values.shape[-1])
        self._on_selection(*self.session.selected_head)

    def _refresh_detail(self) -> None:
        if self.session.result is None:
            return
        # (T, T) or blocks of it (row = query i, column = key j); a long text's in the background
        self.detail.show_head(self.session.shown(), *self.session.selected_head)

    @Slot()
    def _refresh_summaries(self, *_: object) -> None:
        result = self.session.result
        if result is None:
            return
        values = result.summaries().get(self.summaries.summary())
        self.summaries.set_values(values, self.session.selected_head)
