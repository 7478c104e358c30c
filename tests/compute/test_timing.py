"""Cost model and timing: counts, the loop's ETA, progress, cancelling."""

import threading

import numpy as np
import pytest

from attn_explorer.compute import (
    Cancelled,
    TimingResult,
    call_counts,
    estimate_loop_seconds,
    flops,
    macs,
    time_strategies,
)

SMALL = np.ones((2, 4, 3))  # (H, T, d)


def test_counts():
    assert macs((3, 2), (3, 2)) == 3 * 3 * 2
    assert macs((2, 4, 5, 8), (2, 4, 7, 8)) == 2 * 4 * 5 * 7 * 8
    assert flops((2, 4, 5, 8), (2, 4, 7, 8)) == 2 * macs((2, 4, 5, 8), (2, 4, 7, 8))
    counts = call_counts((2, 4, 5, 8), (2, 4, 7, 8))
    assert counts["loop"].startswith(f"{2 * 4 * 5 * 7 * 8:,} multiply-adds")
    assert counts["matmul"] == "8 matmul calls (1 per head)"
    assert call_counts((3, 2), (3, 2))["matmul"] == "1 matmul call (1 per head)"
    assert counts["batched"] == "1 batched matmul call"


def test_loop_estimate_positive_and_monotone():
    shapes = [
        (1, 1, 3, 2),
        (1, 1, 3, 3),
        (1, 2, 3, 3),
        (1, 2, 8, 3),
        (2, 2, 8, 3),
        (2, 16, 512, 64),
    ]
    estimates = [estimate_loop_seconds(s, s) for s in shapes]
    assert all(e > 0 for e in estimates)
    assert estimates == sorted(estimates) and len(set(estimates)) == len(estimates)
    # longer keys cost more, and the estimate scales about linearly in the work
    assert estimate_loop_seconds((4, 8), (9, 8)) > estimate_loop_seconds((4, 8), (3, 8))
    big, small = estimate_loop_seconds((16, 64, 64), (16, 64, 64)), estimates[0]
    assert big / small > 1000


def test_loop_estimate_is_in_the_right_ballpark():
    """The ETA comes from a calibration run: it must predict a real run within 10×."""
    query = np.random.default_rng(0).standard_normal((2, 20, 16))
    result = time_strategies(query, query, ("loop",), repeats=3, warmup=0, loop_budget=10)
    eta = estimate_loop_seconds(query.shape, query.shape)
    assert not result["loop"].estimated
    assert eta / 10 < result["loop"].median < eta * 10


def test_time_strategies_reports_each():
    calls = []
    results = time_strategies(
        SMALL, SMALL, repeats=3, min_seconds=0.001, progress=lambda f, m: calls.append((f, m))
    )
    assert set(results) == {"loop", "matmul", "batched", "tiled"}
    for name, result in results.items():
        assert isinstance(result, TimingResult) and result.strategy == name
        assert 0 < result.minimum <= result.median <= result.maximum
        assert result.repeats == 3 and not result.estimated
        assert result.flops == flops(SMALL.shape, SMALL.shape)
        assert result.gflops == pytest.approx(result.flops / result.median / 1e9)
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert len(calls) == 4 * (1 + 3)  # one warm-up and three repeats each
    assert any("batched" in message for _, message in calls)


def test_loop_over_budget_is_estimated_not_run():
    query = np.ones((16, 512, 64), dtype=np.float32)
    progress = []
    results = time_strategies(
        query, query, ("loop",), loop_budget=0.5, progress=lambda f, m: progress.append(f)
    )
    loop = results["loop"]
    assert loop.estimated and loop.repeats == 0
    assert loop.median == pytest.approx(estimate_loop_seconds(query.shape, query.shape))
    assert loop.median > 0.5


def test_should_stop_cancels():
    checks = []

    def should_stop():
        checks.append(1)
        return len(checks) >= 3

    with pytest.raises(Cancelled):
        time_strategies(SMALL, SMALL, repeats=50, min_seconds=0.001, should_stop=should_stop)
    assert len(checks) == 3


def test_cancel_from_another_thread():
    """A GUI sets a flag from its own thread; the worker stops at the next check."""
    stop = threading.Event()
    outcome = []

    def work():
        try:
            time_strategies(
                SMALL, SMALL, ("batched",), repeats=10_000, min_seconds=0.01,
                should_stop=stop.is_set,
            )  # fmt: skip
            outcome.append("finished")
        except Cancelled:
            outcome.append("cancelled")

    worker = threading.Thread(target=work)
    worker.start()
    stop.set()
    worker.join(timeout=10)
    assert outcome == ["cancelled"]


def test_peak_memory_tiled_holds_no_grid():
    """The memory column: batched holds the (H, T, T) scores, tiled only tiles and output
    (one tile per core at a time: H · 128 · 128 floats each, at any T)."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 4, 1024, 16)).astype(np.float32)
    results = time_strategies(q, q, ("batched", "tiled"), repeats=1, warmup=0, min_seconds=0)
    grid = 4 * 1024 * 1024 * 4
    assert results["batched"].peak_bytes >= grid
    assert results["tiled"].peak_bytes < grid / 4
    none = time_strategies(q, q, ("batched",), repeats=1, warmup=0, min_seconds=0, memory=False)
    assert np.isnan(none["batched"].peak_bytes)


def test_sweep_reports_time_and_memory_for_every_strategy():
    from attn_explorer.compute.timing import sweep_tokens

    sweep = sweep_tokens(2, 4, tokens=(8, 512), loop_budget=0.05)
    for name in ("loop", "matmul", "batched", "tiled"):
        assert len(sweep[name]) == 2 and len(sweep[f"{name}_bytes"]) == 2
    assert sweep["batched_bytes"][1] >= 2 * 512 * 512 * 4  # the (H, T, T) float32 scores
    assert sweep["tiled_bytes"][1] < sweep["batched_bytes"][1] / 4  # output + tiles
    assert np.isnan(sweep["loop_bytes"][1])  # a loop too slow to trace is not measured
