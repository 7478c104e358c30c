"""Issue 12, item 1: a value that would overflow later is refused at entry, by cell and limit."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.compute import MAX_ABS_VALUE
from attn_explorer.state import Session, Snapshot, parse_number
from attn_explorer.state.results.results import Results

LIMIT_TEXT = f"{MAX_ABS_VALUE:g}"


def messages(session: Session) -> list[str]:
    seen: list[str] = []
    session.events.message.connect(lambda text, _level: seen.append(text))
    return seen


def state_of(session: Session) -> tuple:
    snap = session.snapshot()
    return (snap.query.tobytes(), snap.key.tobytes(), snap.value.tobytes(), session.can_undo())


@pytest.mark.parametrize("text", ["1e308", "-1.7e308", "1e154", "1000000000000001", "-2e15"])
def test_typing_a_value_over_the_limit_names_the_cell_and_the_limit(text):
    session = Session()
    seen = messages(session)
    before = state_of(session)
    assert not session.set_cell_text("key", 1, 0, text)
    assert state_of(session) == before
    (message,) = seen
    assert message.startswith("K[t2, d1] (head 1): ")
    assert "limit" in message and LIMIT_TEXT in message, message


def test_the_limit_itself_is_accepted_and_computes():
    session = Session()
    assert session.set_cell_text("query", 0, 0, "1e15")
    assert session.set_cell_text("key", 0, 0, "-1e15")
    result = Results(session).compute_now()
    assert np.isfinite(result.scores).all() and np.isfinite(result.weights).all()
    session.set_option("dtype", "float32")
    assert np.isfinite(Results(session).compute_now().weights).all()


def test_paste_over_the_limit_is_refused_by_cell():
    session = Session()
    seen = messages(session)
    before = state_of(session)
    assert not session.set_block("value", 0, 0, [[1.0, 2.0], [3.0, 1e154]])
    assert state_of(session) == before
    (message,) = seen
    assert message.startswith("V[t2, d2] (head 1): ") and LIMIT_TEXT in message, message


def test_load_over_the_limit_is_refused():
    session = Session()
    seen = messages(session)
    before = state_of(session)
    big = np.ones((1, 1, 2, 2))
    big[0, 0, 1, 0] = 1e300
    ones = np.ones((1, 1, 2, 2))
    assert not session.load(Snapshot(("a", "b"), ones, big, ones), text="load file")
    assert state_of(session) == before
    (message,) = seen
    assert message.startswith("load file: K[b, d1] (head 1)") and LIMIT_TEXT in message, message


def test_parse_number_takes_an_optional_limit():
    assert parse_number("1e308") == 1e308  # a plain parser by default: stepper answers, round trips
    assert parse_number("-1e15", max_abs=MAX_ABS_VALUE) == -1e15
    with pytest.raises(ValueError, match=r"'1e16' is over the limit of ±1e\+15"):
        parse_number("1e16", max_abs=MAX_ABS_VALUE)
    with pytest.raises(ValueError, match="is infinite"):
        parse_number("1e400", max_abs=MAX_ABS_VALUE)


def test_undo_after_a_refused_value_still_works():
    session = Session()
    assert session.set_cell_text("query", 0, 0, "5")
    assert not session.set_cell_text("query", 0, 0, "1e308")
    assert session.undo()
    assert session.head_matrix("query")[0, 0] == 1.0
