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
#: What the shapes' letters mean (the shape read-out's tooltip).
SHAPES_TIP = "B = batch (separate inputs), H = heads, T = tokens, d = vector size"


class StatusBar:
    """The window's status bar: its permanent widgets, then (:meth:`follow`) what it shows."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar
        self.shape_label = QLabel()
        self.shape_label.setObjectName("shape_label")
        self.shape_label.setToolTip(SHAPES_TIP)
        self._shapes = ""  # the session's labelled shapes, whole
        self._message = ""
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
        """Fit the shapes beside the message ``text`` (empty: none is shown)."""
        self._message = text
        self._fit_shapes()

    def _fit_shapes(self) -> None:
        """The shapes whole, or only those of Q, K and V while a message needs the room.

        A status bar draws its message only left of its permanent widgets: at 1000 px the
        recovery note ended "… or discard ther" against the shapes. The message is the news
        (a refused value's reason, a note that lasts seconds), so the shapes give way to
        their first half, whole words still, and are whole again when it goes.
        """
        whole = self._shapes
        short = whole.split(" · ")[0]
        shown = whole
        if self._message:
            busy = self.busy.sizeHint().width() if self.busy.isVisible() else 0
            metrics = self.bar.fontMetrics()
            need = metrics.horizontalAdvance(self._message) + busy + MESSAGE_MARGIN_PX
            room = self.bar.width() - need
            # the label's own margins: its hint is wider than its text by the same amount
            margins = self.shape_label.sizeHint().width() - metrics.horizontalAdvance(
                self.shape_label.text()
            )
            if metrics.horizontalAdvance(whole) + margins > room:
                shown = short
        self.shape_label.setText(shown)
        self.shape_label.setToolTip(SHAPES_TIP if shown == whole else f"{whole}\n{SHAPES_TIP}")

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
        self._shapes = self.session.shape_text()
        self._fit_shapes()


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
