"""Light and dark palettes (Fusion style), both readable."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


def apply(dark: bool) -> None:
    """Switch the whole application to the dark or the light palette."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    app.setStyle("Fusion")
    if not dark:
        app.setPalette(app.style().standardPalette())
        return
    p = QPalette()
    roles = QPalette.ColorRole
    p.setColor(roles.Window, QColor(45, 45, 48))
    p.setColor(roles.WindowText, QColor(230, 230, 230))
    p.setColor(roles.Base, QColor(30, 30, 32))
    p.setColor(roles.AlternateBase, QColor(50, 50, 54))
    p.setColor(roles.ToolTipBase, QColor(255, 255, 220))
    p.setColor(roles.ToolTipText, QColor(0, 0, 0))
    p.setColor(roles.Text, QColor(230, 230, 230))
    p.setColor(roles.Button, QColor(55, 55, 60))
    p.setColor(roles.ButtonText, QColor(230, 230, 230))
    p.setColor(roles.BrightText, QColor(255, 80, 80))
    p.setColor(roles.Link, QColor(100, 170, 255))
    p.setColor(roles.Highlight, QColor(42, 130, 218))
    p.setColor(roles.HighlightedText, QColor(255, 255, 255))
    # secondary text (timings, hints, placeholders): dimmer than Text, still readable on Base
    p.setColor(roles.PlaceholderText, QColor(160, 160, 165))
    p.setColor(QPalette.ColorGroup.Disabled, roles.Text, QColor(130, 130, 130))
    p.setColor(QPalette.ColorGroup.Disabled, roles.ButtonText, QColor(130, 130, 130))
    app.setPalette(p)
