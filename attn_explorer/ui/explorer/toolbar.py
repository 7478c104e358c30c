"""The toolbar's controls: the strategy toggle and the view options (stage, scale, mask, head).

Each follows the two named directions: ``set_*`` pushes state into the widget
under a ``QSignalBlocker``; ``_on_*_changed`` carries the user's edit into state.
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QToolButton,
    QWidget,
)

from attn_explorer.compute import LIMITS, STAGES, STRATEGIES
from attn_explorer.compute.tiled import MAX_BLOCK, MIN_BLOCK
from attn_explorer.state import Session
from attn_explorer.state.labels import STAGE_NAMES, STRATEGY_TIPS


class StrategyToggle(QWidget):
    """A segmented control: loop | matmul | batched | tiled, and the tiled strategy's block."""

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
            button.setAccessibleName(f"Strategy: {name}")  # not "1 loop": the digit is a key
            button.setMinimumWidth(76)
            self.group.addButton(button, n)
            layout.addWidget(button)
            self.buttons[name] = button
        self.block = QSpinBox()
        self.block.setRange(MIN_BLOCK, MAX_BLOCK)
        self.block.setPrefix("block ")
        self.block.setAccessibleName("Tiled strategy: block size")
        self.block.setToolTip(
            "Query rows and key columns of one tile of the tiled strategy (used when tiled)"
        )
        layout.addSpacing(4)
        layout.addWidget(self.block)
        self.group.idToggled.connect(self._on_strategy_changed)
        self.block.valueChanged.connect(lambda v: session.set_option("block", v))
        session.events.options.connect(lambda name: self.set_strategy(session.options.strategy))
        self.set_strategy(session.options.strategy)

    def set_strategy(self, name: str) -> None:
        with QSignalBlocker(self.group):
            self.buttons[name].setChecked(True)
        with QSignalBlocker(self.block):
            self.block.setValue(self.session.options.block)
            self.block.setEnabled(name == "tiled")

    def _on_strategy_changed(self, button_id: int, checked: bool) -> None:
        if checked:
            self.session.set_option("strategy", STRATEGIES[button_id])


class OptionsBar(QWidget):
    """Stage, scaling, causal mask and its sliding window, shared colour scale, batch entry
    and head."""

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
        self.sliding_window = QSpinBox()  # a sliding window on the causal mask; 0 = none
        self.sliding_window.setRange(0, LIMITS.max_tokens)
        self.sliding_window.setPrefix("window ")
        self.sliding_window.setSpecialValueText("no window")
        self.sliding_window.setAccessibleName("sliding window")
        self.sliding_window.setToolTip(
            "Sliding window w (with causal): query i sees only keys i−w+1 … i, as in Mistral "
            "and Gemma's local layers, so a KV cache holds w keys, not T"
        )
        self.shared = QCheckBox("shared colour scale")
        self.shared.setToolTip("One colour scale for every head (off: each head its own)")
        self.batch = QSpinBox()
        self.batch.setPrefix("batch ")
        self.batch.setToolTip("Which batch entry (separate input, e.g. sentence) is shown")
        self.head = QComboBox()
        self.head.setToolTip("Which head's Q and K the tables show (the head dimension)")
        for widget, name in (
            (self.stage, "Stage"),
            (self.scale, "Scale by 1/√d"),
            (self.causal, "Causal mask"),
            (self.shared, "Shared colour scale"),
            (self.batch, "Batch entry"),
            (self.head, "Head"),
        ):
            widget.setAccessibleName(name)
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
        self.sliding_window.valueChanged.connect(lambda v: session.set_option("window", v))
        self.shared.toggled.connect(lambda on: session.set_option("shared_scale", on))
        self.batch.valueChanged.connect(lambda v: session.set_option("batch_index", v - 1))
        self.head.currentIndexChanged.connect(self._on_head_changed)
        session.events.options.connect(lambda name: self.set_from_state())
        session.events.shape.connect(self.set_from_state)
        self.set_from_state()

    def widgets(self) -> list[QWidget]:
        """The controls in display order (the window puts them in its toolbar)."""
        return [
            self.stage_label,
            self.stage,
            self.scale,
            self.causal,
            self.sliding_window,
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
        with QSignalBlocker(self.sliding_window):
            self.sliding_window.setValue(o.window)
            self.sliding_window.setEnabled(o.causal)
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
