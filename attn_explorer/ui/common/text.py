"""User text in Qt widgets, shown as typed: token and file names are never read as HTML.

Qt renders any label, tooltip or message box text that *looks* like HTML as rich
text, so a token named ``<img src=…>`` would load a local file. Everything that
can carry a user's text goes through these helpers.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QDialogButtonBox, QMessageBox, QWidget


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
    add_mnemonics(box)
    return QMessageBox.StandardButton(box.exec())


def add_mnemonics(dialog: QWidget) -> None:
    """Give each button of ``dialog``'s button box an Alt+letter: ``&Discard``, ``&Cancel``.

    A button that has one keeps it; the others take the first letter of their text not
    yet taken (its first letter where it can).
    """
    buttons = [
        b
        for box in dialog.findChildren(QDialogButtonBox)
        for b in box.findChildren(QAbstractButton)
    ]
    used = set()
    for button in buttons:
        text = button.text().replace("&&", "")
        if "&" in text and text.index("&") + 1 < len(text):
            used.add(text[text.index("&") + 1].lower())
    for button in buttons:
        text = button.text()
        if "&" in text.replace("&&", ""):
            continue
        for n, char in enumerate(text):
            if char.isalnum() and char.lower() not in used:
                used.add(char.lower())
                button.setText(text[:n] + "&" + text[n:])
                break
