"""The B, H, T, d spin boxes and the fill of new cells; a new size is applied on Enter or Apply.

One rule for the sizes: typing into a box changes nothing until Enter (in the box) or
Apply. A typed size is *pending* as soon as the box's text is a valid size, Enter
pressed or not: Apply is enabled and names it, and a click on Apply applies what the
boxes show (issue 36: it stayed disabled until the box committed its text, so the click
was lost). Leaving the box keeps the size pending and the status bar says how to apply
it; Escape in the box puts the size in effect back. While a box's text is no size (empty
or 0: the box refuses keys past its limit) Apply is disabled and says what to type.
``set_from_state`` pushes the session's sizes into the spins; ``apply`` carries the user's
sizes into the session (a refused size puts the real ones back).
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent, QValidator
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QPushButton,
    QSpinBox,
    QWidget,
)

from attn_explorer.compute import LIMITS
from attn_explorer.state import Session

#: How each size's box is named (what a screen reader reads) and explained.
SIZE_NAMES = {
    "B": ("B, batch size", "batch size: separate inputs processed together"),
    "H": ("H, number of heads", "number of heads: each with its own Q and K"),
    "T": ("T, number of tokens", "number of tokens (sequence length): rows of Q, K, V"),
    "d": ("d, vector size per head", "vector size per head: columns of Q and K"),
}
RULE = "Enter or Apply applies it; leaving the box keeps it pending; Escape puts it back"


class SizeSpin(QSpinBox):
    """One size's box: Enter asks to apply, Escape puts back the size in effect."""

    applyRequested = Signal()
    left = Signal()

    def __init__(self, session: Session, index: int) -> None:
        super().__init__()
        self.session = session
        self.index = index  # 0…3: B, H, T, d

    def typed_value(self) -> int | None:
        """The size the box's text says now, committed or not; None while it says none.

        The box keeps its value until Enter or focus-out (no keyboard tracking, so Ctrl+Z
        stays the box's own until then); its text is read here instead."""
        text = self.text()
        state, fixed, _ = self.validate(text, len(text))
        return self.valueFromText(fixed) if state == QValidator.State.Acceptable else None

    def revert(self) -> None:
        """Show the size in effect again (the keyboard's Escape calls it)."""
        self.setValue(self.session.shape[self.index])

    def keyPressEvent(self, event: QKeyEvent) -> None:
        super().keyPressEvent(event)  # Enter interprets the text first
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.applyRequested.emit()

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.left.emit()


class SizeControls(QWidget):
    """B, H, T, d spin boxes and the fill mode for new cells; applied on Enter / Apply."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.spins: dict[str, SizeSpin] = {}
        form = QGridLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        limits = {
            "B": LIMITS.max_batch,
            "H": LIMITS.max_heads,
            "T": LIMITS.max_tokens,
            "d": LIMITS.max_dim,
        }
        for n, (label, limit) in enumerate(limits.items()):
            spin = SizeSpin(session, n)
            spin.setRange(1, limit)
            spin.setPrefix(f"{label}=")
            name, tip = SIZE_NAMES[label]
            spin.setAccessibleName(name)
            spin.setToolTip(f"{tip} (1 to {limit}). A new size: {RULE}.")
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self._show_pending)
            spin.lineEdit().textChanged.connect(self._show_pending)  # each key typed
            spin.applyRequested.connect(self.apply)
            spin.left.connect(self._say_pending)
            form.addWidget(spin, 0, n)
            self.spins[label] = spin
        self.fill = QComboBox()
        self.fill.addItem("new cells: seeded random", "random")
        self.fill.addItem("new cells: 0", "zero")
        self.fill.setAccessibleName("New cells start at")
        self.fill.setToolTip(
            "What new cells start at when you add tokens, dimensions or heads: seeded random "
            "numbers (visible in the heatmaps, the same every time) or zeros"
        )
        self.fill.currentIndexChanged.connect(
            lambda: session.set_option("fill", self.fill.currentData())
        )
        form.addWidget(self.fill, 1, 0, 1, 2)
        self.apply_button = QPushButton("&Apply")
        self.apply_button.setAccessibleName("Apply the sizes")
        self.apply_button.clicked.connect(self.apply)
        form.addWidget(self.apply_button, 1, 2, 1, 2)
        session.events.shape.connect(self.set_from_state)
        session.events.options.connect(lambda name: self._set_fill())
        self.set_from_state()

    def typed(self) -> tuple[int, int, int, int]:
        """The sizes the boxes show, pending ones included, typed without Enter too (a box
        whose text is no size counts as its last value)."""
        b, h, t, d = (
            spin.value() if (typed := spin.typed_value()) is None else typed
            for spin in (self.spins[k] for k in "BHTd")
        )
        return b, h, t, d

    def unreadable(self) -> list[str]:
        """The labels of the boxes whose text is no size yet (empty or 0)."""
        return [label for label, spin in self.spins.items() if spin.typed_value() is None]

    def pending(self) -> str:
        """The typed sizes that are not in effect, as the user reads them ('' if none)."""
        return ", ".join(
            f"{label} = {typed}"
            for label, typed, real in zip("BHTd", self.typed(), self.session.shape, strict=True)
            if typed != real
        )

    def set_from_state(self) -> None:
        for label, value in zip("BHTd", self.session.shape, strict=True):
            with QSignalBlocker(self.spins[label]):
                self.spins[label].setValue(value)
        self._set_fill()
        self._show_pending()

    def _set_fill(self) -> None:
        with QSignalBlocker(self.fill):
            self.fill.setCurrentIndex(self.fill.findData(self.session.options.fill))

    def _show_pending(self) -> None:
        if unreadable := self.unreadable():
            self.apply_button.setEnabled(False)
            self.apply_button.setToolTip(
                "Nothing to apply while "
                + ", ".join(
                    f"{label} is no size: type a whole number from 1 to "
                    f"{self.spins[label].maximum()}"
                    for label in unreadable
                )
                + " (Escape in the box puts the size in effect back)."
            )
            return
        pending = self.pending()
        self.apply_button.setEnabled(bool(pending))
        self.apply_button.setToolTip(
            f"Resize Q, K and V to {pending} (undoable). Enter in a size box does the same."
            if pending
            else f"Nothing to apply: the boxes show the sizes in effect. A new size: {RULE}."
        )

    def _say_pending(self) -> None:
        pending = self.pending()
        if pending:
            self.session.report(
                f"{pending} not applied yet: press Enter in its box or Apply (Escape in the box "
                "puts it back)",
                "info",
            )

    def apply(self) -> None:
        if self.unreadable():  # Apply is disabled then; Enter has put the last value back
            return
        b, h, t, d = self.typed()
        if (b, h, t, d) != self.session.shape and not self.session.resize(
            batch=b, heads=h, tokens=t, dim=d
        ):
            self.set_from_state()  # rejected: show the sizes that are really in effect
        self._show_pending()
