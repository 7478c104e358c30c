"""The Model dock's batch: several sentences, one a line, run as ONE padded, masked batch.

A "Batch" toggle swaps the one-line sentence box for a box of one sentence a line;
the model then runs them together (:func:`attn_explorer.models.batch.run_batch`): the
(B, H, T, T) tensor of the seed's dimension table, made real. Once a batch result is
in, a sentence selector says which sentence (the batch axis) the heads grid and the
enlarged head show, a line spells out B, H and T, and "Show padding" draws the
sentence at the batch's full length T, its padded positions masked out (weight 0).

The widget keeps no copy of the result: a choice hands the session the sentence the
batch already holds (``ModelSession.accept``), and every view repaints from there.
It names the three axes for the lessons (``model_sentences``, ``model_heads``,
``model_tokens``: :data:`attn_explorer.lessons.registry.HIGHLIGHT_TARGETS`).
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.models.batch import BatchAttention, SentenceOfBatch
from attn_explorer.models.session import ModelSession

#: Lines the sentences box shows before it scrolls.
BOX_LINES = 4
#: Characters of a sentence shown in the selector.
SHOWN_CHARS = 36


def shape_text(sentence: SentenceOfBatch) -> str:
    """The three axes of the batch in one line: which number is B, which H, which T."""
    batch = sentence.batch
    assert batch is not None
    b, layers, h, t = batch.weights.shape[:4]
    return (
        f"B = {b} sentences (the selector) · H = {h} heads (the grid's columns) · "
        f"T = {t} tokens (the head's axes): weights ({b}, {h}, {t}, {t}) in each of "
        f"{layers} layers."
    )


class ModelDock(Protocol):
    """What the controls read of the Model dock (``ModelView``; no import: no cycle)."""

    @property
    def session(self) -> ModelSession: ...
    @property
    def sentence_edit(self) -> QLineEdit: ...
    @property
    def pair_edit(self) -> QLineEdit: ...
    @property
    def grid(self) -> QWidget: ...
    @property
    def detail(self) -> QWidget: ...


class BatchControls(QWidget):
    """Sentence selector, "Show padding", sentences box and shape line, shown while ``toggle``
    (which the dock places in its options row) is on."""

    def __init__(self, view: ModelDock) -> None:
        super().__init__()  # the dock's layout adopts it
        self.setObjectName("model_sentences")  # the batch axis, for the lessons
        view.grid.setObjectName("model_heads")  # the head axis
        view.detail.setObjectName("model_tokens")  # the sequence axis (its token axes)
        self.view = view
        self.session = view.session
        self._batch: BatchAttention | None = None  # the batch the selector lists
        self._index = 0  # the sentence the user chose, kept for the next batch

        self.toggle = QCheckBox("Batch")
        self.toggle.setToolTip(
            "Run several sentences, one a line, as one batch: right-padded to the longest, "
            "with an attention mask so no token attends to padding"
        )
        self.selector = QComboBox()
        self.selector.setToolTip("Which sentence of the batch (the batch axis B) is shown")
        self.selector.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.selector.setMinimumContentsLength(8)
        self.padding_check = QCheckBox("Show padding")
        self.padding_check.setToolTip(
            "Draw the sentence at the batch's length T: its padded positions are masked out "
            "(weight exactly 0); off: only its own tokens, as if it ran alone"
        )
        self.sentences_edit = QPlainTextEdit()
        self.sentences_edit.setPlaceholderText("One sentence a line:\nThe cat sat.\nA dog ran.")
        self.sentences_edit.setTabChangesFocus(True)
        lines = BOX_LINES * self.fontMetrics().lineSpacing() + 12
        self.sentences_edit.setFixedHeight(lines)
        self.shape_label = QLabel("")
        self.shape_label.setWordWrap(True)
        self.shape_label.setTextFormat(Qt.TextFormat.PlainText)

        row = QHBoxLayout()  # the toggle sits in the dock's options row: no room taken when off
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.selector, 1)
        row.addWidget(self.padding_check)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.sentences_edit)
        layout.addWidget(self.shape_label)
        self._show_batch_widgets()

        self.toggle.toggled.connect(self._on_toggled)
        self.sentences_edit.textChanged.connect(self._on_sentences_changed)
        self.selector.currentIndexChanged.connect(self._on_sentence_chosen)
        self.padding_check.toggled.connect(self._on_padding_toggled)
        self.session.events.result.connect(self._on_result)

    # -- what the user (or a test acting for one) does -----------------------------------

    def set_sentences(self, sentences: list[str]) -> None:
        """Turn the batch on and type ``sentences``, one a line; recompute after the pause."""
        self.toggle.setChecked(True)
        self.sentences_edit.setPlainText("\n".join(sentences))

    def select_sentence(self, index: int) -> None:
        """Show sentence ``index`` (from 0) of the batch."""
        self.selector.setCurrentIndex(index)

    def set_show_padding(self, show: bool) -> None:
        self.padding_check.setChecked(show)

    @property
    def sentence(self) -> SentenceOfBatch | None:
        """The sentence of a batch shown now, or None (no batch result)."""
        result = self.session.result
        return result if isinstance(result, SentenceOfBatch) else None

    # -- user edits into the session -----------------------------------------------------

    def _on_toggled(self, on: bool) -> None:
        view = self.view
        if on and not self.sentences_edit.toPlainText().strip():
            with QSignalBlocker(self.sentences_edit):
                self.sentences_edit.setPlainText(view.sentence_edit.text())
        for edit in (view.sentence_edit, view.pair_edit):
            edit.setVisible(not on)
        self._show_batch_widgets()
        if on:
            self.session.set_pair("")  # a batch reads one sentence a line
            self.session.set_text(self.sentences_edit.toPlainText())
        else:
            self.session.set_text(view.sentence_edit.text())
            self.session.set_pair(view.pair_edit.text())

    def _on_sentences_changed(self) -> None:
        if self.toggle.isChecked():
            self.session.set_text(self.sentences_edit.toPlainText())

    def _on_sentence_chosen(self, index: int) -> None:
        sentence = self.sentence
        if sentence is not None and index >= 0 and index != sentence.index:
            self._index = index
            self.session.accept(sentence.other(index=index))

    def _on_padding_toggled(self, padded: bool) -> None:
        sentence = self.sentence
        if sentence is not None and padded != sentence.padded:
            self.session.accept(sentence.other(padded=padded))

    # -- the session pushed into the widgets ---------------------------------------------

    def _on_result(self) -> None:
        sentence = self.sentence
        batch = None if sentence is None else sentence.batch
        if sentence is None or batch is None:
            self._batch = None
            self._show_batch_widgets()
            return
        if batch is not self._batch:  # a new batch: list it, keep the user's sentence
            self._batch = batch
            with QSignalBlocker(self.selector):
                self.selector.clear()
                for number, text in enumerate(batch.texts, 1):
                    short = text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
                    self.selector.addItem(f"{number}: {short}")
            wanted = min(self._index, batch.size - 1), self.padding_check.isChecked()
            if (sentence.index, sentence.padded) != wanted:
                self.session.accept(sentence.other(*wanted))
                return
        with QSignalBlocker(self.selector):
            self.selector.setCurrentIndex(sentence.index)
        self.shape_label.setText(shape_text(sentence))
        self._show_batch_widgets()

    def _show_batch_widgets(self) -> None:
        on = self.toggle.isChecked()
        self.setVisible(on)
        self.selector.setEnabled(self._batch is not None)
        self.padding_check.setEnabled(self._batch is not None)
        if self._batch is None:
            self.shape_label.setText(
                "Type 2 or more sentences, one a line: they run as one batch." if on else ""
            )
