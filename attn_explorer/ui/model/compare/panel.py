"""The model dock's Compare view: the sentence against a corrupted prompt (issue 35).

The corrupted prompt is typed beside the sentence (``corrupt_edit``, placed there with a
"Compare" button by :func:`attach_compare`, which shows this view in place of the grid);
after a pause in typing (or a new result of the sentence) the comparison runs in a
worker: both runs' logit differences (shown large), both tokenizations aligned with the
tokens that differ marked, both runs' next-token bars (a click picks the answer or the
wrong token; both can be typed too), the direct logit attribution (its total beside the
logit differences) and the corrupted run's heads. Tabs: "Next token", "Head" (the head
under view in both runs, :mod:`.side_by_side`), "Patching" (:mod:`.patching_page`) and
"Attribution" (:mod:`.attribution_page`).

A bad pair (:class:`~attn_explorer.analysis.compare.PairError`) gives one line here, in
this view's words, and the previous comparison stays on screen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.analysis.compare import ENCODER_REASON, PairError
from attn_explorer.analysis.next_token import Candidate, probabilities
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.errors import TextError
from attn_explorer.models.session import ModelSession
from attn_explorer.state.storage.safe_files import write_atomic
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.compare.attribution_page import AttributionPage
from attn_explorer.ui.model.compare.charts import ChartExport, TwoRunBars
from attn_explorer.ui.model.compare.patching_page import PatchingPage
from attn_explorer.ui.model.compare.side_by_side import SideBySide
from attn_explorer.ui.model.compare.state import (
    CompareOutcome,
    CompareState,
    compare_job,
    comparison_json,
)

#: Pause after the last key stroke in the corrupted prompt, answer or wrong box.
COMPARE_DEBOUNCE_MS = 300
HINT = "Type a corrupted prompt beside the sentence to compare the two runs."
#: How this view words each kind of bad pair, before the analysis' own sentence.
PAIR_WORDS = {
    "token_count": "Corrupted prompt",
    "answer": "Answer",
    "wrong": "Wrong token",
    "equal": "Nothing to compare",
    "encoder": "Compare needs a decoder",
}
#: What else the window offers, after the analysis' own next step.
PAIR_NEXT = {"answer": "or click one in the bars", "wrong": "or click one in the bars"}


#: The page is taller than a short dock: it scrolls rather than squeezing its charts.
COMPARE_MIN_HEIGHT = 1000


class ModelViewParts(Protocol):
    """What :func:`attach_compare` uses of the model view."""

    session: ModelSession
    pair_edit: QLineEdit
    text_row: QHBoxLayout
    shutdown_hooks: list[Callable[[], None]]
    _pages: QStackedWidget

    def _show_status(self, text: str, level: str) -> None: ...


def pair_line(error: PairError) -> str:
    """A bad pair in this view's words: the field at fault, then the analysis' reason
    (which says what to do)."""
    kind = getattr(error, "kind", "")
    words, after = PAIR_WORDS.get(kind, "Cannot compare"), PAIR_NEXT.get(kind, "")
    reason = str(error).rstrip(".")
    return f"{words}: {reason}, {after}." if after else f"{words}: {reason}."


class TokenAlignment(QTableWidget):
    """Both tokenizations, one column per position; the positions that differ marked."""

    def __init__(self) -> None:
        super().__init__(2, 0)
        self.setVerticalHeaderLabels(["clean", "corrupted"])
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setDefaultSectionSize(60)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # two rows
        self.differ: list[int] = []  # the positions (from 0) where the tokens differ
        self._fit_height()

    def _fit_height(self) -> None:
        """Both rows, the header and the horizontal scroll bar, nothing cut."""
        rows = self.rowHeight(0) + self.rowHeight(1)
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        header = self.horizontalHeader().sizeHint().height()
        self.setFixedHeight(rows + header + bar + 2 * self.frameWidth() + 2)

    def show_tokens(self, clean: list[str], corrupt: list[str]) -> None:
        """Fill both rows; mark (bold, shaded) the positions where the tokens differ."""
        self.setColumnCount(max(len(clean), len(corrupt)))
        self.setHorizontalHeaderLabels([str(n + 1) for n in range(self.columnCount())])
        self.differ = []
        for column in range(self.columnCount()):
            a = clean[column] if column < len(clean) else ""
            b = corrupt[column] if column < len(corrupt) else ""
            differs = a != b
            if differs:
                self.differ.append(column)
            for row, token in enumerate((a, b)):
                cell = QTableWidgetItem(repr(token) if token else "")
                cell.setToolTip(f"position {column + 1}: {token!r}" + (" (differs)" * differs))
                if differs:
                    font = cell.font()
                    font.setBold(True)
                    cell.setFont(font)
                    cell.setBackground(Qt.GlobalColor.yellow)
                    cell.setForeground(Qt.GlobalColor.black)  # readable in both palettes
                self.setItem(row, column, cell)
        self.resizeColumnsToContents()
        self._fit_height()


class ComparePanel(QWidget):
    """The Compare view (see the module docstring).

    ``headOpened(layer, head)``: a patching cell was clicked (the head is selected and
    this view's "Head" tab shows it in both runs).
    """

    headOpened = Signal(int, int)

    def __init__(self, session: ModelSession, report: Callable[[str, str], None]) -> None:
        super().__init__()
        self.session, self.report = session, report
        self.corrupt_edit: QLineEdit | None = None  # beside the sentence (attach_compare)
        self.toggle: QToolButton | None = None  # "Compare", beside it
        self.state = CompareState()
        self.runner = LatestRunner(self)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(COMPARE_DEBOUNCE_MS)
        self._build()
        self._connect()
        self._show_outcome()

    def _build(self) -> None:
        self.line = QLabel(HINT)
        self.line.setWordWrap(True)
        self.line.setTextFormat(Qt.TextFormat.PlainText)  # it quotes tokens
        self.diff_label = QLabel("")
        self.diff_label.setTextFormat(Qt.TextFormat.RichText)
        self.diff_label.setWordWrap(True)
        self.answer_edit = QLineEdit()
        self.answer_edit.setPlaceholderText("answer: the clean top token")
        self.answer_edit.setToolTip("The token the clean prompt should lead to (one token)")
        self.wrong_edit = QLineEdit()
        self.wrong_edit.setPlaceholderText("wrong: the corrupted top token")
        self.wrong_edit.setToolTip("The token the corrupted prompt leads to (one token)")
        self.pick_combo = QComboBox()
        self.pick_combo.addItem("click sets answer", "answer")
        self.pick_combo.addItem("click sets wrong", "wrong")
        self.pick_combo.setToolTip("What a click on a token in the bars sets")
        self.alignment = TokenAlignment()
        self.bars = TwoRunBars(self.pick)
        self.bars_export = ChartExport(
            "next-token bars", self.bars.widget, self._bars_table, self.report
        )
        self.side = SideBySide(self.session, self.state, self.report)
        self.patching = PatchingPage(self.session, self.state, self.decoder, self.report)
        self.attribution = AttributionPage(self.state, self.report)

        next_page = QWidget()
        column = QVBoxLayout(next_page)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.pick_combo, 0, Qt.AlignmentFlag.AlignLeft)
        column.addWidget(self.bars.widget, 1)
        column.addWidget(self.bars_export, 0, Qt.AlignmentFlag.AlignRight)
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.addTab(next_page, "Next token")
        self.pages.addTab(self.side, "Head")
        self.pages.addTab(self.patching, "Patching")
        self.pages.addTab(self.attribution, "Attribution")

        tokens_row = QHBoxLayout()
        tokens_row.addWidget(self.answer_edit, 1)
        tokens_row.addWidget(self.wrong_edit, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.diff_label)
        layout.addWidget(self.line)
        layout.addLayout(tokens_row)
        layout.addWidget(self.alignment)
        layout.addWidget(self.pages, 1)
        self.json_button = QPushButton("Export comparison (JSON)…")
        self.json_button.setToolTip(
            "Save the comparison, both patching maps and the attribution as analyze writes them"
        )
        self.json_button.clicked.connect(self.export_json)
        layout.addWidget(self.json_button, 0, Qt.AlignmentFlag.AlignRight)

    def _connect(self) -> None:
        events = self.session.events
        events.compare.connect(self._on_compare_request)
        events.result.connect(self._debounce.start)  # a new sentence's run: compare again
        self._debounce.timeout.connect(self.compare_now)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(lambda text: self._say(f"Compare failed: {text}", "error"))
        self.answer_edit.textChanged.connect(self.session.set_answer)
        self.wrong_edit.textChanged.connect(self.session.set_wrong)
        self.state.events.outcome.connect(self._show_outcome)
        self.patching.headOpened.connect(self._on_head_opened)

    # -- what the panel reads ------------------------------------------------------------

    def decoder(self) -> DecoderModel | None:
        """The loaded decoder that made the current result, or None."""
        result, folder = self.session.result, self.session.folder
        model = self.session.cache.loaded(folder) if folder else None
        if result is None or not isinstance(model, DecoderModel):
            return None
        return model if model.name == result.model_name else None

    @property
    def busy(self) -> bool:
        """True while a comparison waits for its pause or its worker, or a scan runs."""
        return self._debounce.isActive() or self.runner.is_busy() or self.patching.runner.is_busy()

    # -- the user's requests -------------------------------------------------------------

    def _on_compare_request(self) -> None:
        self.set_tokens(self.session.answer, self.session.wrong)
        self._debounce.start()

    def compare_now(self) -> None:
        """Compare the sentence with the corrupted prompt in the worker (newest wins)."""
        self._debounce.stop()
        session = self.session
        if not session.corrupt.strip():
            self.runner.cancel(quiet=True)
            self.state.clear()
            self._say(HINT, "info")
            return
        if session.result is None:
            return  # the sentence's run comes first; its result asks again
        if not session.result.causal:
            self._say(pair_line(PairError("encoder", ENCODER_REASON)), "error")
            return
        model = self.decoder()
        if model is None:
            return
        job = compare_job(
            model,
            session.text,
            session.corrupt,
            session.answer if session.answer != "" else None,
            session.wrong if session.wrong != "" else None,
        )

        def guarded(progress, should_stop) -> CompareOutcome | PairError | TextError:
            try:
                return job(progress, should_stop)
            except (PairError, TextError) as exc:  # the window words it: a value, not a crash
                return exc

        self._say("Comparing the two prompts…", "info")
        self.runner.submit(guarded)

    def pick(self, token_id: int) -> None:
        """A click on a token in the bars: the answer or the wrong token, as the combo says."""
        if self.pick_combo.currentData() == "answer":
            self.session.set_answer(token_id)
        else:
            self.session.set_wrong(token_id)

    def set_tokens(self, answer: str | int, wrong: str | int) -> None:
        """Show the answer and wrong tokens in their boxes (a picked id by its text)."""
        model = self.decoder()
        for edit, value in ((self.answer_edit, answer), (self.wrong_edit, wrong)):
            if isinstance(value, int):
                text = model.tokenizer.readable(value) if model is not None else f"#{value}"
            else:
                text = value
            if edit.text() != text and not (isinstance(value, str) and edit.hasFocus()):
                with QSignalBlocker(edit):
                    edit.setText(text)

    # -- results -------------------------------------------------------------------------

    def _on_finished(self, outcome: object) -> None:
        if isinstance(outcome, PairError):
            self._say(pair_line(outcome), "error")  # the previous comparison stays
            return
        if isinstance(outcome, TextError):  # e.g. prompts too long to keep every head
            reason = str(outcome).split(": ", 1)[-1]
            self._say(f"Both prompts: {reason}.".replace("..", "."), "error")
            return
        assert isinstance(outcome, CompareOutcome)
        self.state.accept(outcome)
        c = outcome.comparison
        self._say(
            f"Compared: answer {outcome.answer!r} against {outcome.wrong!r}; the prompts "
            f"differ from position {c.first_diff + 1}.",
            "info",
        )

    def _say(self, text: str, level: str) -> None:
        self.line.setStyleSheet("color: #b00020;" if level == "error" else "")
        self.line.setText(text)

    def _show_outcome(self) -> None:
        outcome = self.state.outcome
        if outcome is None:
            self.diff_label.setText(
                "<span style='font-size:15pt'>logit difference: clean — · corrupted —</span>"
            )
            self.alignment.show_tokens([], [])
            self.bars.item.clear()
            return
        c = outcome.comparison
        total = outcome.attribution.total
        self.diff_label.setText(
            "<span style='font-size:15pt'>logit difference: "
            f"clean <b>{c.logit_diff_clean:+.3f}</b> · corrupted "
            f"<b>{c.logit_diff_corrupt:+.3f}</b></span><br>"
            f"attribution total {total:+.3f} (equals the clean run's)"
        )
        self.diff_label.setToolTip(
            "logits[last, answer] − logits[last, wrong] of each run; the attribution's "
            "components add up to the clean run's"
        )
        self.answer_edit.setPlaceholderText(f"answer: {outcome.answer!r} (default)")
        self.wrong_edit.setPlaceholderText(f"wrong: {outcome.wrong!r} (default)")
        self.alignment.show_tokens(list(c.clean_tokens), list(c.corrupt_tokens))
        ids = list(dict.fromkeys([c.answer_id, c.wrong_id, *(t.id for t in outcome.clean_top)]))
        ids += [t.id for t in outcome.corrupt_top if t.id not in ids]
        readable = {t.id: t.token for t in [*outcome.clean_top, *outcome.corrupt_top]}
        readable.setdefault(c.answer_id, outcome.answer)
        readable.setdefault(c.wrong_id, outcome.wrong)
        clean_p, corrupt_p = probabilities(c.clean_logits), probabilities(c.corrupt_logits)
        listed = [Candidate(i, readable[i], float(clean_p[i])) for i in ids]
        probs = np.stack([clean_p[ids], corrupt_p[ids]])
        self.bars.show(listed, [], probs)

    def export_json(self) -> Path | None:
        """Ask where, then write the whole comparison as JSON (after both patching maps)."""
        from attn_explorer.ui.common.settings import last_dir

        try:
            data = comparison_json(self.state)
        except ValueError as exc:
            self.report(f"Export comparison: {exc}.", "error")
            return None
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export comparison",
            str(Path(last_dir()) / "comparison.json"),
            "JSON (*.json)",
        )
        if not path:
            return None
        try:
            text = json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"
            written = write_atomic(path, text.encode("utf-8"))
        except (OSError, ValueError) as exc:
            self.report(f"Export failed: {exc}", "error")
            return None
        self.report(f"Exported {written}", "info")
        return written

    def _on_head_opened(self, layer: int, head: int) -> None:
        self.pages.setCurrentWidget(self.side)
        self.headOpened.emit(layer, head)

    def _bars_table(self):
        if self.state.outcome is None or not self.bars.ids:
            return None
        c = self.state.outcome.comparison
        ids = self.bars.ids
        probs = np.stack(
            [probabilities(c.clean_logits)[ids], probabilities(c.corrupt_logits)[ids]], axis=1
        )
        return self.bars.labels, ["clean", "corrupted"], probs

    def shutdown(self) -> None:
        self._debounce.stop()
        self.runner.cancel(quiet=True)
        self.patching.shutdown()


def compare_of(view: object) -> ComparePanel:
    """The Compare page :func:`attach_compare` gave ``view``; ValueError if none."""
    panel = getattr(view, "compare", None)
    if not isinstance(panel, ComparePanel):
        raise ValueError("the Model dock has no Compare page")
    return panel


def attach_compare(view: ModelViewParts) -> ComparePanel:
    """Give the model view its Compare page and, beside the sentence, the corrupted prompt.

    The corrupted prompt's box replaces the second sentence's (a BERT pair) while the
    result is a decoder's: a decoder reads one text, an encoder has no next token to
    compare. "Compare" beside it shows the comparison in place of the grid and its tabs
    (all of the dock's height for the charts), and back; typing a first corrupted prompt
    turns it on. The window attaches it (the model view does not import this page, whose
    charts use its token axes); the panel becomes ``view.compare``.
    """
    panel = ComparePanel(view.session, view._show_status)
    edit = panel.corrupt_edit = QLineEdit()
    edit.setPlaceholderText("Corrupted prompt (one name swapped)")
    edit.setToolTip(
        "A second prompt with as many tokens: Compare shows which heads carry the "
        "difference between the two runs"
    )
    toggle = panel.toggle = QToolButton()
    toggle.setText("Compare")
    toggle.setCheckable(True)
    toggle.setToolTip("Show the two prompts compared (logit difference, patching, attribution)")
    for widget in (edit, toggle):
        widget.setVisible(False)
    view.text_row.addWidget(edit, 2)
    view.text_row.addWidget(toggle)
    scroll = QScrollArea(widgetResizable=True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # it fits
    panel.setMinimumHeight(COMPARE_MIN_HEIGHT)
    scroll.setWidget(panel)  # its charts scroll: the dock may be short
    view._pages.addWidget(scroll)

    def show_page() -> None:
        if toggle.isChecked() and toggle.isVisible():
            view._pages.setCurrentWidget(scroll)
        elif view._pages.currentWidget() is scroll:
            view._pages.setCurrentIndex(1 if view.session.result is not None else 0)

    def follow_result() -> None:
        result = view.session.result
        decoder = result is not None and result.causal
        edit.setVisible(decoder)
        toggle.setVisible(decoder)
        view.pair_edit.setVisible(not decoder)
        show_page()

    def on_typed(text: str) -> None:
        if text.strip() and not view.session.corrupt.strip():
            toggle.setChecked(True)  # a first corrupted prompt: show what it does
        view.session.set_corrupt(text)

    edit.textChanged.connect(on_typed)
    toggle.toggled.connect(lambda _: show_page())
    view.session.events.result.connect(follow_result)
    view.shutdown_hooks.append(panel.shutdown)
    setattr(view, "compare", panel)  # noqa: B010  # a page the window attaches
    follow_result()
    return panel
