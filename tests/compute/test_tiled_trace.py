"""The stepper's trace of the tiled strategy: key block by key block, it ends on the
strategy's own output, row max and normaliser."""

import numpy as np
import pytest

from attn_explorer.compute import attention
from attn_explorer.compute.tiled_trace import tiled_trace


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("t", "block"), [(7, 3), (8, 4), (5, 8), (1, 1)])
def test_trace_ends_on_the_strategys_numbers(causal, t, block):
    rng = np.random.default_rng(t * 10 + block)
    query, key, value = (rng.standard_normal((t, 4)) for _ in range(3))
    factor = 0.5
    whole = attention(query, key, value, strategy="tiled", scale=factor, causal=causal)
    trace = tiled_trace(query, key, value, factor, causal=causal, block=block)
    n_q = -(-t // block)
    if causal:  # query block b reads key blocks 0..b only
        assert len(trace) == n_q * (n_q + 1) // 2
    else:
        assert len(trace) == n_q * n_q
    outputs = np.full_like(whole.output, np.nan)
    for n in range(len(trace)):
        step = trace.step(n)
        if step.last:
            outputs[step.i0 : step.i1] = step.output
            np.testing.assert_allclose(step.m, whole.row_max[step.i0 : step.i1], rtol=1e-12)
            np.testing.assert_allclose(step.norm, whole.row_sum[step.i0 : step.i1], rtol=1e-12)
        else:
            assert step.output is None
    np.testing.assert_allclose(outputs, whole.output, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("t", "block", "window"), [(9, 3, 2), (9, 3, 4), (8, 2, 5), (5, 8, 2)])
def test_trace_with_a_sliding_window_ends_on_the_strategys_numbers(t, block, window):
    rng = np.random.default_rng(t + block + window)
    query, key, value = (rng.standard_normal((t, 3)) for _ in range(3))
    whole = attention(query, key, value, strategy="tiled", causal=True, window=window)
    trace = tiled_trace(query, key, value, 1 / np.sqrt(3), causal=True, block=block, window=window)
    for i0, j0 in trace.tiles:  # no key block lies wholly left of the band of its rows
        assert j0 + block - 1 >= i0 - window + 1
    outputs = np.full_like(whole.output, np.nan)
    for n in range(len(trace)):
        step = trace.step(n)
        if step.last:
            outputs[step.i0 : step.i1] = step.output
    np.testing.assert_allclose(outputs, whole.output, rtol=1e-12, atol=1e-14)


def test_each_step_rescales_the_old_sums_by_exp_of_the_max_change():
    rng = np.random.default_rng(1)
    query, key, value = (rng.standard_normal((4, 3)) for _ in range(3))
    key[2:] *= 5  # the second key block raises the max of some rows
    trace = tiled_trace(query, key, value, 1.0, block=2)
    assert len(trace) == 4
    first, second = trace.step(0), trace.step(1)
    assert first.i0 == second.i0 == 0 and (first.j0, second.j0) == (0, 2)
    np.testing.assert_array_equal(second.m_before, first.m)
    np.testing.assert_allclose(second.rescale, np.exp(first.m - second.m))
    expected = second.rescale * first.norm + second.weights_tile.sum(axis=1)
    np.testing.assert_allclose(second.norm, expected)
    assert (second.rescale < 1).any()  # some row's max really moved
    assert "query block 1 of 2 (rows 1–2) · key block 2 of 2 (keys 3–4)" in trace.describe(1)


def test_trace_refuses_bad_input():
    with pytest.raises(ValueError, match="one head"):
        tiled_trace(np.ones((2, 3, 4)), np.ones((2, 3, 4)), np.ones((2, 3, 4)), 1.0)
    with pytest.raises(ValueError, match="block"):
        tiled_trace(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), 1.0, block=0)
    with pytest.raises(IndexError):
        tiled_trace(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), 1.0).step(5)
