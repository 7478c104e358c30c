"""Save, open, examples, export and autosave from the window: bad files never lose work."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtGui import QImage

from attn_explorer.state.storage.examples import list_examples
from attn_explorer.ui.window.dialogs import export_heatmap
from attn_explorer.ui.window.file_commands import autosave_path, recent_files
from attn_explorer.ui.window.main_window import MainWindow


def test_save_then_open_restores_numbers_and_options(window, tmp_path):
    window.session.set_cell("key", 2, 1, 0.1 + 0.2)
    window.commands.set_strategy("loop")
    path = tmp_path / "mine.json"
    assert window.files.save_to(str(path))
    assert "*" not in window.windowHandle().title() and "mine" in window.windowHandle().title()
    window.commands.load_preset("identity")
    assert window.files.open_path(str(path))
    assert window.session.head_matrix("key")[2, 1] == 0.1 + 0.2
    assert window.session.options.strategy == "loop"
    assert str(path) in recent_files()


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
    assert not window.files.open_path(str(path))
    assert expected in window.statusBar().currentMessage()
    np.testing.assert_array_equal(window.session.matrix("query"), before.query)
    assert window.session.dirty


def test_bad_number_in_session_names_its_json_path(window, tmp_path):
    good = tmp_path / "good.json"
    window.files.save_to(str(good))
    data = json.loads(good.read_text())
    data["batches"][0]["heads"][0]["key"][2][0] = "x"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert not window.files.open_path(str(bad))
    assert 'batches[0].heads[0].key[2][0]: expected a number, got "x"' in (
        window.statusBar().currentMessage()
    )


def test_save_to_missing_folder_is_reported(window, tmp_path):
    window.session.set_cell("query", 0, 0, 4.0)
    assert not window.files.save_to(str(tmp_path / "no" / "such" / "dir" / "s.json"))
    assert "Could not save" in window.statusBar().currentMessage()
    assert window.session.dirty
    assert window.session.head_matrix("query")[0, 0] == 4.0


def test_every_example_opens(window):
    for title, entry in list_examples():
        window.files.open_example(entry)
        assert window.results.result is not None, title
        assert window.session.shape[2] == len(window.session.tokens)


def test_export_png_and_bad_extension(window, tmp_path):
    paths = export_heatmap(window.state, str(tmp_path / "s.png"), width=800)
    assert len(paths) == 1
    image = QImage(str(paths[0]))
    assert image.width() == 800
    assert export_heatmap(window.state, str(tmp_path / "s.docx")) == []
    assert "unknown file type" in window.statusBar().currentMessage()
    assert window.session.head_matrix("query").tolist() == [[1, 0], [0, 1], [1, 1]]


def test_autosave_is_written_in_the_background_and_recovered(qtbot, window):
    window.session.set_cell("query", 1, 1, 7.5)
    thread = window.files.write_autosave()
    assert thread is not None
    thread.join(5)
    assert autosave_path().exists()
    fresh = MainWindow()
    fresh.files.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert fresh.files.start() == "recovered"
    assert fresh.session.head_matrix("query")[1, 1] == 7.5
    assert fresh.session.dirty and fresh.isWindowModified()  # unsaved work, still unsaved
    assert "Recovered unsaved changes" in fresh.statusBar().currentMessage()


def test_autosave_keeps_the_model_dock_s_prompts_with_the_numbers(qtbot, window):
    from attn_explorer.state.storage.prompts import Prompts

    window.state.document.set_prompts(Prompts("When Mary and John", "When John and Mary"))
    window.session.set_cell("query", 1, 1, 7.5)
    window.files.write_autosave().join(5)
    text = autosave_path().read_text(encoding="utf-8")
    assert '"corrupt": "When John and Mary"' in text
    fresh = MainWindow()
    fresh.files.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert fresh.files.start() == "recovered"
    assert fresh.state.document.prompts == Prompts("When Mary and John", "When John and Mary")


def test_corrupt_autosave_is_set_aside_not_fatal(qtbot, window):
    autosave_path().write_text("{broken")
    fresh = MainWindow()
    fresh.files.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert fresh.files.start() == "set aside"
    message = fresh.statusBar().currentMessage()
    assert "could not be read" in message and "set aside" in message
    assert not autosave_path().exists()
    assert list(autosave_path().parent.glob("autosave-unreadable-*.json"))
    assert fresh.session.tokens == ["t1", "t2", "t3"]


def test_huge_session_skips_autosave_with_a_note(window):
    window.commands.load_preset("random", heads=16, tokens=512, dim=64)
    window.session.set_cell("query", 0, 0, 1.5)
    assert window.files.write_autosave() is None
    assert "Autosave is off" in window.statusBar().currentMessage()


def test_starting_on_a_file_keeps_unsaved_work_from_a_crash(qtbot, window, tmp_path):
    """attn-explorer FILE (a double-click) after a crash: the crash's edits are kept, not lost."""
    from attn_explorer.state.session import Session
    from attn_explorer.state.storage.session_file import load_session, save_session

    window.session.set_cell("query", 1, 1, 7.5)
    window.files.write_autosave().join(5)
    other = tmp_path / "other.json"
    save_session(Session(), other)
    fresh = MainWindow()
    fresh.files.ask_before_discard = False
    qtbot.addWidget(fresh)
    assert fresh.files.start(other) == "opened"  # what run_app does with a file
    assert fresh.state.document.path == str(other)
    assert not autosave_path().exists()
    [kept] = autosave_path().parent.glob("recovered-unsaved-*.json")
    assert load_session(kept).snapshot.query[0, 0, 1, 1] == 7.5
    assert str(kept) in fresh.statusBar().currentMessage()
