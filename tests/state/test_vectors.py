"""The vectors view without Qt: dot-product text, selection, projection, one undo per drag."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.state import Session, preset
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.state.views.vectors import PROJECTION_NOTE, VectorsState, dot_text


def make(name: str = "worked") -> tuple[Session, VectorsState]:
    p = preset(name)
    session = Session(p.snapshot, p.options)
    return session, VectorsState(session, Stepper(session))


@pytest.mark.parametrize(
    ("i", "j", "first", "second"),
    [
        (0, 0, "q·k = 1·1 + 0·0 = 1", "|q| |k| cos θ = 1 · 1 · cos 0° = 1"),
        (0, 1, "q·k = 1·0 + 0·1 = 0", "|q| |k| cos θ = 1 · 1 · cos 90° = 0"),
        (0, 2, "q·k = 1·1 + 0·1 = 1", "|q| |k| cos θ = 1 · 1.414 · cos 45° = 1"),
        (2, 2, "q·k = 1·1 + 1·1 = 2", "|q| |k| cos θ = 1.414 · 1.414 · cos 0° = 2"),
    ],
)
def test_dot_text_of_the_worked_example(i, j, first, second):
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert dot_text(q[i], q[j]) == (first, second)


def test_dot_text_of_the_exercise_both_ways():
    assert dot_text([0.0, 1.0], [2.0, 0.0]) == (
        "q·k = 0·2 + 1·0 = 0",
        "|q| |k| cos θ = 1 · 2 · cos 90° = 0",
    )
    assert dot_text([1.0, 0.0], [2.0, 0.0]) == (
        "q·k = 1·2 + 0·0 = 2",
        "|q| |k| cos θ = 1 · 2 · cos 0° = 2",
    )


def test_dot_text_of_a_zero_vector_has_no_nan():
    first, second = dot_text([0.0, 0.0], [2.0, 0.0])
    assert first == "q·k = 0·2 + 0·0 = 0"
    assert second == "|q| |k| cos θ = 0 · 2 · cos θ (no angle: q has zero length) = 0"
    assert "nan" not in (first + second).lower()
    _, both = dot_text([0.0, 0.0], [0.0, 0.0])
    assert "q and k have zero length" in both


def test_long_vectors_are_summarised():
    first, second = dot_text(np.ones(16), np.full(16, 0.5))
    assert first == "q·k = 1·0.5 + 1·0.5 + 1·0.5 + … (13 more terms) = 8"
    assert second == "|q| |k| cos θ = 4 · 2 · cos 0° = 8"


def test_selection_follows_the_exercise_cell_and_says_both_ways():
    _session, vectors = make("exercise")
    vectors.select_cell(1, 3)
    title, first, second = vectors.dot_lines()
    assert title == "q2 (t2) · k4 (t4)"
    assert first == "q·k = 0·2 + 1·0 = 0"
    assert second == "|q| |k| cos θ = 1 · 2 · cos 90° = 0"
    vectors.select_cell(0, 3)
    assert vectors.dot_lines()[1] == "q·k = 1·2 + 0·0 = 2"


def test_a_bad_selection_is_refused_and_a_removed_token_is_unselected():
    session, vectors = make()
    messages = []
    session.events.message.connect(lambda text, level: messages.append(text))
    vectors.select_cell(0, 7)
    assert vectors.selection.key is None and messages
    vectors.select_cell(2, 2)
    session.remove_token(2)
    assert vectors.selection.query is None and vectors.selection.key is None


def test_an_open_prediction_is_not_given_away():
    _session, vectors = make("exercise")
    stepper = vectors._stepper
    assert stepper is not None
    stepper.seek(6)  # cells done up to (t2, t3); the next step asks about q2·k4
    stepper.step_forward()
    assert stepper.prediction is not None and stepper.prediction.status == "asking"
    vectors.select_cell(1, 3)
    assert "?" in vectors.dot_lines()[1] and "= 0" not in vectors.dot_lines()[1]
    stepper.answer("0")
    assert vectors.dot_lines()[1] == "q·k = 0·2 + 1·0 = 0"


def test_one_drag_is_one_undo_entry():
    session, vectors = make("exercise")
    vectors.set_snap(0.5)
    assert vectors.begin_drag("query", 1)
    for x, y in [(0.1, 1.2), (0.6, 1.4), (1.26, 0.74), (2.0, 0.9)]:
        assert vectors.drag_to(x, y)
    vectors.end_drag()
    np.testing.assert_array_equal(session.head_matrix("query")[1], [2.0, 1.0])
    assert session.undo_text() == "drag Q"
    assert session.undo()
    np.testing.assert_array_equal(session.head_matrix("query")[1], [0.0, 1.0])
    assert not session.can_undo()  # the preset's own load is not an undo entry
    assert session.redo()
    np.testing.assert_array_equal(session.head_matrix("query")[1], [2.0, 1.0])
    # A second drag is a second entry.
    assert vectors.begin_drag("key", 3)
    vectors.drag_to(3.0, 0.0)
    vectors.end_drag()
    session.undo()
    np.testing.assert_array_equal(session.head_matrix("key")[3], [2.0, 0.0])
    np.testing.assert_array_equal(session.head_matrix("query")[1], [2.0, 1.0])


def test_no_drag_in_a_projection_and_the_caption_says_so():
    p = preset("random")
    session = Session(p.snapshot, p.options)  # d = 4
    vectors = VectorsState(session)
    assert not vectors.draggable and not vectors.begin_drag("query", 0)
    assert not vectors.drag_to(1.0, 1.0)
    assert PROJECTION_NOTE in vectors.caption()
    assert "PCA" in vectors.caption()
    vectors.set_projection("dims", (2, 3))
    assert vectors.plane().labels == ("d3", "d4")
    vectors.set_projection("dims", (9, 9))  # out of range: clamped, never the same twice
    first, second = vectors.plane().labels
    assert first != second
    vectors.set_projection("nonsense")
    assert vectors.projection == "dims"


def test_drag_is_refused_for_bad_targets():
    _session, vectors = make()
    assert not vectors.begin_drag("value", 0)
    assert not vectors.begin_drag("query", 9)
    vectors.set_snap(-1.0)
    assert vectors.snap_step == 0.5


def test_history_merges_only_the_same_gesture():
    session, _ = make()
    session.set_block("query", 0, 0, [[5.0, 5.0]], merge="a")
    session.set_block("query", 0, 0, [[6.0, 6.0]], merge="a")
    session.set_block("query", 0, 0, [[7.0, 7.0]], merge="b")
    session.set_cell("query", 0, 0, 8.0)
    session.set_cell("query", 0, 0, 9.0)  # plain edits never merge
    values = []
    while session.can_undo():
        session.undo()
        values.append(session.head_matrix("query")[0].tolist())
    assert values == [[8.0, 7.0], [7.0, 7.0], [6.0, 6.0], [1.0, 0.0]]


def test_a_drag_writes_the_head_it_started_on_even_if_the_shown_head_changes():
    """Switching the shown head mid-drag must not split one undo entry over two heads."""
    session, vectors = make("worked")
    assert session.resize(heads=2)  # d = 2: draggable
    before = session.matrix("query").copy()
    assert vectors.begin_drag("query", 0)
    vectors.drag_to(1.0, 1.0)
    session.set_option("head", 1)
    vectors.drag_to(2.0, 2.0)
    vectors.end_drag()
    after = session.matrix("query")
    np.testing.assert_array_equal(after[0, 1], before[0, 1])  # head 2 untouched
    np.testing.assert_array_equal(after[0, 0, 0, :2], [2.0, 2.0])
    assert session.undo_text() == "drag Q"
    assert session.undo()
    np.testing.assert_array_equal(session.matrix("query"), before)
