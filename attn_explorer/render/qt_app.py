"""The Qt application helper: one QApplication for the window, the exporters and the self-test.

Headless exports and the self-test need a QApplication to paint with QtGui, but nothing of
the window; they find it here, below ``ui``, so a headless export never imports the GUI.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication


def use_offscreen_if_headless() -> None:
    """Draw offscreen when Linux has no display (exports, the self-test), unless told otherwise."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def qt_application() -> QApplication:
    """The running QApplication, or a new one (widgets need a QApplication, not a core one)."""
    from PySide6.QtWidgets import QApplication

    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    if existing is not None:
        raise RuntimeError("a QCoreApplication without widgets is running; cannot open windows")
    return QApplication(sys.argv[:1])
