"""Shared test set-up: Qt runs offscreen on a virtual 1920 × 1080 screen, and QSettings
never touch the user's files."""

import os
from pathlib import Path

import pytest

SCREENS = Path(__file__).parent / "screens"  # offscreen screen sizes, one JSON file each
# Forced, not defaulted: CI often exports QT_QPA_PLATFORM=offscreen, whose default screen
# (800 × 800) is smaller than the windows the tests open and lay out; they need this one.
os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREENS / '1920x1080.json'}"
os.environ["PYQTGRAPH_QT_LIB"] = "PySide6"


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path, monkeypatch):
    """Each test gets its own QSettings and app-data folder (autosave, recent files)."""
    monkeypatch.setenv("ATTN_EXPLORER_SETTINGS_DIR", str(tmp_path / "settings"))
    monkeypatch.setenv("ATTN_EXPLORER_DATA_DIR", str(tmp_path / "data"))
    yield


@pytest.fixture
def tiny_gguf(tmp_path):
    """A tiny random Llama-layout GGUF file (models and window tests share it)."""
    from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    return path


def pytest_collection_modifyitems(config, items):
    """Run the SmolLM2 reference module last.

    It keeps transformers, torch and two copies of the model (~1.3 GB) in this process;
    a child forked after it starts with that resident memory, which the hostile-corpus
    tests' peak-memory check of each export would then count against the export.
    """
    items.sort(key=lambda item: item.nodeid.startswith("tests/models/test_llama_reference.py"))
