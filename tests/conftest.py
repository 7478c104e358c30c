"""Shared test set-up: Qt runs offscreen and QSettings never touch the user's files."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
