"""The Compare view's "Patching" tab: which heads and positions carry the difference.

Activation patching (issue 35; TransformerLens ``patching.py``): the corrupted run with
one activation taken from the clean run, its logit difference normalised so 0 is the
corrupted run and 1 the clean one. Three requests, each in the worker with progress and
Stop (one :class:`~attn_explorer.ui.common.workers.LatestRunner`):

- **Patch every head**: a layers × heads heatmap; a click opens that head in both runs;
- **Patch residual stream**: a layers × positions heatmap, positions named by the clean
  tokens;
- **Patch together**: the heads typed (``10.3, 9.6``, or "Add selected") in one patch.

The estimated time is on the buttons; a scan estimated over ``LONG_SCAN_S`` asks first.
A stopped scan changes nothing: the maps already shown stay.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.session import ModelSession, head_name
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.compare.charts import ChartExport, Heatmap
from attn_explorer.ui.model.compare.state import (
    LONG_SCAN_S,
    CompareState,
    head_set_job,
    head_text,
    heads_job,
    parse_heads,
    residual_job,
)


def seconds_text(seconds: float) -> str:
    """``≈ 4 s`` or ``≈ 2 min`` for an estimate."""
    return f"≈ {seconds:.0f} s" if seconds < 90 else f"≈ {seconds / 60:.0f} min"


class PatchingPage(QWidget):
    """Patching scans of the current comparison (see the module docstring).

    ``headOpened(layer, head)`` follows a click on a cell of the heads map.
    """

    headOpened = Signal(int, int)

    def __init__(
        self,
        session: ModelSession,
        state: CompareState,
        model: Callable[[], DecoderModel | None],
        report: Callable[[str, str], None],
    ) -> None:
        super().__init__()
        self.session, self.state, self._model, self.report = session, state, model, report
        self.runner = LatestRunner(self)
        self.heads_button = QPushButton("every head")
        self.heads_button.setToolTip("Patch each head alone: a layers × heads map")
        self.residual_button = QPushButton("residual stream")
        self.residual_button.setToolTip("Patch each block's input at each position")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.line = QLabel("Type a corrupted prompt above to patch its run.")
        self.line.setWordWrap(True)
        self.line.setTextFormat(Qt.TextFormat.PlainText)
        self.heads_map = Heatmap("layer", "head", self.open_head)
        self.residual_map = Heatmap("input of block (1 = embeddings)", "position (clean token)")
        self.set_edit = QLineEdit()
        self.set_edit.setPlaceholderText("heads, e.g. 10.3, 9.6")
        self.add_button = QPushButton("Add selected")
        self.add_button.setToolTip("Add the head under view to the set")
        self.set_button = QPushButton("Patch together")
        self.set_label = QLabel("")
        self.set_label.setWordWrap(True)
        self.set_label.setTextFormat(Qt.TextFormat.PlainText)
        self.heads_export = ChartExport(
            "head patching map", self.heads_map.widget, self._heads_table, report
        )
        self.residual_export = ChartExport(
            "residual patching map", self.residual_map.widget, self._residual_table, report
        )
        self._layout()
        self._connect()
        self.refresh()

    def _layout(self) -> None:
        buttons = QHBoxLayout()
        buttons.addWidget(QLabel("Patch:"))
        for button in (self.heads_button, self.residual_button):
            buttons.addWidget(button)
        under_way = QHBoxLayout()
        under_way.addWidget(self.progress, 1)
        under_way.addWidget(self.stop_button)
        heads_row = QHBoxLayout()
        heads_row.addStretch(1)
        heads_row.addWidget(self.heads_export)
        residual_row = QHBoxLayout()
        residual_row.addStretch(1)
        residual_row.addWidget(self.residual_export)
        set_row = QHBoxLayout()
        set_row.addWidget(self.set_edit, 1)
        set_row.addWidget(self.add_button)
        set_buttons = QHBoxLayout()
        set_buttons.addWidget(self.set_button)
        set_buttons.addStretch(1)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(buttons)
        column.addLayout(under_way)
        column.addWidget(self.line)
        column.addWidget(self.heads_map.widget, 1)
        column.addLayout(heads_row)
        column.addWidget(self.residual_map.widget, 1)
        column.addLayout(residual_row)
        column.addWidget(QLabel("Heads patched together:"))
        column.addLayout(set_row)
        column.addLayout(set_buttons)
        column.addWidget(self.set_label)

    def _connect(self) -> None:
        self.heads_button.clicked.connect(lambda: self.start("heads"))
        self.residual_button.clicked.connect(lambda: self.start("residual"))
        self.set_button.clicked.connect(self.patch_set)
        self.set_edit.returnPressed.connect(self.patch_set)
        self.add_button.clicked.connect(self.add_selected)
        self.stop_button.clicked.connect(self.runner.cancel)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(lambda text: self.report(f"Patching failed: {text}", "error"))
        self.runner.cancelled.connect(self._on_stopped)
        self.runner.progress.connect(self._on_progress)
        self.runner.busy.connect(self._on_busy)
        self.state.events.outcome.connect(self.refresh)
        self.state.events.maps.connect(self._on_maps)

    # -- the user's requests -----------------------------------------------------------

    def start(self, kind: str, ask: bool = True) -> bool:
        """Run the "heads" or "residual" scan in the worker; False when nothing to patch,
        or the user declined a long one."""
        outcome, model = self.state.outcome, self._model()
        if outcome is None or model is None:
            self.report("Nothing to patch yet: type a corrupted prompt first.", "error")
            return False
        if ask and outcome.seconds > LONG_SCAN_S:
            answer = QMessageBox.question(
                self,
                "A long scan",
                f"Patching every {'head' if kind == 'heads' else 'position'} will take "
                f"up to {seconds_text(outcome.seconds)}. Start it? (Stop ends it at any time.)",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        job = heads_job if kind == "heads" else residual_job
        self.progress.setValue(0)
        self.line.setText("Patching every head…" if kind == "heads" else "Patching positions…")
        self.runner.submit(job(model, outcome.comparison))
        return True

    def patch_set(self) -> None:
        """Patch the typed heads together (in the worker)."""
        outcome, model = self.state.outcome, self._model()
        if outcome is None or model is None:
            self.report("Nothing to patch yet: type a corrupted prompt first.", "error")
            return
        layers, heads = outcome.corrupt.weights.shape[:2]
        try:
            chosen = parse_heads(self.set_edit.text(), layers, heads)
        except ValueError as exc:
            self.report(f"Heads to patch together: {exc}.", "error")
            return
        self.line.setText(f"Patching {head_text(chosen)} together…")
        self.runner.submit(head_set_job(model, outcome.comparison, chosen))

    def add_selected(self) -> None:
        """Add the head under view to the typed set."""
        layer, head = self.session.selected_head
        words = self.set_edit.text().replace(",", " ").split()
        word = f"{layer + 1}.{head + 1}"
        if word not in words:
            self.set_edit.setText(", ".join([*words, word]))

    def open_head(self, layer: int, head: int) -> None:
        """A click on the heads map: that head, in both runs."""
        if self.state.heads is None:
            return
        layers, heads = self.state.heads.shape
        if 0 <= layer < layers and 0 <= head < heads:
            self.session.select_head(layer, head)
            self.headOpened.emit(layer, head)

    # -- pushing state into the widgets ------------------------------------------------

    def refresh(self) -> None:
        """A new comparison (or none): empty maps, buttons with the estimated time."""
        self.runner.cancel(quiet=True)
        outcome = self.state.outcome
        for button in (self.heads_button, self.residual_button, self.set_button):
            button.setEnabled(outcome is not None)
        if outcome is None:
            self.heads_button.setText("every head")
            self.line.setText("Type a corrupted prompt above to patch its run.")
        else:
            estimate = seconds_text(outcome.seconds)
            self.heads_button.setText(f"every head ({estimate})")
            self.line.setText(f"Patching takes up to {estimate} here (both maps).")
        self.progress.setValue(0)
        self._on_maps()

    def _on_maps(self) -> None:
        state, outcome = self.state, self.state.outcome
        if state.heads is None or outcome is None:
            self.heads_map.clear("not patched yet")  # short: a long title widens the plot
        else:
            layers, heads = state.heads.shape
            self.heads_map.show(
                state.heads,
                [str(n + 1) for n in range(layers)],
                [str(n + 1) for n in range(heads)],
                "recovered logit difference",
            )
        if state.residual is None or outcome is None:
            self.residual_map.clear("not patched yet")
        else:
            self.residual_map.show(
                state.residual,
                [str(n + 1) for n in range(state.residual.shape[0])],
                outcome.comparison.clean_tokens,
                "recovered, by block input",
            )
        if state.head_set is None:
            self.set_label.setText("")
        else:
            self.set_label.setText(
                f"{head_text(state.head_set.heads)} patched together recover "
                f"{state.head_set.recovered:+.3f} of the logit difference (1 = all of it)."
            )

    def _on_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.line.setText(f"Patching: {text}")

    def _on_busy(self, busy: bool) -> None:
        self.stop_button.setEnabled(busy)
        for button in (self.heads_button, self.residual_button, self.set_button):
            button.setEnabled(not busy and self.state.outcome is not None)

    def _on_finished(self, outcome: tuple[str, object]) -> None:
        self.state.accept_scan(outcome)
        self.progress.setValue(1000)
        heads = self.state.heads
        if outcome[0] == "heads" and heads is not None and heads.size:
            layer, head = divmod(int(abs(heads).argmax()), heads.shape[1])
            self.line.setText(
                f"Done: {head_name(layer, head)} recovers most, {heads[layer, head]:+.3f} "
                "(click a cell to open that head in both runs)."
            )
        elif outcome[0] == "residual":
            self.line.setText("Done: the residual stream, position by position.")
        else:
            self.line.setText("Done.")

    def _on_stopped(self) -> None:
        self.progress.setValue(0)
        self.line.setText("Stopped: the maps shown are from before.")

    def _heads_table(self):
        heatmap = self.heads_map
        if heatmap.values is None:
            return None
        return (
            [f"layer {r}" for r in heatmap.rows],
            [f"head {c}" for c in heatmap.columns],
            (heatmap.values),
        )

    def _residual_table(self):
        heatmap = self.residual_map
        if heatmap.values is None:
            return None
        rows = [f"block {r} input" for r in heatmap.rows]
        rows[0] += " (embeddings)"
        return rows, heatmap.columns, heatmap.values

    def shutdown(self) -> None:
        self.runner.cancel(quiet=True)
