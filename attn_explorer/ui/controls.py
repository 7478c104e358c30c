"""Small control widgets that mirror session options: strategy toggle, stage, sizes, code panel.

Each follows the two named directions: ``set_*`` pushes state into the widget
under a ``QSignalBlocker``; ``_on_*_changed`` carries the user's edit into state.
"""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute import LIMITS, STAGES, STRATEGIES, strategy_source
from attn_explorer.state import Session
from attn_explorer.state.labels import STAGE_NAMES, STRATEGY_TIPS
from attn_explorer.state.results import Results


class StrategyToggle(QWidget):
    """A segmented control: loop | matmul | batched."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.buttons: dict[str, QToolButton] = {}
        for n, name in enumerate(STRATEGIES):
            button = QToolButton()
            button.setText(f"{n + 1} {name}")
            button.setCheckable(True)
            button.setToolTip(f"{STRATEGY_TIPS[name]} (Alt+{n + 1})")
            button.setMinimumWidth(76)
            self.group.addButton(button, n)
            layout.addWidget(button)
            self.buttons[name] = button
        self.group.idToggled.connect(self._on_strategy_changed)
        session.events.options.connect(
            lambda name: name == "step" or self.set_strategy(session.options.strategy)
        )
        self.set_strategy(session.options.strategy)

    def set_strategy(self, name: str) -> None:
        with QSignalBlocker(self.group):
            self.buttons[name].setChecked(True)

    def _on_strategy_changed(self, button_id: int, checked: bool) -> None:
        if checked:
            self.session.set_option("strategy", STRATEGIES[button_id])


class OptionsBar(QWidget):
    """Stage, scaling, causal mask, shared colour scale, batch entry and head."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.stage = QComboBox()
        for name in STAGES:
            self.stage.addItem(STAGE_NAMES[name], name)
        self.stage.setToolTip("Which stage of the pipeline the grid and heatmaps show")
        self.scale = QCheckBox("1/√d")
        self.scale.setToolTip("Scale scores by 1/√d before softmax")
        self.causal = QCheckBox("causal")
        self.causal.setToolTip("Hide keys after the query (j > i): a language model's mask")
        self.shared = QCheckBox("shared colour scale")
        self.shared.setToolTip("One colour scale for every head (off: each head its own)")
        self.batch = QSpinBox()
        self.batch.setPrefix("batch ")
        self.batch.setToolTip("Which batch entry (separate input, e.g. sentence) is shown")
        self.head = QComboBox()
        self.head.setToolTip("Which head's Q and K the tables show (the head dimension)")
        self.stage_label = QLabel("stage")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in self.widgets():
            layout.addWidget(w)
        self.stage.currentIndexChanged.connect(
            lambda: session.set_option("stage", self.stage.currentData())
        )
        self.scale.toggled.connect(lambda on: session.set_option("scale", on))
        self.causal.toggled.connect(lambda on: session.set_option("causal", on))
        self.shared.toggled.connect(lambda on: session.set_option("shared_scale", on))
        self.batch.valueChanged.connect(lambda v: session.set_option("batch_index", v - 1))
        self.head.currentIndexChanged.connect(self._on_head_changed)
        # "step" changes up to 60 times a second while the stepper plays: nothing to show here.
        session.events.options.connect(lambda name: name == "step" or self.set_from_state())
        session.events.shape.connect(self.set_from_state)
        self.set_from_state()

    def widgets(self) -> list[QWidget]:
        """The controls in display order (the window puts them in its toolbar)."""
        return [
            self.stage_label,
            self.stage,
            self.scale,
            self.causal,
            self.shared,
            self.batch,
            self.head,
        ]

    def set_from_state(self) -> None:
        o = self.session.options
        b, h, _, _ = self.session.shape
        with QSignalBlocker(self.stage):
            self.stage.setCurrentIndex(STAGES.index(o.stage))
        with QSignalBlocker(self.scale):
            self.scale.setChecked(o.scale)
        with QSignalBlocker(self.causal):
            self.causal.setChecked(o.causal)
        with QSignalBlocker(self.shared):
            self.shared.setChecked(o.shared_scale)
        with QSignalBlocker(self.batch):
            self.batch.setRange(1, b)
            self.batch.setValue(o.batch_index + 1)
            self.batch.setVisible(b > 1)
        with QSignalBlocker(self.head):
            if self.head.count() != h:
                self.head.clear()
                self.head.addItems([f"head {n + 1}" for n in range(h)])
            self.head.setCurrentIndex(o.head)

    def _on_head_changed(self, index: int) -> None:
        if index >= 0:
            self.session.set_option("head", index)


class SizeControls(QWidget):
    """B, H, T, d spin boxes and the fill mode for new cells; applied on Enter / Apply."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.spins: dict[str, QSpinBox] = {}
        form = QGridLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        limits = {
            "B": LIMITS.max_batch,
            "H": LIMITS.max_heads,
            "T": LIMITS.max_tokens,
            "d": LIMITS.max_dim,
        }
        tips = {
            "B": "batch size: separate inputs processed together",
            "H": "number of heads: each with its own Q and K",
            "T": "number of tokens (sequence length): rows of Q, K, V",
            "d": "vector size per head: columns of Q and K",
        }
        for n, (label, limit) in enumerate(limits.items()):
            spin = QSpinBox()
            spin.setRange(1, limit)
            spin.setPrefix(f"{label}=")
            spin.setToolTip(tips[label] + f" (1 to {limit}); press Enter to apply")
            spin.setKeyboardTracking(False)
            spin.editingFinished.connect(self.apply)
            form.addWidget(spin, 0, n)
            self.spins[label] = spin
        self.fill = QComboBox()
        self.fill.addItem("new cells: seeded random", "random")
        self.fill.addItem("new cells: 0", "zero")
        self.fill.setToolTip(
            "What new cells start at when you add tokens, dimensions or heads: seeded random "
            "numbers (visible in the heatmaps, the same every time) or zeros"
        )
        self.fill.currentIndexChanged.connect(
            lambda: session.set_option("fill", self.fill.currentData())
        )
        form.addWidget(self.fill, 1, 0, 1, 2)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Resize Q, K and V to these B, H, T, d (undoable)")
        self.apply_button.clicked.connect(self.apply)
        form.addWidget(self.apply_button, 1, 2, 1, 2)
        session.events.shape.connect(self.set_from_state)
        # "step" changes up to 60 times a second while the stepper plays: nothing to show here.
        session.events.options.connect(lambda name: name == "step" or self.set_from_state())
        self.set_from_state()

    def set_from_state(self) -> None:
        for label, value in zip("BHTd", self.session.shape, strict=True):
            with QSignalBlocker(self.spins[label]):
                self.spins[label].setValue(value)
        with QSignalBlocker(self.fill):
            self.fill.setCurrentIndex(self.fill.findData(self.session.options.fill))

    def apply(self) -> None:
        b, h, t, d = (self.spins[k].value() for k in "BHTd")
        if (b, h, t, d) != self.session.shape and not self.session.resize(
            batch=b, heads=h, tokens=t, dim=d
        ):
            self.set_from_state()  # rejected: show the sizes that are really in effect


@cache
def _source(strategy: str) -> str:
    return strategy_source(strategy)  # reads the module's source: do it once


class CodePanel(QWidget):
    """The strategy's core lines — the very text the compute layer runs — and how it agreed."""

    def __init__(self, session: Session, results: Results, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.results = results
        self.provenance = QLabel()
        self.provenance.setWordWrap(True)
        self.provenance.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.code = QPlainTextEdit()
        self.code.setReadOnly(True)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.code.setFont(font)
        # Wrapped, so the shape comments stay visible in a narrow column.
        self.code.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.code.setToolTip(
            "The core lines of the selected strategy, as the compute layer runs them"
        )
        self.where = QLabel()
        self.where.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.provenance)
        layout.addWidget(self.code, 1)
        layout.addWidget(self.where)
        session.events.options.connect(
            lambda name: name == "step" or self.set_strategy(session.options.strategy)
        )
        session.events.shape.connect(lambda: self.set_strategy(session.options.strategy))
        results.changed.connect(self.set_provenance)
        self.set_strategy(session.options.strategy)
        self.set_provenance()

    def set_strategy(self, name: str) -> None:
        text = _source(name)
        if self.code.toPlainText() != text:
            self.code.setPlainText(text)
        b, h, t, d = self.session.shape
        where = {
            "loop": f"Every one of the B·H·T·T = {b * h * t * t:,} cells is a visit of the loop "
            f"body, and each does d = {d} multiply-adds in Python.",
            "matmul": f"The head dimension is still a Python loop: {b * h} call(s) of "
            f"(T={t}, d={d}) @ (d={d}, T={t}).",
            "batched": f"The head dimension enters the call: one matmul on (B={b}, H={h}, T={t}, "
            f"d={d}) @ (B={b}, H={h}, d={d}, T={t}) → (B={b}, H={h}, T={t}, T={t}).",
        }[name]
        self.where.setText(where)

    def set_provenance(self) -> None:
        """How the shown result was computed and whether the strategies agree."""
        self.provenance.setText(self.results.provenance())
