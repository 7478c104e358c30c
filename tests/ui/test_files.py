"""Save, open, examples, export and autosave from the window: bad files never lose work."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtGui import QImage

from attn_explorer.state.io import list_examples
from attn_explorer.ui import menus
from attn_explorer.ui.app import restore_autosave
from attn_explorer.ui.main_window import MainWindow


def test_save_then_open_restores_numbers_and_options(window, tmp_path):
    window.session.set_cell("key", 2, 1, 0.1 + 0.2)
    window.set_strategy("loop")
    path = tmp_path / "mine.json"
    assert menus.save_to(window, str(path))
    assert "*" not in window.windowTitle() and "mine" in window.windowTitle()
    window.load_preset("identity")
    assert menus.open_path(window, str(path))
    assert window.session.head_matrix("key")[2, 1] == 0.1 + 0.2
    assert window.session.options.strategy == "loop"
    assert str(path) in menus.recent_files()


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "not valid JSON"),
        ('{"format": "something-else", "version": 1}', "format"),
        ("", "not valid JSON"),
    ],
)
def test_corrupt_session_file_is_reported_and_changes_nothing(window, tmp_path, content, expected):
    window.session.set_cell("query", 0, 0, 5.0)
    before = window.session.snapshot()
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert not menus.open_path(window, str(path))
    assert expected in window.statusBar().currentMessage()
    np.testing.assert_array_equal(window.session.matrix("query"), before.query)
    assert window.session.dirty


def test_bad_number_in_session_names_its_json_path(window, tmp_path):
    good = tmp_path / "good.json"
    menus.save_to(window, str(good))
    data = json.loads(good.read_text())
    data["batches"][0]["heads"][0]["key"][2][0] = "x"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert not menus.open_path(window, str(bad))
    assert 'batches[0].heads[0].key[2][0]: expected a number, got "x"' in (
        window.statusBar().currentMessage()
    )


def test_save_to_missing_folder_is_reported(window, tmp_path):
    window.session.set_cell("query", 0, 0, 4.0)
    assert not menus.save_to(window, str(tmp_path / "no" / "such" / "dir" / "s.json"))
    assert "Could not save" in window.statusBar().currentMessage()
    assert window.session.dirty
    assert window.session.head_matrix("query")[0, 0] == 4.0


def test_every_example_opens(window):
    for title, entry in list_examples():
        menus.open_example(window, entry)
        assert window.result is not None, title
        assert window.session.shape[2] == len(window.session.tokens)


def test_export_png_and_bad_extension(window, tmp_path):
    paths = menus.export_heatmap(window, str(tmp_path / "s.png"), width=800)
    assert len(paths) == 1
    image = QImage(str(paths[0]))
    assert image.width() == 800
    assert menus.export_heatmap(window, str(tmp_path / "s.docx")) == []
    assert "unknown file type" in window.statusBar().currentMessage()
    assert window.session.head_matrix("query").tolist() == [[1, 0], [0, 1], [1, 1]]


def test_autosave_is_written_in_the_background_and_restored(qtbot, window):
    window.session.set_cell("query", 1, 1, 7.5)
    thread = menus.write_autosave(window)
    assert thread is not None
    thread.join(5)
    assert menus.autosave_path().exists()
    fresh = MainWindow()
    fresh.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert restore_autosave(fresh)
    assert fresh.session.head_matrix("query")[1, 1] == 7.5
    assert not fresh.session.dirty


def test_corrupt_autosave_is_reported_not_fatal(qtbot, window):
    menus.autosave_path().write_text("{broken")
    fresh = MainWindow()
    fresh.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert not restore_autosave(fresh)
    assert "could not be restored" in fresh.statusBar().currentMessage()
    assert fresh.session.tokens == ["t1", "t2", "t3"]


def test_huge_session_skips_autosave_with_a_note(window):
    window.load_preset("random", heads=16, tokens=512, dim=64)
    assert menus.write_autosave(window) is None
    assert "Autosave is off" in window.statusBar().currentMessage()
