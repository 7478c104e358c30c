"""Shared test set-up: Qt runs offscreen on a virtual 1920 × 1080 screen, and QSettings
never touch the user's files."""

import os
from pathlib import Path

import pytest

SCREENS = Path(__file__).parent / "screens"  # offscreen screen sizes, one JSON file each
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={SCREENS / '1920x1080.json'}")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path, monkeypatch):
    """Each test gets its own QSettings and app-data folder (autosave, recent files)."""
    monkeypatch.setenv("ATTN_EXPLORER_SETTINGS_DIR", str(tmp_path / "settings"))
    monkeypatch.setenv("ATTN_EXPLORER_DATA_DIR", str(tmp_path / "data"))
    yield
