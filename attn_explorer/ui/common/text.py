"""User text in Qt widgets, shown as typed: token and file names are never read as HTML.

Qt renders any label, tooltip or message box text that *looks* like HTML as rich
text, so a token named ``<img src=…>`` would load a local file. Everything that
can carry a user's text goes through these helpers.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget


def plain_tooltip(text: str) -> str:
    """A tooltip that shows ``text`` literally, line breaks kept."""
    return f"<p style='white-space:pre'>{html.escape(text)}</p>"


def message_box(
    parent: QWidget | None,
    icon: QMessageBox.Icon,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Ok,
) -> QMessageBox.StandardButton:
    """Show a modal message box with plain ``text``; returns the button pressed."""
    box = QMessageBox(icon, title, text, buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    return QMessageBox.StandardButton(box.exec())
