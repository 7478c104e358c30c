"""What the main window tells the user about the state: status-bar messages, shape, busy, title.

:class:`StatusBar` shows the session's messages (errors long enough to read, notes
shorter; a successful edit takes an old complaint down), the labelled shapes and a
busy bar while a result is computed in the background. :func:`follow_title` keeps the
window title on the document's name with the platform's unsaved-changes mark.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMainWindow, QProgressBar, QStatusBar

from attn_explorer.state.app_state import AppState
from attn_explorer.state.session import Session
from attn_explorer.ui.explorer.recompute import Recompute

#: How long a status-bar message stays (ms): errors long enough to read, notes shorter.
ERROR_MESSAGE_MS = 15_000
INFO_MESSAGE_MS = 6_000
#: What a status bar keeps around its message and between its widgets (px), generously.
MESSAGE_MARGIN_PX = 32


class StatusBar:
    """The window's status bar: its permanent widgets, then (:meth:`follow`) what it shows."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar
        self.shape_label = QLabel()
        self.shape_label.setObjectName("shape_label")
        self.shape_label.setToolTip(
            "B = batch (separate inputs), H = heads, T = tokens, d = vector size"
        )
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.setToolTip("Computing in the background; the newest edit wins")
        self.busy.hide()
        bar.addPermanentWidget(self.busy)
        bar.addPermanentWidget(self.shape_label)
        self._error_shown = ""
        bar.messageChanged.connect(self._make_room)

    def _make_room(self, text: str) -> None:
        """While a message is shown that the shapes would cut short, the shapes step aside.

        A status bar draws its message only left of its permanent widgets: at 1000 px the
        recovery note ended "… or discard ther" against the shapes. The message is the news
        (a refused value's reason, a note that lasts seconds); the shapes are back when it
        goes.
        """
        if not text:
            self.shape_label.show()
            return
        busy = self.busy.sizeHint().width() if self.busy.isVisible() else 0
        room = self.bar.width() - self.shape_label.sizeHint().width() - busy - MESSAGE_MARGIN_PX
        self.shape_label.setVisible(self.bar.fontMetrics().horizontalAdvance(text) <= room)

    def follow(self, session: Session, recompute: Recompute) -> None:
        """Show ``session``'s messages and shapes, and the busy bar while ``recompute`` works."""
        self.session = session
        ev = session.events
        ev.message.connect(self._on_message)
        ev.shape.connect(self._update_shape_label)
        # A successful change makes an old complaint about a refused value out of date.
        ev.values.connect(lambda matrix: self._clear_error())
        ev.shape.connect(self._clear_error)
        recompute.busy.connect(self.busy.setVisible)
        self._update_shape_label()

    def _on_message(self, text: str, level: str) -> None:
        error = level == "error"
        self.bar.showMessage(text, ERROR_MESSAGE_MS if error else INFO_MESSAGE_MS)
        self._error_shown = text if error else ""

    def _clear_error(self) -> None:
        if self._error_shown and self.bar.currentMessage() == self._error_shown:
            self.bar.clearMessage()
        self._error_shown = ""

    def _update_shape_label(self) -> None:
        self.shape_label.setText(self.session.shape_text())


def follow_title(window: QMainWindow, state: AppState) -> None:
    """Keep ``window``'s title on the document's name, marked while it has unsaved changes
    (its numbers, or the model dock's prompts when its file holds others)."""

    def update() -> None:
        # "[*]" becomes "*" while modified; the platform adds " — Attention Explorer".
        window.setWindowTitle(f"{state.document.name}[*]")
        window.setWindowModified(state.document.modified)

    state.session.events.dirty.connect(lambda dirty: update())
    state.session.events.document.connect(update)
    state.session.events.prompts.connect(update)
    update()
