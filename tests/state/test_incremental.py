"""An edit of a few heads recomputes only them, and the result is the full recompute's.

Scores, scaled and masked scores are the same numbers to the bit; the softmax shares
one shift between the rows of a block (compute/softmax.py), and which heads share a
block depends on how many heads are computed, so weights and output agree to a few
units in the last place.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.compute import STAGES, STRATEGIES, attention
from attn_explorer.state import Session, Snapshot
from attn_explorer.state.results import results as results_module
from attn_explorer.state.results.preview import make_preview
from attn_explorer.state.results.results import Results

TIGHT = {"float64": 1e-12, "float32": 2e-6}


def session_of(shape, seed=0, **options) -> Session:
    rng = np.random.default_rng(seed)
    t = shape[2]
    q, k, v = (np.round(rng.standard_normal(shape), 3) for _ in range(3))
    session = Session(Snapshot(tuple(f"t{n + 1}" for n in range(t)), q, k, v))
    for name, value in options.items():
        session.set_option(name, value)
    return session


def full_recompute(session: Session, strategy: str):
    o = session.options
    dtype = np.dtype(o.dtype)
    return attention(
        *(session.matrix(m).astype(dtype) for m in ("query", "key", "value")),
        strategy=strategy,
        scale=o.scale,
        causal=o.causal,
    )


def run_request(results: Results):
    request = results.request()
    results.begin(request)
    outcome = request.run()
    assert results.accept(outcome)
    return request, outcome


def assert_same_as_full(session: Session, outcome, strategy: str) -> None:
    full = full_recompute(session, strategy)
    tolerance = TIGHT[session.options.dtype]
    for stage in STAGES:
        mine, theirs = outcome.result.stage(stage), full.stage(stage)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, stage
        if stage in ("scores", "scaled", "masked"):
            np.testing.assert_array_equal(mine, theirs, err_msg=stage)
        else:
            np.testing.assert_allclose(mine, theirs, rtol=tolerance, atol=tolerance, err_msg=stage)
    np.testing.assert_array_equal(outcome.result.fully_masked_rows, full.fully_masked_rows)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("matrix", ["query", "key", "value"])
def test_one_cell_recomputes_one_head_and_equals_a_full_recompute(strategy, causal, dtype, matrix):
    session = session_of((2, 4, 9, 3), strategy=strategy, causal=causal, dtype=dtype)
    results = Results(session)
    run_request(results)
    session.set_cell(matrix, 4, 1, 2.5, batch=1, head=2)
    request, outcome = run_request(results)
    assert request.base is not None and request.heads.tolist() == [[1, 2]]
    assert outcome.used == strategy  # the loop stays the loop on a shape it can afford
    assert_same_as_full(session, outcome, strategy)


def test_masked_rows_and_a_scale_that_drops_are_spliced_too():
    session = session_of((1, 3, 6, 2), causal=True, scale=False)
    results = Results(session)
    run_request(results)
    session.set_block("key", 0, 0, [[40.0, -40.0], [-40.0, 40.0]], head=0)
    request, outcome = run_request(results)
    assert request.heads.tolist() == [[0, 0]]
    assert_same_as_full(session, outcome, "batched")


def test_edits_of_two_heads_before_a_recompute_recompute_both():
    session = session_of((1, 6, 8, 2))
    results = Results(session)
    run_request(results)
    session.set_cell("query", 0, 0, 9.0, head=1)
    session.set_cell("value", 3, 1, -9.0, head=4)
    request, outcome = run_request(results)
    assert request.heads.tolist() == [[0, 1], [0, 4]]
    assert_same_as_full(session, outcome, "batched")
    session.undo()
    session.undo()  # back to the first numbers: both heads again
    request, outcome = run_request(results)
    assert request.heads.tolist() == [[0, 1], [0, 4]]
    assert_same_as_full(session, outcome, "batched")


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.set_option("causal", True),
        lambda s: s.set_option("strategy", "matmul"),
        lambda s: s.set_option("dtype", "float32"),
        lambda s: s.set_option("scale", False),
        lambda s: [s.set_block("query", 0, 0, np.ones((8, 2)), head=h) for h in (0, 1, 2)],
    ],
    ids=["causal", "strategy", "dtype", "scale", "three of four heads"],
)
def test_other_changes_recompute_everything(change):
    session = session_of((1, 4, 8, 2))
    results = Results(session)
    run_request(results)
    change(session)
    request, outcome = run_request(results)
    assert request.base is None
    assert_same_as_full(session, outcome, outcome.used)


def test_the_shown_stages_previews_are_spliced_not_made_again():
    session = session_of((1, 4, 300, 4), seed=2)
    results = Results(session)
    run_request(results)
    before = results.preview("weights", 0)
    results.preview("scores", 0)
    session.set_cell("key", 10, 2, 7.0, head=3)
    _, outcome = run_request(results)
    assert set(outcome.previews) == {("scores", 0), ("weights", 0)}  # made with the result
    after = results.preview("weights", 0)
    fresh = make_preview(full_recompute(session, "batched").weights[0])
    for h in range(4):
        assert (after.highest[h] is before.highest[h]) == (h != 3)
        np.testing.assert_allclose(after.highest[h], fresh.highest[h], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(after.high, fresh.high, rtol=1e-12)


@pytest.fixture
def small_budgets(monkeypatch):
    """The on-the-spot budgets scaled down 64× (T512 → T64): the same rules, little memory."""
    monkeypatch.setattr(results_module, "INTERACTIVE_CELLS", 64 * 64 * 8 // 64)
    monkeypatch.setattr(results_module, "INCREMENTAL_CELLS", 2 * 64 * 64)
    monkeypatch.setattr(results_module, "SPLICE_CELLS", 16 * 64 * 64)


def test_a_big_session_edits_one_head_at_once(small_budgets):
    """H16 (T512, here T64 with the budgets scaled down): a full recompute goes to the
    worker, one edited head is done on the spot."""
    session = session_of((1, 16, 64, 8))
    results = Results(session)
    assert not results.interactive_now()  # before any result: the whole thing, in a worker
    run_request(results)
    session.set_cell("query", 10, 3, 1.25, head=7)
    assert results.interactive_now()
    request = results.request()
    assert request.interactive and request.heads.tolist() == [[0, 7]]
    session.set_option("causal", True)
    assert not results.interactive_now()


@pytest.mark.parametrize("reuse_base", [False, True])
def test_on_the_spot_the_heads_are_written_into_the_result_on_screen(reuse_base):
    """In a worker the last result stays as it was (its run may be dropped); on the GUI
    thread, whose outcome replaces it at once, the new heads go into its arrays."""
    session = session_of((1, 4, 300, 4), seed=4)
    results = Results(session)
    run_request(results)
    results.preview("scores", 0)
    base = results.current
    assert base is not None
    scaled_before = base.result.scaled
    scores_before = base.result.scores.copy()
    session.set_cell("query", 7, 1, -6.0, head=2)
    request = results.request()
    outcome = request.run(reuse_base=reuse_base)
    assert results.accept(outcome)
    assert_same_as_full(session, outcome, "batched")
    assert (outcome.result.scores is base.result.scores) == reuse_base
    if reuse_base:  # the old result's derived stages follow its (new) scores
        np.testing.assert_array_equal(base.result.scaled, outcome.result.scaled)
    else:
        np.testing.assert_array_equal(base.result.scores, scores_before)
        assert base.result.scaled is scaled_before


def test_past_the_splice_budget_one_head_is_still_all_that_is_recomputed(small_budgets):
    """H17 (T512, here T64): copying the other heads is left to the worker, which still
    computes one head."""
    session = session_of((1, 17, 64, 2), seed=5)
    results = Results(session)
    run_request(results)
    session.set_cell("value", 3, 0, 4.0, head=16)
    assert not results.interactive_now()  # the worker's job, debounced
    request, outcome = run_request(results)
    assert not request.interactive and request.heads.tolist() == [[0, 16]]
    assert_same_as_full(session, outcome, "batched")


def test_full_recomputes_of_one_shape_reuse_the_replaced_results_arrays():
    """A full recompute (here: every head's numbers changed) gets the arrays of the result
    before the one on screen, never those of the result still shown."""
    session = session_of((1, 4, 16, 8), dtype="float32")
    results = Results(session)
    _, first = run_request(results)
    shown = first.result.weights.copy()
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, k, v = (rng.standard_normal((1, 4, 16, 8)) for _ in range(3))  # every head: a full run
        session.load(Snapshot(tuple(f"t{n + 1}" for n in range(16)), q, k, v), text="paste")
        request = results.request()
        assert request.base is None or request.heads is None or len(request.heads) == 4
        outcome = request.run()
        np.testing.assert_array_equal(first.result.weights, shown)  # the shown result intact
        assert not np.shares_memory(outcome.result.weights, first.result.weights)
        assert results.accept(outcome)
        assert_same_as_full(session, outcome, "batched")
        first, shown = outcome, outcome.result.weights.copy()
    assert results._workspace.reused >= 1
