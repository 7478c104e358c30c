"""The B, H, T, d spin boxes and the fill of new cells; a new size is applied on Enter.

``set_from_state`` pushes the session's sizes into the spins; ``apply`` carries
the user's sizes into the session (a refused size puts the real ones back).
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QPushButton,
    QSpinBox,
    QWidget,
)

from attn_explorer.compute import LIMITS
from attn_explorer.state import Session


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
        session.events.options.connect(lambda name: self.set_from_state())
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
