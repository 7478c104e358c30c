"""The model view's "Generate" tab: a decoder writes one token at a time, in the background.

A thin view over the generation part of :class:`~attn_explorer.models.session.ModelSession`.
**Generate** sends the sentence as the prompt (optionally as a chat turn) to
:func:`~attn_explorer.models.generation.generate_tokens` in a
:class:`~attn_explorer.ui.common.workers.LatestRunner`; each new token comes back by signal on
the GUI thread and is written at once, with a progress bar (tokens so far of the most
asked for). The plot shows the selected head's attention rows, one per new token: the
newest row is the new query against every cached key (the KV cache), so the staircase
grows a row and a column per token. **Stop** ends it, keeping what was written; the
window is never blocked. Before anything is written an empty state says what to do (no
empty axes); once it is, **Show in grid** types the prompt and its continuation into the
sentence box, so the grid and the enlarged head show every token's attention.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.generation import GenerationState, generate_tokens
from attn_explorer.models.session import ModelSession, head_name
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.token_axis import TEXT_RGB, TokenAxis
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.model_grid import HeatmapItem, color_map

#: The max-new-tokens spin box: its default and its largest value.
DEFAULT_NEW_TOKENS, MOST_NEW_TOKENS = 20, 256
#: The colour of the written continuation in the output (the prompt stays plain).
NEW_TEXT_RGB = "#1f5fbf"
#: What the tab says before anything is written, and while the first token is computed.
EMPTY_TEXT = (
    "Nothing written yet. Type a prompt above and press Generate: a decoder (.gguf) "
    "writes one token at a time, and each new token's attention row appears here."
)
WAITING_TEXT = "Writing the first token…"


class _TokenSignal(QObject):
    """Carries (generation id, GenerationState) from the worker to the GUI thread."""

    token = Signal(int, object)


class GenerationPanel(QWidget):
    """Generate / Stop, max new tokens, chat; the written text, progress and growing rows.

    ``started`` is emitted when a generation begins (the model view shows this tab);
    ``showRequested(text)`` when the user asks to see the prompt and its continuation in
    the grid (the model view types ``text`` into its sentence box).
    """

    started = Signal()
    showRequested = Signal(str)

    def __init__(self, session: ModelSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._runner = LatestRunner(self)
        self._tokens = _TokenSignal(self)
        self._generation_id = 0  # a token from an older (stopped) generation is dropped
        self._job_done: threading.Event | None = None
        self._prompt, self._chat = "", False  # what the shown generation continues
        self._build()
        self._connect()
        self._refresh()

    def _build(self) -> None:
        self.generate_button = QPushButton("Generate")
        self.generate_button.setToolTip(
            "Continue the sentence with the model, one token at a time (greedy, KV cache)"
        )
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop writing; the tokens so far stay")
        self.stop_button.setEnabled(False)
        self.max_spin = QSpinBox()
        self.max_spin.setRange(1, MOST_NEW_TOKENS)
        self.max_spin.setValue(DEFAULT_NEW_TOKENS)
        self.max_spin.setToolTip("The most new tokens to write")
        self.chat_check = QCheckBox("chat")
        self.chat_check.setToolTip(
            "Send the sentence as a user's turn in the model's chat template; the model answers"
        )
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m tokens")
        self.progress.setRange(0, DEFAULT_NEW_TOKENS)
        self.progress.setValue(0)
        self.show_button = QPushButton("Show in grid")
        self.show_button.setToolTip(
            "Type the prompt and what was written into the sentence box: the grid and the "
            "Head tab then show every token's attention, the new ones included"
        )
        self.show_button.setEnabled(False)
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setMargin(12)
        self.output = QTextEdit()
        self.output.setReadOnly(True)
        self.output.setMinimumHeight(3 * self.fontMetrics().lineSpacing())
        self.output.setMaximumHeight(4 * self.fontMetrics().lineSpacing())  # the rows need room

        left, bottom = TokenAxis("left"), TokenAxis("bottom")
        self.plot = pg.PlotWidget(axisItems={"left": left, "bottom": bottom})
        self.plot.setBackground("w")
        self.plot.setMinimumSize(200, 120)  # with its title above: 140 px in all
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setContentsMargins(0, 8, 0, 0)  # the first row's label and the bar's "1" whole
        # The title is a label above the plot, not the plot's own: it wraps in a narrow dock,
        # and its width never pushes the colour bar past the right edge.
        self.caption = QLabel("")
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        box = item.getViewBox()
        box.invertY(True)  # the first step at the top, the newest row at the bottom
        box.setMouseEnabled(False, False)
        # Rows and scale are named in the caption: a vertical axis title is cut in a plot
        # this short (a 650-px window gives it ~70 px).
        bottom.setLabel("cached key j")
        self.image = HeatmapItem(None, lambda head: None, lambda head, cell: None)
        item.addItem(self.image)
        colorbar = pg.ColorBarItem(
            values=(0, 1), colorMap=color_map("sequential"), interactive=False,
            colorMapMenu=False, width=14,
        )  # fmt: skip
        colorbar.setImageItem(self.image, insert_in=item)
        colorbar.axis.setTicks([[(0.0, "0"), (0.5, "0.5"), (1.0, "1")]])  # never crowded
        colorbar.axis.setTextPen(TEXT_RGB)
        colorbar.axis.setPen(TEXT_RGB)

        # Two short rows, not one long one: the dock may be narrow.
        controls = QHBoxLayout()
        controls.addWidget(self.generate_button)
        controls.addWidget(self.stop_button)
        controls.addWidget(self.progress, 1)
        options = QHBoxLayout()
        options.addWidget(QLabel("Most new tokens:"))
        options.addWidget(self.max_spin)
        options.addWidget(self.chat_check)
        options.addStretch(1)
        written = QWidget()
        written_layout = QVBoxLayout(written)
        written_layout.setContentsMargins(0, 0, 0, 0)
        written_layout.addWidget(self.output)
        under_text = QHBoxLayout()  # the rows' title, and the offer to see them in the grid
        under_text.addWidget(self.caption, 1)
        under_text.addWidget(self.show_button, 0, Qt.AlignmentFlag.AlignTop)
        written_layout.addLayout(under_text)
        written_layout.addWidget(self.plot, 1)
        self.pages = QStackedWidget()  # the empty state, or the text and its rows
        self.pages.addWidget(self.empty_label)
        self.pages.addWidget(written)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(controls)
        layout.addLayout(options)
        layout.addWidget(self.pages, 1)

    def _connect(self) -> None:
        self.generate_button.clicked.connect(self.generate)
        self.stop_button.clicked.connect(self.stop)
        self.show_button.clicked.connect(self.show_in_grid)
        self._tokens.token.connect(self._on_token)
        self._runner.finished.connect(self._on_finished)
        self._runner.failed.connect(self._on_failed)
        self._runner.busy.connect(self._on_busy)
        self.session.events.generation.connect(self._refresh)
        self.session.events.selection.connect(lambda *_: self._refresh_rows())
        self.session.events.result.connect(self._refresh_rows)

    # -- what the user (or a test acting for one) does -----------------------------------

    @property
    def busy(self) -> bool:
        """True while a generation is running."""
        return self._runner.is_busy()

    @Slot()
    def generate(self) -> None:
        """Start writing a continuation of the sentence (a running one is replaced)."""
        request = self.session.start_generation(self.max_spin.value(), self.chat_check.isChecked())
        if request is None:
            return
        self._prompt, self._chat = self.session.text, request.chat
        self._generation_id += 1
        generation_id, done = self._generation_id, threading.Event()
        cache, signal = self.session.cache, self._tokens.token
        self.progress.setRange(0, request.max_new_tokens)

        def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            try:
                return generate_tokens(
                    cache, request, lambda state: signal.emit(generation_id, state), should_stop
                )
            finally:
                done.set()

        self._job_done = done
        self._runner.submit(job)
        self.started.emit()

    @Slot()
    def stop(self) -> None:
        """Stop the running generation; what it wrote stays on screen."""
        if self._runner.is_busy():
            self._generation_id += 1  # tokens still on their way are stale
            self._runner.cancel(quiet=True)
            self.session.stop_generation()

    def full_text(self) -> str:
        """The prompt and what was written after it, as the model read them ('' if nothing).

        A chat turn is written out in the model's template, so the grid reads what the
        model read.
        """
        state = self.session.generation
        if state is None or not state.tokens:
            return ""
        prompt = self._prompt
        model = self.session.cache.loaded(self.session.folder or "")
        if self._chat and isinstance(model, DecoderModel):
            prompt = model.chat_prompt(prompt)
        return prompt + state.text

    @Slot()
    def show_in_grid(self) -> None:
        """Ask the model view to show the prompt and its continuation in the grid."""
        text = self.full_text()
        if text and not self.busy:
            self.showRequested.emit(text)

    def shutdown(self) -> None:
        """Stop, and wait a little for the token being computed (no work outlives the window)."""
        self.stop()
        if self._job_done is not None:
            self._job_done.wait(5.0)
            self._job_done = None

    # -- the worker's answers ------------------------------------------------------------

    def _on_token(self, generation_id: int, state: GenerationState) -> None:
        if generation_id == self._generation_id and self._runner.is_busy():
            self.session.accept_generation(state)

    def _on_finished(self, state: object) -> None:
        if isinstance(state, GenerationState):
            self.session.accept_generation(state)

    def _on_failed(self, message: str) -> None:
        self.session.events.message.emit(message.split(": ", 1)[-1], "error")

    def _on_busy(self, busy: bool) -> None:
        self.generate_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
        self._refresh()

    # -- the session pushed into the widgets ---------------------------------------------

    @Slot()
    def _refresh(self) -> None:
        state = self.session.generation
        self.show_button.setEnabled(bool(state and state.done and state.tokens) and not self.busy)
        if state is None or not state.rows:
            self.empty_label.setText(WAITING_TEXT if self.busy else EMPTY_TEXT)
            self.pages.setCurrentIndex(0)
        else:
            self.pages.setCurrentIndex(1)
        if state is None:
            self.output.clear()
            self.progress.setValue(0)
            self._refresh_rows()
            return
        prompt = html.escape(self._prompt)
        written = html.escape(state.text)
        self.output.setHtml(
            f'<span style="white-space: pre-wrap">{prompt}'
            f'<b style="color: {NEW_TEXT_RGB}">{written}</b></span>'
        )
        self.progress.setRange(0, state.max_new_tokens)
        self.progress.setValue(len(state.tokens))
        self._refresh_rows()

    @Slot()
    def _refresh_rows(self) -> None:
        """The selected head's rows, one per new token; NaN (blank) past each row's keys."""
        state = self.session.generation
        item = self.plot.getPlotItem()
        if state is None or not state.rows:
            self.image.clear()
            self.caption.setText("")
            return
        layer, head = self.session.selected_head
        n_layers, n_heads = state.rows[0].shape[:2]
        layer, head = min(layer, n_layers - 1), min(head, n_heads - 1)
        rows = state.matrix(layer, head)  # (S, t): row s = step s's query against its keys
        self.image.setImage(rows, levels=(0.0, 1.0), lut=lut("sequential"), autoLevels=False)
        for name, tokens in (("left", state.query_tokens()), ("bottom", state.key_tokens())):
            axis = item.getAxis(name)
            if isinstance(axis, TokenAxis):
                axis.set_tokens(tokens)
        name = head_name(layer, head)
        self.caption.setText(f"{name} weights: a row per new token, newest last")
        self.caption.setToolTip(
            "Softmax weights of each new token's query (one row each, the newest at the "
            "bottom) over every cached key"
        )
        item.getViewBox().setRange(xRange=(0, rows.shape[1]), yRange=(0, rows.shape[0]), padding=0)
