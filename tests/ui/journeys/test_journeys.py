"""Journeys: a user's sequences through the real window, each chaining five or more actions.

Every defect of issue 11 is one journey here, reproduced through the user's entry
points (keys, menu items, clicks, dialog buttons); after every action the test
checks what the user sees. See conftest.py for the hands (``user``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox, QLineEdit

from attn_explorer.state import preset
from attn_explorer.ui.window.file_commands import autosave_path
from attn_explorer.ui.window.main_window import MainWindow

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier
WORKED_S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]


def focus_stepper(user) -> None:
    user.window.stepper_dock.raise_()
    user.click(user.window.stepper.counter_label)  # a click on the panel gives it the keys
    user.window.stepper.setFocus()


def hidden_cells(user) -> int:
    return sum(cell == "" for row in user.grid() for cell in row)


def restart(qtbot) -> MainWindow:
    """The app started again (same settings and app-data folder), as app.run_app does."""
    window = MainWindow()
    window.files.ask_before_discard = False  # closed by qtbot at the end of the test
    qtbot.addWidget(window)
    window.files.start()
    window.show()
    qtbot.waitExposed(window)
    return window


# -- defect 1: the grid is never blank while a result exists --------------------------------------
@pytest.mark.slow
def test_stepper_then_a_new_token_count_shows_the_whole_new_result(user):
    user.click_heatmap(0, 1, 1)  # jumps the stepper to cell (t2, t2): one batched call
    assert user.window.stepper.frame() is not None
    assert user.window.stepper.counter_label.text().startswith("batched call 1 of 1")
    assert user.grid_numbers() == WORKED_S
    user.press(Qt.Key.Key_1)  # the loop strategy (the heatmap has the keyboard)
    assert user.window.session.options.strategy == "loop"
    user.assert_grid_is_the_result()  # a strategy switch ends the step-through
    user.click_heatmap(0, 1, 1)  # the loop stops before its first multiply-add for (t2, t2)
    assert hidden_cells(user) == 4 and user.grid()[1][1] == "…"
    focus_stepper(user)
    user.press(Qt.Key.Key_End)
    assert user.window.stepper.frame() is not None
    assert user.grid_numbers() == WORKED_S
    user.set_size("T", 4)
    assert user.window.session.shape == (1, 1, 4, 2)
    user.assert_grid_is_the_result()
    assert len(user.grid()) == 4
    assert user.window.stepper.counter_label.text().startswith("Stopped")
    user.assert_heatmap_drawn()


def test_stepping_then_a_preset_then_undo_always_shows_a_full_grid(user):
    user.press(Qt.Key.Key_1, ALT, widget=user.window)  # loop
    focus_stepper(user)
    for _ in range(3):
        user.press(Qt.Key.Key_Right)
    assert hidden_cells(user) > 0
    user.press_button("Discard")  # the strategy switch is an unsaved change of the session
    user.choose("Presets", "Identity")
    user.assert_grid_is_the_result()
    assert user.grid_numbers() == np.eye(4).tolist()
    assert user.title() == "Identity"
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    user.assert_grid_is_the_result()
    assert user.grid_numbers() == WORKED_S
    user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=user.window)
    assert user.grid_numbers() == np.eye(4).tolist()
    user.assert_heatmap_drawn()


@pytest.mark.slow
def test_switching_strategy_part_way_through_a_step_through(user):
    user.choose("Presets", "Causal language model")
    user.press(Qt.Key.Key_1, ALT, widget=user.window)  # loop
    focus_stepper(user)
    for _ in range(5):
        user.press(Qt.Key.Key_Right)
    assert hidden_cells(user) > 0
    user.press(Qt.Key.Key_2, ALT)  # matmul, while the stepper has the keyboard
    assert user.window.session.options.strategy == "matmul"
    user.assert_grid_is_the_result()
    assert "computed with <b>matmul</b>" in user.window.code_panel.provenance.text()
    focus_stepper(user)
    user.press(Qt.Key.Key_Right)  # one matmul call: head 1 complete
    assert user.window.stepper.frame().filled[0, 0].all()
    user.choose("Step", "Stop stepping")
    user.assert_grid_is_the_result()
    user.assert_heatmap_drawn(0)


def test_undo_and_redo_while_stepping(user):
    user.press(Qt.Key.Key_1, ALT, widget=user.window)  # loop
    user.type_cell("query", 0, 0, "2")
    assert user.grid_numbers()[0] == [2, 0, 2]
    user.click_grid(1, 0)  # jumps the stepper to that cell
    assert user.window.stepper.frame() is not None and hidden_cells(user) == 5
    # Issue 23: the step-through is a view setting; undo and redo keep its place and
    # show it on the numbers they put back.
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.window.stepper.frame() is not None and hidden_cells(user) == 5
    assert user.grid_numbers()[0] == WORKED_S[0]
    user.press(Qt.Key.Key_Y, CTRL, widget=user.window)
    assert user.window.stepper.frame() is not None and hidden_cells(user) == 5
    assert user.grid_numbers()[0] == [2, 0, 2]
    user.choose("Step", "Stop stepping")
    user.assert_grid_is_the_result()
    user.click_grid(0, 1)
    user.type_cell("key", 2, 1, "3")  # an edit (not an undo) ends the step-through
    user.assert_grid_is_the_result()


# -- defect 2: Save never overwrites a file with unrelated data -----------------------------------
def test_a_model_head_is_untitled_and_save_asks_where(user, tmp_path):
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    folder = tmp_path / "tiny-bert"
    write_tiny_bert(folder)
    session1 = tmp_path / "session1.json"
    user.pick_file(session1)
    user.press(Qt.Key.Key_S, CTRL | SHIFT, widget=user.window)
    saved = session1.read_bytes()
    assert user.title() == "session1"
    user.press(Qt.Key.Key_M, CTRL, widget=user.window)
    view = user.window.model_view
    assert user.window.model_dock.isVisible()
    user.pick_file(folder)
    user.choose("Model", "Open model folder…")
    user.click(view.sentence_edit)
    user.type_text("the cat sat", widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    user.click(view.summary_table.viewport(), view.summary_table.visualRect(
        view.summary_table.model().index(0, 1)).center())  # layer 1, head 2  # fmt: skip
    user.click(view.take_button)
    assert user.window.session.tokens == list(view.result.tokens)
    assert user.title() == "tiny-bert layer 1 head 2"  # untitled, unmodified
    user.assert_grid_is_the_result()
    user.type_cell("query", 0, 0, "5")
    assert user.title() == "tiny-bert layer 1 head 2*"
    user.press_button("Save")  # "Save the changes to …?"
    user.pick_file(None)  # the Save As dialog appears (no silent overwrite); cancel it
    user.press(Qt.Key.Key_Q, CTRL, widget=user.window)
    assert user.window.isVisible()  # the quit was cancelled with the Save As
    assert session1.read_bytes() == saved
    assert user.dialogs_seen == ["Save session", "Open a BERT model folder", "Unsaved changes",
                                 "Save session"]  # fmt: skip


@pytest.mark.slow
def test_presets_ask_before_replacing_unsaved_work(user, tmp_path):
    user.type_cell("key", 0, 1, "4")
    assert user.title() == "untitled*"
    user.press_button("Cancel")
    user.choose("Presets", "Identity")
    assert user.window.session.head_matrix("key")[0, 1] == 4.0
    assert user.title() == "untitled*"
    user.press_button("Discard")
    user.choose("Presets", "Identity")
    assert user.grid_numbers() == np.eye(4).tolist() and user.title() == "Identity"
    user.type_cell("query", 3, 3, "2")
    user.press_button("Save")
    user.pick_file(tmp_path / "mine.json")
    user.choose("Presets", "Exercise: k4 = (2, 0)")
    assert user.title() == "Exercise: k4 = (2, 0)"
    saved = json.loads((tmp_path / "mine.json").read_text())
    assert saved["batches"][0]["heads"][0]["query"] == [
        [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 2]
    ]  # fmt: skip
    user.assert_grid_is_the_result()


def test_an_example_is_untitled_and_ctrl_s_asks_where(user, tmp_path):
    user.choose("File", "Examples", "Exercise: k4 = (2, 0)")
    assert user.title() == "exercise"
    user.type_cell("key", 3, 0, "3")
    assert user.title() == "exercise*"
    user.pick_file(None)  # Save As appears; the user cancels
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)
    assert user.title() == "exercise*" and not list(tmp_path.glob("*.json"))
    user.pick_file(tmp_path / "exercise-mine.json")
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)
    assert user.title() == "exercise-mine"
    assert (tmp_path / "exercise-mine.json").exists()


# -- defect 3: Discard is honoured; the autosave is crash recovery only ---------------------------
def test_discard_at_quit_then_restart_opens_the_file_from_disk(user, qtbot, tmp_path):
    user.pick_file(tmp_path / "session1.json")
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)
    assert user.title() == "session1"
    user.set_size("T", 4)
    assert user.title() == "session1*"
    user.press_button("Discard")
    user.press(Qt.Key.Key_Q, CTRL, widget=user.window)
    assert not user.window.isVisible()
    assert not autosave_path().exists()
    again = restart(qtbot)
    assert again.session.shape == (1, 1, 3, 2)
    assert again.windowHandle().title() == "session1" and not again.isWindowModified()
    assert [[float(c) for c in row] for row in again.score_grid.text_grid()] == WORKED_S


@pytest.mark.slow
def test_unsaved_work_is_recovered_after_a_crash_and_saved_to_its_file(user, qtbot, tmp_path):
    path = tmp_path / "session1.json"
    user.pick_file(path)
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)
    user.type_cell("query", 2, 1, "7")
    qtbot.waitUntil(autosave_path().exists, timeout=5000)  # written after a pause in typing
    user.window.shutdown()  # the process dies here: no question, no clean-up
    again = restart(qtbot)
    assert again.session.head_matrix("query")[2, 1] == 7.0
    assert again.windowHandle().title() == "session1*"
    assert "Recovered unsaved changes" in again.statusBar().currentMessage()
    again.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is again, timeout=2000)
    qtbot.keyClick(again, Qt.Key.Key_S, CTRL)  # saves to session1.json, no dialog
    assert json.loads(path.read_text())["batches"][0]["heads"][0]["query"] == [
        [1, 0], [0, 1], [1, 7]
    ]  # fmt: skip
    assert not autosave_path().exists() and not again.isWindowModified()


# -- defect 4: Ctrl+V pastes ----------------------------------------------------------------------
def test_ctrl_v_pastes_and_undo_redo_and_refusals(user):
    QApplication.clipboard().setText("5\t6\n7, 8\n")
    user.click_cell("key", 1, 0)
    user.press(Qt.Key.Key_V, CTRL)
    assert user.window.session.head_matrix("key").tolist() == [[1, 0], [5, 6], [7, 8]]
    assert user.grid_numbers()[0] == [1, 5, 7]
    user.press(Qt.Key.Key_Z, CTRL)
    assert user.grid_numbers() == WORKED_S
    user.press(Qt.Key.Key_Z, CTRL | SHIFT)
    assert user.window.session.head_matrix("key")[2].tolist() == [7, 8]
    QApplication.clipboard().setText("1 x")
    user.click_cell("query", 0, 0)
    user.choose("Edit", "Paste")
    assert "not a number" in user.status() and "nothing changed" in user.status()
    assert user.window.session.head_matrix("query")[0].tolist() == [1, 0]
    user.click_cell("key", 2, 0)
    user.press(Qt.Key.Key_C, CTRL)
    assert QApplication.clipboard().text() == "7"


# -- defect 5: strategy keys from anywhere --------------------------------------------------------
def test_strategy_keys_after_editing_a_cell(user):
    user.type_cell("query", 0, 0, "2")  # tour step 1
    assert user.grid_numbers()[0] == [2, 0, 2]
    user.press(Qt.Key.Key_1)  # a spreadsheet: typing starts editing the cell
    assert user.window.tables["query"].findChild(QLineEdit).isVisible()
    user.press(Qt.Key.Key_Escape)  # cancels the edit
    assert user.window.session.head_matrix("query")[0, 0] == 2.0
    user.press(Qt.Key.Key_2, ALT)  # works even while a table has the keyboard
    assert user.window.session.options.strategy == "matmul"
    user.press(Qt.Key.Key_Escape)  # gives the keyboard back to the window
    user.press(Qt.Key.Key_1)
    assert user.window.session.options.strategy == "loop"
    user.assert_grid_is_the_result()
    user.press_button("OK")
    user.press(Qt.Key.Key_F1)
    assert user.dialogs_seen[-1] == "Keyboard shortcuts"


# -- defect 6: a command raises the dock its result appears in ------------------------------------
@pytest.mark.slow
def test_ctrl_t_brings_the_timing_dock_to_the_front(user):
    user.window.stepper_dock.raise_()
    user.settle()
    assert user.window.timing_panel.visibleRegion().isEmpty()  # behind the stepper tab
    user.press(Qt.Key.Key_T, CTRL, widget=user.window)
    user.settle()
    assert not user.window.timing_panel.visibleRegion().isEmpty()
    user.qtbot.waitUntil(lambda: not user.window.timing_panel.runner.is_busy(), timeout=30_000)
    assert "batched is" in user.window.timing_panel.summary.text()
    user.click_grid(1, 2)  # the stepper jumps: its dock comes to the front
    user.settle()
    assert not user.window.stepper.visibleRegion().isEmpty()
    user.press(Qt.Key.Key_T, CTRL | SHIFT, widget=user.window)
    user.settle()
    assert not user.window.timing_panel.visibleRegion().isEmpty()
    user.press(Qt.Key.Key_Period, CTRL, widget=user.window)
    user.qtbot.waitUntil(lambda: not user.window.timing_panel.runner.is_busy(), timeout=10_000)


# -- defect 7: heads are numbered one way ---------------------------------------------------------
def test_heads_are_numbered_from_one_in_the_window_and_the_exported_file(user, tmp_path):
    user.choose("Presets", "Causal language model")
    combo: QComboBox = user.window.options_bar.head
    assert [combo.itemText(n) for n in range(combo.count())] == ["head 1", "head 2"]
    combo.setFocus()
    user.press(Qt.Key.Key_Down, widget=combo)  # head 2
    assert user.window.score_grid.title.text().endswith("— head 2")
    user.hover_heatmap(1, 0, 0)
    assert user.window.heatmaps.hover.text().startswith("head 2 · query The (i=1)")
    user.accept_form()  # current head, PNG
    user.pick_file(tmp_path / "causal-weights-head2.png")
    user.press(Qt.Key.Key_E, CTRL, widget=user.window)
    assert user.dialogs_seen[-2:] == ["Export heatmap", "Export heatmap"]
    written = tmp_path / "causal-weights-head2.png"
    assert written.exists()
    from PySide6.QtGui import QImage

    image = QImage(str(written))
    assert not image.isNull() and "Exported" in user.status()
    from attn_explorer.state.storage.export import default_filename
    from attn_explorer.state.views.figure import build_figure

    assert default_filename(user.window.state, "weights", 1, "png").endswith("-weights-head2.png")
    assert [p.title for p in build_figure(user.window.state, "weights", [1]).panels] == ["head 2"]


# -- defect 8: read-outs, messages, title and new cells -------------------------------------------
def test_hover_read_out_does_not_outlive_a_shape_change(user):
    user.accept_form(lambda dialog: _set_random_size(dialog, heads=1, tokens=12, dim=3))
    user.choose("Presets", "Random…")
    assert user.window.session.shape == (1, 1, 12, 3)
    user.hover_heatmap(0, 9, 9)
    assert "(i=10)" in user.window.heatmaps.hover.text()
    user.set_size("T", 4)
    assert "(i=10)" not in user.window.heatmaps.hover.text()
    user.hover_heatmap(0, 3, 2)
    assert "(i=4)" in user.window.heatmaps.hover.text() and "(j=3)" in (
        user.window.heatmaps.hover.text()
    )
    user.assert_grid_is_the_result()


def _set_random_size(dialog, **sizes) -> None:
    from PySide6.QtWidgets import QSpinBox

    spins = dialog.findChildren(QSpinBox)
    for spin, value in zip(
        spins, (1, sizes["heads"], sizes["tokens"], sizes["dim"], 0), strict=False
    ):
        spin.setValue(value)


def test_a_refused_value_message_clears_after_a_good_edit(user):
    user.type_cell("query", 0, 0, "abc")
    assert "Q[t1, d1]" in user.status() and "kept the old value" in user.status()
    assert user.grid_numbers() == WORKED_S
    user.type_cell("query", 0, 0, "3")
    assert "kept the old value" not in user.status()
    assert user.grid_numbers()[0] == [3, 0, 3]
    user.type_cell("key", 1, 1, "1e999")
    assert "K[t2, d2]" in user.status()
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.grid_numbers() == WORKED_S


def test_the_title_names_the_document_once_and_marks_changes(user, tmp_path):
    assert user.title() == "untitled"
    user.type_cell("value", 0, 0, "4")
    assert user.title() == "untitled*"
    user.pick_file(tmp_path / "mine.json")
    user.press(Qt.Key.Key_S, CTRL | SHIFT, widget=user.window)
    assert user.title() == "mine"
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.title() == "mine*"
    before = (tmp_path / "mine.json").read_bytes()
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)  # its own file: no dialog
    assert user.title() == "mine" and (tmp_path / "mine.json").read_bytes() != before
    assert user.window.windowTitle().count("Attention Explorer") == 0  # the platform adds it


@pytest.mark.slow
def test_new_cells_are_visible_and_the_status_says_what_they_hold(user):
    user.set_size("H", 2)
    assert user.window.session.shape == (1, 2, 3, 2)
    assert "seeded random" in user.status()
    user.assert_heatmap_drawn(1)
    assert np.ptp(user.heatmap_image(1)) > 0
    combo = user.window.options_bar.head
    combo.setFocus()
    user.press(Qt.Key.Key_Down, widget=combo)
    user.assert_grid_is_the_result()
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.window.session.shape == (1, 1, 3, 2)
    user.assert_grid_is_the_result()


@pytest.mark.slow
def test_a_lesson_asks_before_replacing_unsaved_work(user):
    user.type_cell("query", 1, 0, "9")
    user.press(Qt.Key.Key_F3, widget=user.window)
    dock = user.window.lessons_dock
    assert dock.isVisible()
    first = dock.panel.lesson_list.item(0)
    rect = dock.panel.lesson_list.visualItemRect(first)
    user.press_button("Cancel")
    user.click(dock.panel.lesson_list.viewport(), rect.center())
    assert dock.panel.runner is None
    assert user.window.session.head_matrix("query")[1, 0] == 9.0
    user.press_button("Discard")
    user.click(dock.panel.lesson_list.viewport(), rect.center())
    assert dock.panel.runner is not None
    assert not user.window.isWindowModified()  # the lesson's own numbers are not unsaved work
    user.click(dock.panel.next_button)
    assert not user.window.isWindowModified()
    assert preset("worked").snapshot.query.tolist() == user.window.session.matrix("query").tolist()


@pytest.mark.slow
def test_a_lesson_step_asks_before_replacing_a_files_changes(user, tmp_path):
    path = tmp_path / "mine.json"
    user.press(Qt.Key.Key_F3, widget=user.window)
    panel = user.window.lessons
    user.click(panel.next_button)  # starts lesson 1 (nothing unsaved: no question)
    assert panel.runner is not None and panel.runner.index == 0
    user.pick_file(path)
    user.press(Qt.Key.Key_S, CTRL | SHIFT, widget=user.window)  # the lesson's numbers, saved
    user.type_cell("key", 0, 0, "5")
    assert user.title() == "mine*"
    user.press_button("Cancel")
    user.click(panel.next_button)  # Next would put the lesson's numbers back over mine.json
    assert panel.runner.index == 0 and user.window.session.head_matrix("key")[0, 0] == 5.0
    user.press_button("Discard")
    user.click(panel.next_button)
    assert panel.runner.index == 1 and user.window.session.head_matrix("key")[0, 0] == 1.0
    assert not user.window.isWindowModified()
