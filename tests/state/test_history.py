"""The undo stack's saved position: the modified mark follows undo and redo (issue 23, defect 2)."""

from __future__ import annotations

from attn_explorer.state import preset
from attn_explorer.state.history import History
from attn_explorer.state.session import Session


def counter_history() -> tuple[History, list[int]]:
    """A history over one number (``value[0]``)."""
    return History(lambda: None), [0]


def push(history: History, value: list[int], new: int, merge: object = None) -> None:
    old = value[0]
    history.push(
        f"set {new}",
        lambda: value.__setitem__(0, old),
        lambda: value.__setitem__(0, new),
        merge_key=merge,
    )


def test_the_saved_position_follows_undo_and_redo():
    history, value = counter_history()
    assert history.at_saved
    push(history, value, 1)
    push(history, value, 2)
    history.mark_saved()
    assert history.at_saved and value == [2]
    history.undo()
    assert not history.at_saved and value == [1]
    history.redo()
    assert history.at_saved and value == [2]
    push(history, value, 3)
    assert not history.at_saved
    history.undo()
    assert history.at_saved


def test_a_new_change_after_undoing_past_the_save_makes_it_unreachable():
    history, value = counter_history()
    push(history, value, 1)
    history.mark_saved()
    history.undo()
    push(history, value, 5)  # the saved state (1) was in the redo stack, now forgotten
    assert not history.at_saved
    history.undo()
    assert value == [0] and not history.at_saved


def test_a_merged_gesture_over_the_saved_state_changes_it():
    history, value = counter_history()
    push(history, value, 1, merge="drag")
    history.mark_saved()
    push(history, value, 2, merge="drag")  # the same drag, continued: one entry, now at 2
    assert not history.at_saved
    history.undo()
    assert value == [0] and not history.at_saved
    history.redo()
    assert value == [2] and not history.at_saved


def test_undo_runs_with_replaying_set_and_apply_runs_only_once():
    history = History(lambda: None)
    seen: list[str] = []
    history.push(
        "x",
        lambda: seen.append(f"undo {history.replaying}"),
        lambda: seen.append(f"redo {history.replaying}"),
        apply=lambda: seen.append(f"apply {history.replaying}"),
    )
    history.undo()
    history.redo()
    assert seen == ["apply False", "undo True", "redo True"]


def test_session_undo_back_to_the_saved_numbers_is_unmodified():
    session = Session()
    marks: list[bool] = []
    session.events.dirty.connect(marks.append)
    session.set_cell("query", 0, 0, 2.0)
    session.resize(tokens=4)
    session.mark_saved()
    assert not session.dirty
    session.undo()
    session.undo()
    assert session.dirty
    session.redo()
    session.redo()
    assert not session.dirty
    session.rename_token(0, "The")
    assert session.dirty
    session.undo()
    assert not session.dirty
    assert marks == [True, False, True, False, True, False]


def test_session_options_a_file_keeps_count_and_view_position_does_not():
    session = Session()
    session.set_option("causal", True)
    assert session.dirty
    session.set_option("causal", False)  # as it was: nothing to save
    assert not session.dirty
    session.set_option("granularity", "cell")  # not kept as a change
    session.set_option("step", 3)
    assert not session.dirty
    session.set_cell("query", 0, 0, 5.0)
    session.set_option("stage", "weights")
    session.undo()  # the numbers are back, the stage is not what the file holds
    assert session.dirty and session.options.stage == "weights"


def test_recovered_work_stays_modified_after_the_history_is_cleared():
    session = Session()
    p = preset("identity")
    session.load(p.snapshot, p.options, "recover")
    session.clear_history()
    assert session.dirty and not session.can_undo()
    session.mark_saved()
    session.clear_history()
    assert not session.dirty
