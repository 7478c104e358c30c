"""The app icon and the About text."""

from __future__ import annotations

import platform
import re
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QIcon, QPixmap

from attn_explorer import __version__
from attn_explorer.state.storage.resources import resource


def app_icon() -> QIcon:
    """Every PNG size shipped in resources/icons (``attn-explorer-<size>.png``).

    Files on disk are added with their size, so Qt reads one only when that size is
    drawn (decoding all eight cost ~10 ms of every start); a zipped install reads them.
    """
    icon = QIcon()
    folder = resource("icons")
    try:
        entries = sorted(folder.iterdir(), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return icon
    for entry in entries:
        sized = re.fullmatch(r"attn-explorer-(\d+)\.png", entry.name)
        if sized is None:
            continue
        if isinstance(entry, Path):
            side = int(sized.group(1))
            icon.addFile(str(entry), QSize(side, side))
            continue
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
