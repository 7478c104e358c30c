"""The app icon and the About text."""

from __future__ import annotations

import platform

from PySide6.QtGui import QIcon, QPixmap

from attn_explorer import __version__
from attn_explorer.resources_path import resource


def app_icon() -> QIcon:
    """Every PNG size shipped in resources/icons, plus the SVG."""
    icon = QIcon()
    folder = resource("icons")
    try:
        entries = sorted(folder.iterdir(), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return icon
    for entry in entries:
        if entry.name.endswith(".png") and entry.name.startswith("attn-explorer"):
            pixmap = QPixmap()
            if pixmap.loadFromData(entry.read_bytes()):
                icon.addPixmap(pixmap)
    return icon


def about_text() -> str:
    import numpy
    import pyqtgraph
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import qVersion

    return (
        f"<h3>Attention Explorer {__version__}</h3>"
        "<p>See, step through and time multi-head attention: loops, one matmul per head, "
        "or one batched matmul.</p>"
        "<p>Licence: MIT.</p>"
        f"<p>Qt {qVersion()} · PySide6 {pyside_version} · numpy {numpy.__version__} · "
        f"pyqtgraph {pyqtgraph.__version__} · Python {platform.python_version()}</p>"
    )
