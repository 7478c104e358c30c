"""Behaviour of the Qt-free session: edits, validation, undo/redo, events, results.

Drives :class:`attn_explorer.state.Session` with plain calls, the way the table
models and menus will, and checks what a user would see: the numbers, the
message in the status bar, what undo offers, and which events views receive.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_explorer.compute import LIMITS, STRATEGIES, attention
from attn_explorer.state import (
    MATRICES,
    Options,
    Session,
    Snapshot,
    format_number,
    parse_number,
    preset,
)
from attn_explorer.state.document import Document
from attn_explorer.state.results.results import Results

WORKED_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
WORKED_S = [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]]


class Recorder:
    """Every event a session emits, in order, as (event name, *args)."""

    def __init__(self, session: Session) -> None:
        self.calls: list[tuple] = []
        events = session.events
        for name in ("values", "shape", "tokens", "options", "dirty", "message", "undo_changed"):
            getattr(events, name).connect(
                lambda *args, _name=name: self.calls.append((_name, *args))
            )

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def of(self, name: str) -> list[tuple]:
        return [call[1:] for call in self.calls if call[0] == name]

    def messages(self) -> list[str]:
        return [text for text, _level in self.of("message")]

    def clear(self) -> None:
        self.calls.clear()


@pytest.fixture
def results(session: Session) -> Results:
    """The session's results, built beside it as the app state builds them."""
    return Results(session)


@pytest.fixture
def session() -> Session:
    """The worked example with zero-filled new cells, so resize tests can name every value."""
    from dataclasses import replace

    from attn_explorer.state.presets import worked_example

    return Session(options=replace(worked_example().options, fill="zero"))


def test_new_cells_default_to_seeded_random_values_not_blank_zeros():
    session = Session()
    assert session.options.fill == "random"
    session.resize(tokens=5, heads=2)
    new_head = session.matrix("query")[0, 1]
    assert np.count_nonzero(new_head) == new_head.size  # visible in a heatmap
    again = Session()
    again.resize(tokens=5, heads=2)
    np.testing.assert_array_equal(again.matrix("query"), session.matrix("query"))  # seeded


@pytest.fixture
def events(session: Session) -> Recorder:
    return Recorder(session)


def state_of(session: Session) -> tuple:
    """Everything a rejected edit must leave alone."""
    snap = session.snapshot()
    return (
        snap.tokens,
        snap.query.tobytes(),
        snap.key.tobytes(),
        snap.value.tobytes(),
        snap.shape,
        session.options,
        session.revision,
        session.dirty,
        session.can_undo(),
        session.can_redo(),
        session.undo_text(),
    )


def s_row(session: Session, i: int) -> list[float]:
    return Results(session).compute_now().scores[0, 0, i].tolist()


# -- the default session ---------------------------------------------------------------


def test_default_session_is_the_worked_example(session):
    assert session.tokens == ["t1", "t2", "t3"]
    assert session.shape == (1, 1, 3, 2)
    assert session.head_matrix("query").tolist() == WORKED_Q
    assert session.head_matrix("key").tolist() == WORKED_Q
    assert session.options.scale is False
    assert not session.dirty
    assert not session.can_undo() and not session.can_redo()
    assert session.undo_text() == "" and session.redo_text() == ""


def test_default_result_scores_equal_s_exactly(session, results):
    result = results.compute_now()
    assert result.scores.shape == (1, 1, 3, 3)
    assert result.scores[0, 0].tolist() == WORKED_S  # exact, not approximately
    assert result.scaled[0, 0].tolist() == WORKED_S  # scale is off in the article


def test_shape_text_labels_every_axis(session):
    assert session.shape_text() == (
        "Q, K, V: (B=1, H=1, T=3, d=2) · S = Q Kᵀ: (B=1, H=1, T_q=3, T_k=3)"
    )


# -- typing into a cell ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2", 2.0),
        ("-1.5", -1.5),
        ("1e-3", 0.001),
        (" .5 ", 0.5),
        ("0.1234567890123", 0.1234567890123),
        ("+7", 7.0),
        ("1E2", 100.0),
    ],
)
def test_set_cell_text_accepts_c_locale_numbers(session, events, text, expected):
    assert session.set_cell_text("query", 1, 0, text)
    assert session.head_matrix("query")[1, 0] == expected  # exact: full precision kept
    assert events.messages() == []
    assert session.can_undo()
    assert session.revision == 1
    assert session.dirty


def test_full_precision_round_trips_through_format_number(session):
    session.set_cell_text("key", 0, 1, "0.1234567890123")
    stored = session.head_matrix("key")[0, 1]
    assert format_number(stored) == "0.1234567890123"
    assert parse_number(format_number(stored)) == stored


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("abc", "'abc' is not a number"),
        ("1,5", "use a dot as the decimal separator"),
        ("", "the cell is empty"),
        ("   ", "the cell is empty"),
        ("nan", "NaN is not allowed"),
        ("inf", "'inf' is infinite"),
        ("-inf", "'-inf' is infinite"),
        ("1e400", "is infinite"),
        ("1_000", "is not a number"),
        ("１", "is not a number"),
    ],
)
def test_set_cell_text_rejects_with_cell_name_and_keeps_old_value(session, events, text, reason):
    before = state_of(session)
    assert not session.set_cell_text("query", 0, 0, text)
    assert state_of(session) == before  # old value, no undo entry, same revision
    (message,) = events.messages()
    assert message.startswith("Q[t1, d1] (head 1): ")
    assert reason in message
    assert message.endswith("kept the old value")
    assert events.of("message")[0][1] == "error"
    assert "values" not in events.names()


def test_comma_hint_only_when_there_is_a_comma(session, events):
    session.set_cell_text("query", 0, 0, "abc")
    session.set_cell_text("query", 0, 0, "1,5")
    plain, comma = events.messages()
    assert "dot" not in plain
    assert "dot" in comma


def test_rejected_cell_names_the_right_token_dim_and_head(session, events):
    session.resize(heads=2)
    session.rename_token(1, "cat")
    events.clear()
    assert not session.set_cell_text("value", 1, 1, "x", head=1)
    assert events.messages()[0].startswith("V[cat, d2] (head 2): ")


def test_editing_q1_changes_row_one_of_s(session):
    assert session.set_cell_text("query", 0, 0, "2")
    assert session.head_matrix("query")[0].tolist() == [2.0, 0.0]
    assert s_row(session, 0) == [2.0, 0.0, 2.0]
    assert s_row(session, 1) == WORKED_S[1]  # other rows untouched
    assert s_row(session, 2) == WORKED_S[2]


def test_editing_to_the_same_value_is_not_a_change(session, events):
    assert session.set_cell_text("query", 0, 0, "1.0")
    assert session.revision == 0
    assert not session.can_undo()
    assert not session.dirty
    assert events.calls == []


def test_set_cell_edits_only_the_chosen_head(session):
    session.resize(heads=2)
    assert session.set_cell("key", 2, 1, 5.0, head=1)
    assert session.head_matrix("key", head=1)[2, 1] == 5.0
    assert session.head_matrix("key", head=0)[2, 1] == 1.0


def test_set_cell_defaults_to_the_selected_head(session):
    session.resize(heads=3)
    session.set_option("head", 2)
    session.set_cell("query", 0, 0, 9.0)
    assert session.matrix("query")[0, :, 0, 0].tolist() == [1.0, 0.0, 9.0]


@pytest.mark.parametrize(("batch", "head"), [(0, -1), (0, 2), (1, 0), (-1, 0)])
def test_edit_of_a_head_that_does_not_exist_is_refused(session, events, batch, head):
    session.resize(heads=2)
    events.clear()
    before = state_of(session)
    assert not session.set_cell("query", 0, 0, 5.0, batch=batch, head=head)
    assert state_of(session) == before
    assert "kept the old values" in events.messages()[0]


# -- pasting a block -----------------------------------------------------------------------


def test_paste_that_fits(session, events):
    assert session.set_block("key", 1, 0, [[3, 4], [5, 6]])
    assert session.head_matrix("key").tolist() == [[1, 0], [3, 4], [5, 6]]
    assert session.undo_text() == "paste 2×2 K"
    assert events.of("values") == [("key",)]
    assert events.messages() == []


@pytest.mark.parametrize(
    ("token", "dim", "block", "reason"),
    [
        (2, 0, [[1, 2], [3, 4]], "a 2×2 block at (3, 1) does not fit the 3×2 table"),
        (0, 1, [[1, 2]], "a 1×2 block at (1, 2) does not fit the 3×2 table"),
        (-1, 0, [[1]], "does not fit"),
        (0, 0, [[1, float("nan")]], "Q[t1, d2] (head 1): nan is not a finite number"),
        (1, 0, [[1, 2], [np.inf, 0]], "Q[t3, d1] (head 1): inf is not a finite number"),
        (0, 0, [[1, 2], [3]], "not a table of numbers"),
        (0, 0, [["a", "b"]], "not a table of numbers"),
        (0, 0, [], "expected a rectangular block"),
        (0, 0, [1, 2], "expected a rectangular block"),
    ],
)
def test_paste_that_is_refused_changes_nothing(session, events, token, dim, block, reason):
    before = state_of(session)
    assert not session.set_block("query", token, dim, block)
    assert state_of(session) == before
    (message,) = events.messages()
    assert reason in message
    assert "values" not in events.names()


def test_paste_of_a_numpy_array(session):
    assert session.set_block("value", 0, 0, np.full((3, 2), 0.25))
    assert (session.head_matrix("value") == 0.25).all()


def test_unknown_matrix_name_is_an_error(session):
    with pytest.raises(ValueError, match="matrix"):
        session.set_block("weights", 0, 0, [[1]])


# -- undo / redo ---------------------------------------------------------------------------


def test_undo_redo_of_an_edit(session):
    session.set_cell_text("query", 0, 0, "2")
    assert session.undo_text() == "edit Q"
    assert session.undo()
    assert session.head_matrix("query").tolist() == WORKED_Q
    assert s_row(session, 0) == WORKED_S[0]
    assert session.redo_text() == "edit Q"
    assert session.undo_text() == ""
    assert session.redo()
    assert s_row(session, 0) == [2.0, 0.0, 2.0]
    assert not session.can_redo()


def test_undo_redo_of_a_paste(session):
    session.set_block("value", 0, 0, [[7, 8], [9, 10]])
    session.undo()
    assert session.head_matrix("value").tolist() == np.eye(3, 2).tolist()
    session.redo()
    assert session.head_matrix("value")[:2].tolist() == [[7, 8], [9, 10]]


def test_new_edit_clears_redo(session):
    session.set_cell("query", 0, 0, 2.0)
    session.undo()
    assert session.can_redo()
    session.set_cell("query", 0, 1, 3.0)
    assert not session.can_redo()
    assert session.redo_text() == ""
    assert session.head_matrix("query")[0].tolist() == [1.0, 3.0]


def test_undo_stack_is_lifo_across_kinds(session):
    session.set_cell("query", 0, 0, 2.0)
    session.insert_token(name="dog")
    session.rename_token(0, "a")
    assert session.undo_text() == "rename t1 to a"
    session.undo()
    assert session.undo_text() == "add token dog"
    session.undo()
    assert session.undo_text() == "edit Q"
    session.undo()
    assert state_of(Session())[:5] == state_of(session)[:5]
    assert [session.redo_text()] == ["edit Q"]


def test_undo_and_redo_with_empty_stacks_report(session, events):
    assert not session.undo()
    assert not session.redo()
    assert events.of("message") == [("nothing to undo", "info"), ("nothing to redo", "info")]
    assert session.revision == 0


def test_clear_history(session, events):
    session.set_cell("query", 0, 0, 2.0)
    session.undo()
    session.set_cell("query", 1, 0, 2.0)
    events.clear()
    session.clear_history()
    assert not session.can_undo() and not session.can_redo()
    assert events.names() == ["undo_changed"]


def test_insert_token_and_undo(session, events):
    assert session.insert_token(1, "cat")
    assert session.tokens == ["t1", "cat", "t2", "t3"]
    assert session.shape == (1, 1, 4, 2)
    for name in MATRICES:
        assert session.head_matrix(name)[1].tolist() == [0.0, 0.0]
    assert session.head_matrix("query")[[0, 2, 3]].tolist() == WORKED_Q
    assert session.undo_text() == "add token cat"
    session.undo()
    assert session.tokens == ["t1", "t2", "t3"]
    assert session.head_matrix("query").tolist() == WORKED_Q
    session.redo()
    assert session.tokens == ["t1", "cat", "t2", "t3"]


def test_insert_token_default_place_and_unused_name(session):
    session.rename_token(2, "t4")
    session.insert_token()
    assert session.tokens == ["t1", "t2", "t4", "t5"]
    session.insert_token(-3)  # clamped to the front
    assert session.tokens[0] == "t6"


def test_remove_token_and_undo(session, results):
    assert session.remove_token(0)
    assert session.tokens == ["t2", "t3"]
    assert session.head_matrix("key").tolist() == WORKED_Q[1:]
    assert results.compute_now().scores[0, 0].tolist() == [[1, 1], [1, 2]]
    assert session.undo_text() == "remove token t1"
    session.undo()
    assert results.compute_now().scores[0, 0].tolist() == WORKED_S


def test_remove_last_token_is_refused(session, events):
    session.remove_token(0)
    session.remove_token(0)
    events.clear()
    before = state_of(session)
    assert not session.remove_token(0)
    assert state_of(session) == before
    assert "cannot remove the last token" in events.messages()[0]


@pytest.mark.parametrize("index", [3, -1])
def test_remove_missing_token_is_refused(session, events, index):
    before = state_of(session)
    assert not session.remove_token(index)
    assert state_of(session) == before
    assert f"no token number {index + 1}" in events.messages()[0]


def test_rename_token_and_undo(session, events):
    assert session.rename_token(1, "  cat ")
    assert session.tokens == ["t1", "cat", "t3"]
    assert session.undo_text() == "rename t2 to cat"
    assert session.revision == 0  # names do not change the numbers
    assert events.names() == ["dirty", "tokens", "undo_changed"]
    session.undo()
    assert session.tokens == ["t1", "t2", "t3"]
    session.redo()
    assert session.tokens == ["t1", "cat", "t3"]


@pytest.mark.parametrize("name", ["", "   "])
def test_rename_to_empty_is_refused(session, events, name):
    before = state_of(session)
    assert not session.rename_token(0, name)
    assert state_of(session) == before
    assert "cannot be empty" in events.messages()[0]


def test_rename_to_the_same_name_is_not_a_change(session, events):
    assert session.rename_token(0, "t1")
    assert events.calls == []
    assert not session.can_undo()


# -- resize --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "shape"),
    [
        ({"tokens": 5}, (1, 1, 5, 2)),
        ({"tokens": 2}, (1, 1, 2, 2)),
        ({"dim": 4}, (1, 1, 3, 4)),
        ({"dim": 1}, (1, 1, 3, 1)),
        ({"heads": 3}, (1, 3, 3, 2)),
        ({"batch": 2}, (2, 1, 3, 2)),
        ({"batch": 2, "heads": 2, "tokens": 4, "dim": 3}, (2, 2, 4, 3)),
    ],
)
def test_resize_keeps_the_overlap_and_zero_fills(session, change, shape):
    before = session.snapshot()
    assert session.resize(**change)
    assert session.shape == shape
    b, h, t, d = (min(a, c) for a, c in zip(shape, before.shape, strict=True))
    for name in MATRICES:
        new = session.matrix(name)
        old = getattr(before, name)
        np.testing.assert_array_equal(new[:b, :h, :t, :d], old[:b, :h, :t, :d])
        grown = np.ones(shape, dtype=bool)
        grown[:b, :h, :t, :d] = False
        assert (new[grown] == 0).all()
    assert len(session.tokens) == shape[2]
    assert session.tokens[: min(3, shape[2])] == ["t1", "t2", "t3"][: shape[2]]
    session.undo()
    assert session.shape == before.shape
    for name in MATRICES:
        np.testing.assert_array_equal(session.matrix(name), getattr(before, name))
    assert session.tokens == ["t1", "t2", "t3"]


def test_resize_undo_text_names_what_changed(session):
    session.resize(tokens=4, dim=3)
    assert session.undo_text() == "resize T=4, d=3"


def test_resize_to_the_same_shape_is_not_a_change(session, events):
    assert session.resize(tokens=3, dim=2)
    assert events.calls == []
    assert not session.can_undo()


def test_resize_names_new_tokens_without_clashes(session):
    session.rename_token(2, "t4")
    session.resize(tokens=5)
    assert session.tokens == ["t1", "t2", "t4", "t5", "t6"]


def test_resize_with_repeated_token_names_terminates():
    p = preset("duplicates")
    session = Session(p.snapshot, p.options)
    # In a daemon thread, so that a regression (an endless renaming loop) fails
    # this test instead of hanging the whole run.
    done: list[bool] = []
    worker = threading.Thread(target=lambda: done.append(session.resize(tokens=4)), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert done == [True], "resize did not finish"
    assert session.tokens == ["the", "the", "cat", "t4"]
    assert session.resize(heads=2)
    assert session.resize(tokens=2)
    assert session.tokens == ["the", "the"]


def random_fill_session(seed: int) -> Session:
    session = Session()
    session.set_option("fill", "random")
    session.set_option("seed", seed)
    session.resize(tokens=5, dim=3)
    return session


def test_resize_random_fill_is_seeded_and_differs_per_matrix():
    first, again, other = random_fill_session(3), random_fill_session(3), random_fill_session(4)
    new_rows = [first.head_matrix(name)[3:] for name in MATRICES]
    for name in MATRICES:
        np.testing.assert_array_equal(first.matrix(name), again.matrix(name))
        assert not np.array_equal(first.matrix(name), other.matrix(name))
        assert first.head_matrix(name)[:3, :2].tolist() == Session().head_matrix(name).tolist()
    assert all((rows != 0).any() for rows in new_rows)
    # Q, K and V must not share their new numbers (q_i = k_i biases attention).
    assert not np.array_equal(new_rows[0], new_rows[1])
    assert not np.array_equal(new_rows[1], new_rows[2])
    assert (np.round(new_rows[0], 3) == new_rows[0]).all()  # rounded to read well


def test_insert_token_random_fill_differs_per_matrix(session):
    session.set_option("fill", "random")
    session.insert_token()
    rows = [session.head_matrix(name)[3] for name in MATRICES]
    assert (rows[0] != 0).any()
    assert not np.array_equal(rows[0], rows[1])
    assert not np.array_equal(rows[0], rows[2])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tokens": 0}, "T ≥ 1"),
        ({"dim": 0}, "d ≥ 1"),
        ({"heads": 0}, "H ≥ 1"),
        ({"batch": 0}, "B ≥ 1"),
        ({"tokens": -2}, "T ≥ 1"),
        ({"tokens": 9000}, f"T = 9000 is over the limit of {LIMITS.max_tokens}"),
        ({"heads": 65}, f"H = 65 is over the limit of {LIMITS.max_heads}"),
        ({"dim": 600}, f"d = 600 is over the limit of {LIMITS.max_dim}"),
        ({"batch": 9}, f"B = 9 is over the limit of {LIMITS.max_batch}"),
        (
            {"batch": 8, "heads": 64, "tokens": 512, "dim": 512},
            "134,217,728 values, over the limit of 67,108,864",
        ),
        (
            {"batch": 8, "heads": 64, "tokens": 2048, "dim": 1},
            "2,147,483,648 values, over the limit of 268,435,456",
        ),
    ],
)
def test_resize_out_of_limits_is_refused(session, events, change, reason):
    before = state_of(session)
    assert not session.resize(**change)
    assert state_of(session) == before
    (message,) = events.messages()
    assert message.startswith("cannot resize to (B=")
    assert reason in message


def test_check_size_accepts_the_largest_allowed_sizes():
    assert Session.check_size(1, 1, LIMITS.max_tokens, 1) == ""
    assert Session.check_size(LIMITS.max_batch, LIMITS.max_heads, 1, LIMITS.max_dim) == ""
    assert Session.check_size(1, 1, 1, 1) == ""


def test_insert_token_over_the_limit_is_refused(session, events):
    session.resize(tokens=LIMITS.max_tokens, dim=1)
    events.clear()
    before = state_of(session)
    assert not session.insert_token()
    assert state_of(session) == before
    assert "over the limit" in events.messages()[0]


def test_resize_clamps_the_selected_head(session, events):
    session.resize(heads=4)
    session.set_option("head", 3)
    events.clear()
    session.resize(heads=2)
    assert session.options.head == 1
    assert ("options", "all") in events.calls
    session.undo()
    assert session.shape[1] == 4


def test_undoing_a_resize_keeps_options_chosen_since(session):
    session.resize(tokens=4)
    session.set_option("strategy", "loop")
    session.set_option("dtype", "float32")
    session.undo()
    assert session.shape == (1, 1, 3, 2)
    assert session.options.strategy == "loop"
    assert session.options.dtype == "float32"


# -- load ----------------------------------------------------------------------------------


def test_load_a_preset_and_undo(session, results, events):
    before = session.options
    p = preset("causal")
    assert session.load(p.snapshot, p.options, text="load causal")
    assert session.tokens == list(p.snapshot.tokens)
    assert session.shape == (1, 2, 6, 4)
    assert session.options == p.options
    assert session.undo_text() == "load causal"
    assert {"shape", "tokens"} <= set(events.names())
    assert ("options", "all") in events.calls
    assert before != p.options
    session.set_option("stage", "masked")  # a view setting chosen after the load
    session.undo()  # undo covers the numbers and the shape; options stay as they are
    assert session.shape == (1, 1, 3, 2)
    assert session.options == replace(p.options, stage="masked", head=0)
    assert results.compute_now().scores[0, 0].tolist() == WORKED_S
    session.set_option("causal", False)
    session.redo()
    assert session.shape == (1, 2, 6, 4)
    assert session.options == replace(p.options, stage="masked", causal=False, head=0)


def test_load_copies_the_snapshot(session):
    p = preset("identity")
    session.load(p.snapshot)
    p.snapshot.query[0, 0, 0, 0] = 42.0
    assert session.head_matrix("query")[0, 0] == 1.0


def test_load_without_options_keeps_options(session):
    session.set_option("strategy", "matmul")
    session.load(preset("identity").snapshot)
    assert session.options.strategy == "matmul"


def test_load_converts_integers_to_float64(session):
    q = np.arange(6).reshape(1, 1, 3, 2)
    assert session.load(Snapshot(("a", "b", "c"), q, q, q))
    assert session.matrix("query").dtype == np.float64


def ones(*shape: int) -> np.ndarray:
    return np.ones(shape)


@pytest.mark.parametrize(
    ("snapshot", "options", "reason"),
    [
        (Snapshot(("a",), ones(1, 1, 3, 2), ones(1, 1, 3, 2), ones(1, 1, 3, 2)), None, "1 token"),
        (Snapshot(("a", "b"), ones(1, 1, 2, 2), ones(1, 1, 2, 3), ones(1, 1, 2, 2)), None, "key"),
        (
            Snapshot(("a", "b"), ones(1, 1, 2, 2), ones(1, 1, 2, 2), np.full((1, 1, 2, 2), np.nan)),
            None,
            "V[a, d1] (head 1): nan is not a finite number",  # numbered from 1, by name
        ),
        (Snapshot(("a", "b"), ones(2, 2), ones(2, 2), ones(2, 2)), None, "(B, H, T, d)"),
        (Snapshot((), ones(1, 1, 0, 2), ones(1, 1, 0, 2), ones(1, 1, 0, 2)), None, "T ≥ 1"),
        (
            Snapshot(("a", "b"), ones(1, 1, 2, 2), ones(1, 1, 2, 2), ones(1, 1, 2, 2)),
            Options(head=1),
            "head: 1 is outside 0..0",
        ),
        (
            Snapshot(("a", "b"), ones(1, 1, 2, 2), ones(1, 1, 2, 2), ones(1, 1, 2, 2)),
            Options(strategy="foo"),
            "strategy",
        ),
    ],
)
def test_load_of_a_bad_snapshot_is_refused(session, events, snapshot, options, reason):
    before = state_of(session)
    assert not session.load(snapshot, options)
    assert state_of(session) == before
    (message,) = events.messages()
    assert message.startswith("load: ")
    assert reason in message


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("strategy", "foo", "strategy: 'foo' is not one of loop, matmul, batched"),
        ("stage", "logits", "stage"),
        ("dtype", "float16", "dtype"),
        ("fill", "ones", "fill"),
        ("granularity", "word", "granularity"),
        ("head", 1, "head: 1 is outside 0..0"),
        ("head", -1, "head: -1 is outside"),
        ("batch_index", 1, "batch_index: 1 is outside 0..0"),
        ("head", 0.5, "head: expected a whole number"),
        ("head", True, "head: expected a whole number"),
        ("causal", "no", "causal: expected True or False"),
        ("scale", 1, "scale: expected True or False"),
        ("score_colormap", "jet", "score_colormap: 'jet' is not one of"),
        ("seed", -1, "seed: -1 is negative"),
        ("step", -2, "step"),
        ("colour", "red", "unknown option 'colour'"),
    ],
)
def test_invalid_option_is_reported_and_ignored(session, events, name, value, reason):
    before = state_of(session)
    assert not session.set_option(name, value)
    assert state_of(session) == before
    (message,) = events.messages()
    assert reason in message
    assert "options" not in events.names()


def test_valid_option_emits_its_name(session, events):
    assert session.set_option("stage", "weights")
    assert session.options.stage == "weights"
    assert events.names() == ["dirty", "options"]
    assert events.of("options") == [("stage",)]
    assert session.revision == 0  # the result holds every stage
    assert not session.can_undo()  # options are not on the undo stack


@pytest.mark.parametrize("name", ["head", "batch_index", "step", "granularity"])
def test_view_only_options_do_not_make_the_session_dirty(name):
    session = Session()
    session.resize(batch=2, heads=2)
    session.mark_saved()
    value = {"head": 1, "batch_index": 1, "step": 4, "granularity": "row"}[name]
    assert session.set_option(name, value)
    assert not session.dirty
    assert session.revision == 1


def test_setting_an_option_to_its_value_is_silent(session, events):
    assert session.set_option("strategy", session.options.strategy)
    assert events.calls == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("strategy", "loop"), ("scale", True), ("causal", True), ("dtype", "float32")],
)
def test_result_cache_invalidated_by_options_that_change_results(session, results, name, value):
    first = results.compute_now()
    assert results.compute_now() is first  # cached
    revision = session.revision
    session.set_option(name, value)
    assert session.revision == revision + 1
    assert results.compute_now() is not first


def test_result_cache_survives_view_only_options(session, results):
    first = results.compute_now()
    session.set_option("stage", "output")
    session.set_option("score_colormap", "greys")
    assert results.compute_now() is first


def test_result_follows_scale_causal_and_dtype(session, results):
    session.set_option("scale", True)
    np.testing.assert_allclose(results.compute_now().scaled[0, 0], np.array(WORKED_S) / np.sqrt(2))
    session.set_option("causal", True)
    weights = results.compute_now().weights[0, 0]
    assert weights[0].tolist() == [1.0, 0.0, 0.0]
    assert (weights[np.triu_indices(3, 1)] == 0).all()
    session.set_option("dtype", "float32")
    assert results.compute_now().weights.dtype == np.float32


def test_result_cache_invalidated_by_edits_and_undo(session, results):
    first = results.compute_now()
    session.set_cell("key", 2, 1, 3.0)
    second = results.compute_now()
    assert second is not first
    assert second.scores[0, 0, 2, 2] == 4.0  # q3·k3 = 1·1 + 1·3
    session.undo()
    assert results.compute_now().scores[0, 0, 2, 2] == 2.0
    session.rename_token(0, "x")
    third = results.compute_now()
    assert results.compute_now() is third


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_gives_the_same_result_through_the_session(strategy):
    p = preset("random")
    session = Session(p.snapshot, p.options)
    session.set_option("causal", True)
    reference = attention(
        p.snapshot.query, p.snapshot.key, p.snapshot.value, strategy="batched", causal=True
    )
    if session.options.strategy != strategy:
        assert session.set_option("strategy", strategy)
    result = Results(session).compute_now()
    assert result.strategy == strategy
    np.testing.assert_allclose(result.scores, reference.scores, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.weights, reference.weights, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.output, reference.output, rtol=1e-12, atol=1e-12)


def test_strategy_loop_matches_exactly_on_the_worked_example(session, results):
    by_strategy = {}
    for strategy in STRATEGIES:
        session.set_option("strategy", strategy)
        by_strategy[strategy] = results.compute_now()
        assert by_strategy[strategy].strategy == strategy
    for strategy in STRATEGIES:
        assert by_strategy[strategy].scores[0, 0].tolist() == WORKED_S


def test_accept_result_drops_stale_revisions(session, results):
    request = results.request()
    computed = request.run()
    session.set_cell("query", 0, 0, 2.0)  # the user typed while the worker ran
    assert not results.accept(computed)
    assert results.compute_now() is not computed.result
    assert s_row(session, 0) == [2.0, 0.0, 2.0]
    fresh = results.request().run()
    assert results.accept(fresh)
    assert results.compute_now() is fresh.result


def test_results_emit_changed_once_per_accepted_result(session, results):
    seen = []
    results.changed.connect(lambda: seen.append(results.result))
    results.compute_now()
    assert len(seen) == 1 and seen[0] is results.compute_now()
    results.compute_now()  # cached: nothing new to tell
    assert len(seen) == 1
    session.set_cell("query", 0, 0, 2.0)
    assert not results.up_to_date
    assert results.result is seen[0]  # the last result stays until the new one
    results.compute_now()
    assert len(seen) == 2


def test_results_agreement_and_provenance(session, results):
    request = results.request()
    results.begin(request)
    results.accept(request.run())
    assert results.agreement_pending
    assert "Checking that the other strategies agree" in results.provenance()
    assert results.accept_agreement(request.revision, request.agreement())
    assert set(results.diffs) == {"loop", "matmul", "tiled"}
    assert max(results.diffs.values()) == 0.0
    assert "they agree" in results.provenance()
    assert "computed with <b>batched</b>" in results.provenance()


def test_results_use_the_loop_only_within_its_budget(session, results, monkeypatch):
    from attn_explorer.compute import LoopBudget

    session.set_option("strategy", "loop")
    assert results.request().used == "loop"
    results = Results(session, LoopBudget(result=0.0))
    request = results.request()
    assert request.used == "batched" and request.strategy == "loop"
    results.compute_now()
    assert results.used == "batched"
    assert "so the result shown was computed with <b>batched</b>" in (results.provenance())


# -- compute inputs and read-only views ----------------------------------------------------


def test_compute_requests_are_copies(session, results):
    request = results.request()
    assert request.strategy == "batched"
    assert request.scale is False and request.causal is False
    assert request.revision == 0
    for name in MATRICES:
        getattr(request, name)[...] = 99.0
    assert session.head_matrix("query").tolist() == WORKED_Q
    assert results.compute_now().scores[0, 0].tolist() == WORKED_S


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compute_requests_respect_dtype(session, results, dtype):
    session.set_option("dtype", dtype)
    request = results.request()
    for name in MATRICES:
        assert getattr(request, name).dtype == np.dtype(dtype)
    assert session.matrix("query").dtype == np.float64  # storage stays full precision
    assert results.compute_now().scores.dtype == np.dtype(dtype)


@pytest.mark.parametrize("name", MATRICES)
def test_matrix_views_are_read_only(session, name):
    with pytest.raises(ValueError, match="read-only"):
        session.matrix(name)[0, 0, 0, 0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        session.head_matrix(name)[0, 0] = 5.0
    assert session.matrix(name)[0, 0, 0, 0] == 1.0


def test_snapshot_and_tokens_are_copies(session):
    snap = session.snapshot()
    snap.query[0, 0, 0, 0] = 5.0
    names = session.tokens
    names.append("extra")
    assert session.head_matrix("query")[0, 0] == 1.0
    assert session.tokens == ["t1", "t2", "t3"]


def test_session_copies_the_snapshot_it_starts_from():
    q = np.ones((1, 1, 2, 2))
    session = Session(Snapshot(("a", "b"), q, q, q))
    q[...] = 7.0
    assert (session.matrix("key") == 1.0).all()
    assert session.options == Options()


# -- events --------------------------------------------------------------------------------


def test_cell_edit_events(session, events):
    session.set_cell("key", 0, 0, 2.0)
    assert events.calls == [("dirty", True), ("values", "key"), ("undo_changed",)]
    events.clear()
    session.set_cell("key", 0, 1, 2.0)  # already dirty: no second dirty event
    assert events.calls == [("values", "key"), ("undo_changed",)]
    events.clear()
    session.undo()
    assert events.calls == [("values", "key"), ("undo_changed",)]


def test_structural_edit_events(session, events):
    session.insert_token()
    assert events.names() == ["dirty", "shape", "tokens", "undo_changed"]
    assert "values" not in events.names()


def test_load_same_shape_emits_values_not_shape(session, events):
    p = preset("worked")
    session.load(p.snapshot)
    assert "shape" not in events.names()
    assert sorted(args[0] for args in events.of("values")) == sorted(MATRICES)
    assert "tokens" in events.names()


def test_dirty_toggles_and_mark_saved(session, events):
    session.set_cell("query", 0, 0, 2.0)
    document = Document(session, path="/tmp/x.json")  # the file, as Document.save_to sets it
    session.mark_saved()
    assert document.path == "/tmp/x.json"
    assert not session.dirty
    assert events.of("dirty") == [(True,), (False,)]
    session.mark_saved()
    assert events.of("dirty") == [(True,), (False,)]  # no repeat
    assert document.path == "/tmp/x.json"
    session.undo()
    assert session.dirty


def test_report_sends_a_message(session, events):
    session.report("hello", "info")
    assert events.calls == [("message", "hello", "info")]


def test_disconnected_callbacks_stop_receiving(session):
    seen: list[str] = []
    session.events.values.connect(seen.append)
    session.set_cell("query", 0, 0, 2.0)
    session.events.values.disconnect(seen.append)
    session.events.values.disconnect(seen.append)  # twice is harmless
    session.set_cell("query", 0, 0, 3.0)
    assert seen == ["query"]


def test_a_callback_may_disconnect_itself_during_emit(session):
    seen: list[str] = []

    def once(name: str) -> None:
        seen.append(name)
        session.events.values.disconnect(once)

    session.events.values.connect(once)
    session.events.values.connect(seen.append)
    session.set_cell("query", 0, 0, 2.0)
    session.set_cell("query", 0, 0, 3.0)
    assert seen == ["query", "query", "query"]


# -- parse / format ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_number_round_trips_every_finite_float(value):
    assert parse_number(format_number(value)) == value


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(MATRICES),
            st.integers(0, 2),
            st.integers(0, 1),
            st.floats(-1e6, 1e6, allow_nan=False),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_undoing_every_edit_restores_the_start(edits):
    session = Session()
    start = session.snapshot()
    states = [start]
    for matrix, token, dim, value in edits:
        changes = session.matrix(matrix)[0, 0, token, dim] != value
        assert session.set_cell(matrix, token, dim, value)
        if changes:  # an edit to the same value is not put on the stack
            states.append(session.snapshot())
    while session.can_undo():
        session.undo()
        states.pop()
        for name in MATRICES:
            np.testing.assert_array_equal(session.matrix(name), getattr(states[-1], name))
    assert len(states) == 1
    while session.can_redo():
        session.redo()
    for name in MATRICES:
        final = session.matrix(name)
        expected = getattr(start, name).copy()
        for matrix, token, dim, value in edits:
            if matrix == name:
                expected[0, 0, token, dim] = value
        np.testing.assert_array_equal(final, expected)
