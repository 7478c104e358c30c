"""Measurements in a child process: results, progress, cancel and errors come back."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.compute import Cancelled
from attn_explorer.compute.background import in_process
from attn_explorer.compute.timing import sweep_tokens, time_strategies


def test_sweep_in_a_child_process_returns_every_strategy_and_reports_progress():
    seen = []
    job = in_process(sweep_tokens, heads=2, dim=4, tokens=(4, 8))
    result = job(lambda fraction, text: seen.append((fraction, text)), lambda: False)
    assert result["tokens"] == [4, 8]
    for name in ("loop", "matmul", "batched"):
        assert len(result[name]) == 2 and all(t > 0 for t in result[name])
    assert seen[-1] == (1.0, "T = 8")


def test_timing_in_a_child_process_matches_the_inputs_shape():
    q = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    job = in_process(time_strategies, query=q, key=q, repeats=2)
    results = job(lambda f, m: None, lambda: False)
    assert set(results) == {"loop", "matmul", "batched", "tiled"}
    assert results["batched"].flops == 2 * 2 * 5 * 5 * 3


def test_stop_request_cancels_and_ends_the_child():
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 3

    job = in_process(sweep_tokens, heads=16, dim=64)
    with pytest.raises(Cancelled):
        job(lambda f, m: None, should_stop)


def test_an_error_in_the_child_is_reported_with_its_message():
    job = in_process(time_strategies, query=[[1.0]], key=[[1.0, 2.0]])
    with pytest.raises(RuntimeError, match="same vector size d"):
        job(lambda f, m: None, lambda: False)


def test_sweep_tokens_directly_cancels_between_sizes():
    with pytest.raises(Cancelled):
        sweep_tokens(1, 2, tokens=(4, 8), should_stop=lambda: True)
