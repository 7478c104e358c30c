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


#: The inner loop's tests measured at 0.4 s or more (one idle run; the file says how).
SLOW_BY_MEASURE = Path(__file__).parent / "slow_by_measure.txt"
#: Journeys that stay in the inner loop whatever they take: the fast core (issue 22). One
#: per path a user walks most: edits and strategy keys, paste and undo, the title, the
#: stepper with presets and undo, the keyboard alone, undo's scope, a drag, a file opened.
FAST_CORE = frozenset(
    "tests/ui/journeys/" + name
    for name in (
        "test_journeys.py::test_strategy_keys_after_editing_a_cell",
        "test_journeys.py::test_ctrl_v_pastes_and_undo_redo_and_refusals",
        "test_journeys.py::test_the_title_names_the_document_once_and_marks_changes",
        "test_journeys.py::test_stepping_then_a_preset_then_undo_always_shows_a_full_grid",
        "test_journeys.py::test_undo_and_redo_while_stepping",
        "test_keyboard_journey.py::test_keyboard_only_cell_strategy_stage_step_and_export",
        "test_undo_scope_journey.py::"
        "test_undo_keeps_stage_causal_strategy_and_step_and_redo_restores_the_numbers",
        "test_vectors_journey.py::"
        "test_drag_q2_tip_edits_q_updates_the_grid_and_one_undo_restores_it",
        "test_open_tensors_journey.py::test_an_npz_with_q_k_v_opens_at_once_and_is_undoable",
    )
)


def measured_slow() -> frozenset[str]:
    """Node ids listed in SLOW_BY_MEASURE (lines "seconds  node id"; # starts a comment)."""
    lines = SLOW_BY_MEASURE.read_text(encoding="utf-8").splitlines()
    rows = (line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))
    return frozenset(row[1].strip() for row in rows)


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by the marks
def pytest_collection_modifyitems(config, items):
    """Mark the measured-slow tests @slow, and run the reference modules (``*_reference.py``) last.

    They keep transformers, torch and copies of the models (GBs) in this process; a
    child forked after them starts with that resident memory, which the peak-memory checks
    of the hostile corpus and the Open action would then count against the child.
    """
    slow = measured_slow() - FAST_CORE
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    # every module that runs transformers in this process, last (see above)
    items.sort(key=lambda item: "_reference.py" in item.nodeid.split("::")[0])
