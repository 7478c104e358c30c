"""The main window's size, place and dock layout kept between runs, and the dark palette choice.

Saved in QSettings when the window closes; restored at the next start only where the
saved frame still fits the screen (a laptop unplugged from its monitor gets the default
layout, not a window off screen).
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow

from attn_explorer.ui.common import palette, screen_fit
from attn_explorer.ui.common.settings import settings


def restore(window: QMainWindow) -> bool:
    """The user's size and dock layout, where they still fit; True if the docks were restored."""
    s = settings()
    geometry = s.value("geometry")
    if not (isinstance(geometry, QByteArray) and screen_fit.saved_frame_fits(s.value("frame"))):
        return False
    window.restoreGeometry(geometry)
    state = s.value("window_state")
    return isinstance(state, QByteArray) and window.restoreState(state)


def save(window: QMainWindow) -> None:
    """Remember ``window``'s geometry, its frame on the screen and its dock layout."""
    s = settings()
    s.setValue("geometry", window.saveGeometry())
    frame = window.frameGeometry()  # checked against the screen at the next start
    s.setValue("frame", [frame.x(), frame.y(), frame.width(), frame.height()])
    s.setValue("window_state", window.saveState())
    s.sync()


def set_dark(dark: bool) -> None:
    """Switch the dark palette on or off, and remember the choice."""
    palette.apply(dark)
    settings().setValue("dark", dark)


def restore_dark() -> bool:
    """Apply the palette the user chose last time (the light one by default); True if dark.

    The light one too: the platform's default dims secondary text below 4.5 : 1."""
    dark = bool(settings().value("dark", False, type=bool))
    palette.apply(dark)
    return dark
