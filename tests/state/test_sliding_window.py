"""The session's sliding-window option: validated, computed by every strategy, kept through
head-by-head recomputes, saved in session files (and absent from older files)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attn_explorer.compute import STRATEGIES, attention
from attn_explorer.state.presets import preset
from attn_explorer.state.results.results import Results
from attn_explorer.state.session import Session
from attn_explorer.state.storage import session_file as io
from attn_explorer.state.types import Options


def band(t: int, w: int) -> np.ndarray:
    """Query i sees keys i-w+1..i, written as loops."""
    return np.array([[i - w < j <= i for j in range(t)] for i in range(t)])


def random_session(**options: object) -> Session:
    p = preset("random")
    session = Session(p.snapshot, p.options)
    for name, value in options.items():
        assert session.set_option(name, value), name
    return session


def test_window_acts_only_with_causal():
    assert Options().window == 0 and Options().mask_window is None
    assert Options(window=3).mask_window is None  # causal off: remembered, not applied
    assert Options(causal=True, window=3).mask_window == 3
    assert Options(causal=True).mask_window is None


@pytest.mark.parametrize(
    ("window", "message"), [(-1, "outside"), (9000, "outside"), (2.5, "whole")]
)
def test_a_bad_window_is_refused_and_nothing_changes(window, message):
    session = random_session(causal=True, window=2)
    said: list[str] = []
    session.events.message.connect(lambda text, *_: said.append(text))
    revision = session.revision
    assert not session.set_option("window", window)
    assert session.options.window == 2 and session.revision == revision
    assert len(said) == 1 and message in said[0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_computes_the_band(strategy):
    session = random_session(causal=True, strategy=strategy)
    results = Results(session)
    full = results.compute_now()
    assert session.set_option("window", 2)
    result = results.compute_now()
    t = session.shape[2]
    np.testing.assert_array_equal(np.isneginf(result.masked[0, 0]), ~band(t, 2))
    q, k, v = (session.matrix(name) for name in ("query", "key", "value"))
    reference = attention(q, k, v, causal=True, window=2)
    np.testing.assert_allclose(result.weights, reference.weights, rtol=1e-12, atol=1e-14)
    assert not np.allclose(result.weights, full.weights)  # the window hid something
    assert session.set_option("causal", False)  # off: no mask at all, the window kept
    assert session.options.window == 2
    assert not np.isneginf(results.compute_now().masked).any()


def test_an_edit_of_one_head_keeps_the_window():
    session = random_session(causal=True, window=2)
    results = Results(session)
    results.compute_now()
    session.set_cell("key", 0, 0, 5.0, head=1)
    result = results.compute_now()
    q, k, v = (session.matrix(name) for name in ("query", "key", "value"))
    reference = attention(q, k, v, causal=True, window=2)
    np.testing.assert_allclose(result.weights, reference.weights, rtol=1e-12, atol=1e-14)


def test_session_files_keep_the_window_and_older_files_open_without_it(tmp_path):
    session = random_session(causal=True, window=3)
    path = io.save_session(session, tmp_path / "w.json", "w")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["options"]["window"] == 3
    loaded = io.load_session(path)
    assert loaded.options.window == 3 and loaded.options.mask_window == 3
    del data["options"]["window"]  # a file written before the option existed
    older = io.session_from_dict(data)
    assert older.options.window == 0 and older.options.causal
    data["options"]["window"] = -4
    with pytest.raises(io.SessionFileError, match=r"options\.window"):
        io.session_from_dict(data)
