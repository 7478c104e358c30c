"""attention(): every stage against the float64 reference, masks, causal, extreme values."""

import numpy as np
import pytest
from compute_reference import (
    qkv,
    reference_causal_keep,
    reference_scores,
    reference_softmax,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attn_explorer.compute import STAGES, STRATEGIES, attention, causal_keep

TOL = {np.float32: {"rtol": 2e-4, "atol": 1e-5}, np.float64: {"rtol": 1e-9, "atol": 1e-12}}


@st.composite
def masked_inputs(draw, bound=None):
    """(query, key, value, causal, mask, window) with a mask of shape (T_q, T_k), full, or none;
    a sliding window (1 … T_k + 1, so wider than the text too) only with causal."""
    query, key, value = draw(qkv(bound=bound))
    scores_shape = (*query.shape[:-1], key.shape[-2])
    kind = draw(st.sampled_from(["none", "grid", "full", "per-key"]))
    if kind == "none":
        mask = None
    elif kind == "grid":
        mask = draw(hnp.arrays(np.bool_, scores_shape[-2:]))
    elif kind == "full":
        mask = draw(hnp.arrays(np.bool_, scores_shape))
    else:  # a padding mask: one flag per key, broadcast over heads and queries
        mask = draw(hnp.arrays(np.bool_, (*((1,) * (len(scores_shape) - 1)), scores_shape[-1])))
    causal = draw(st.booleans())
    window = draw(st.none() | st.integers(1, key.shape[-2] + 1)) if causal else None
    return query, key, value, causal, mask, window


def expected_keep(query, key, causal, mask, window=None):
    t_q, t_k = query.shape[-2], key.shape[-2]
    keep = np.ones((*query.shape[:-1], t_k), dtype=bool)
    if causal:
        keep &= reference_causal_keep(t_q, t_k, window)
    if mask is not None:
        keep &= mask
    return keep


@settings(max_examples=120, deadline=None)
@given(masked_inputs(bound=3.0), st.sampled_from(STRATEGIES))
def test_every_stage_matches_reference(inputs, strategy):
    query, key, value, causal, mask, window = inputs
    result = attention(
        query, key, value, strategy=strategy, causal=causal, mask=mask, window=window
    )
    dtype = query.dtype.type
    tol = TOL[dtype]
    factor = 1.0 / np.sqrt(query.shape[-1])
    keep = expected_keep(query, key, causal, mask, window)
    scores = reference_scores(query, key)
    scaled = scores * factor
    weights, fully = reference_softmax(scaled, keep)
    for stage in STAGES:
        assert result.stage(stage).dtype == dtype, stage
    np.testing.assert_allclose(result.scores, scores, **tol)
    np.testing.assert_allclose(result.scaled, scaled, **tol)
    masked = np.where(keep, scaled, -np.inf)
    np.testing.assert_allclose(result.masked, masked, **tol)
    assert (np.isneginf(result.masked) == ~keep).all()
    np.testing.assert_allclose(result.weights, weights, **tol)
    np.testing.assert_array_equal(result.fully_masked_rows, fully)
    np.testing.assert_allclose(result.output, weights @ value.astype(np.float64), **tol)


@settings(max_examples=120, deadline=None)
@given(masked_inputs(bound=1e4))
@example(  # scaled scores 2 694 and 2 696 in float32: the exponent's rounding shows
    (
        np.array([[0.0, 0.0], [1905.0, 1.5]], dtype=np.float32),
        np.array([[2.0, 0.0], [2.0, 2.0]], dtype=np.float32),
        np.zeros((2, 1), dtype=np.float32),
        False,
        None,
        None,
    )
)
def test_extreme_values_stay_finite(inputs):
    """±1e4 inputs give scores ~1e8: the softmax must still be finite, rows sum to 1."""
    query, key, value, causal, mask, window = inputs
    result = attention(query, key, value, causal=causal, mask=mask, window=window)
    weights = result.weights
    assert np.isfinite(weights).all() and np.isfinite(result.output).all()
    assert ((weights >= 0) & (weights <= 1)).all()
    keep = expected_keep(query, key, causal, mask, window)
    fully = ~keep.any(axis=-1)
    np.testing.assert_array_equal(result.fully_masked_rows, fully)
    sums = weights.sum(axis=-1)
    np.testing.assert_allclose(sums[~fully], 1.0, rtol=1e-5)
    assert (weights[fully] == 0).all()
    assert (weights[~keep] == 0).all()
    # The softmax of its own scaled stage (float64 reference): the softmax is exact
    # even though float32 scores of ~1e8 are themselves rounded. Exact up to the
    # rounding of the exponent itself: float32 computes e^y as 2^(y · log2 e) with that
    # product rounded, an error of half an ulp of |y · log2 e| in the exponent, which is
    # the weight's relative error (hypothesis found scaled scores of 2 696 in float32:
    # 1.3e-4 relative, over a fixed 1e-4).
    scaled = result.scaled[np.isfinite(result.scaled)]
    largest = float(np.abs(scaled).max(initial=0.0)) * 1.4426950408889634
    rounding = 2 * float(np.spacing(result.scaled.dtype.type(largest)))
    reference, _ = reference_softmax(result.scaled.astype(np.float64), keep)
    np.testing.assert_allclose(weights, reference, rtol=max(1e-4, 2 * rounding), atol=1e-6)


def test_worked_example_weights_and_output():
    q = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)
    result = attention(q, q, np.eye(3), scale=False)
    s = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 2]], dtype=np.float64)
    expected = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(result.weights, expected, rtol=1e-14)
    np.testing.assert_allclose(result.output, expected, rtol=1e-14)  # weights @ I
    assert result.scale == 1.0
    np.testing.assert_array_equal(result.scaled, s)


def test_scale_options():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4, 9)), rng.standard_normal((5, 9))
    assert attention(q, k).scale == pytest.approx(1 / 3)
    np.testing.assert_allclose(attention(q, k).scaled, (q @ k.T) / 3, rtol=1e-12)
    np.testing.assert_allclose(attention(q, k, scale=0.5).scaled, (q @ k.T) * 0.5, rtol=1e-12)
    np.testing.assert_array_equal(attention(q, k, scale=False).scaled, attention(q, k).scores)
    assert attention(q, k).output is None


@pytest.mark.parametrize("t_q, t_k", [(3, 3), (2, 5), (5, 2), (1, 4), (4, 1)])
def test_causal_aligned_at_last_query(t_q, t_k):
    keep = causal_keep(t_q, t_k)
    np.testing.assert_array_equal(keep, reference_causal_keep(t_q, t_k))
    # the last query always sees every key
    assert keep[-1].all()
    result = attention(np.ones((t_q, 2)), np.ones((t_k, 2)), causal=True)
    np.testing.assert_array_equal(result.fully_masked_rows, ~keep.any(axis=1))
    assert not np.isnan(result.weights).any()


def test_causal_square_is_lower_triangular():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 6, 4))
    result = attention(q, q, causal=True)
    np.testing.assert_array_equal(result.weights[0] == 0, ~np.tri(6, dtype=bool))
    np.testing.assert_allclose(result.weights[:, 0, 0], 1.0)


def test_fully_masked_rows_are_zero_and_flagged_never_nan():
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    q = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
    result = attention(q, q, q, mask=mask)
    assert result.fully_masked_rows.tolist() == [False, True, False]
    assert (result.weights[1] == 0).all()
    assert (result.output[1] == 0).all()
    assert not np.isnan(result.weights).any()
    assert result.weights[0, 1] == 0
    np.testing.assert_allclose(result.weights.sum(axis=1), [1, 0, 1], rtol=1e-6)
    assert np.isneginf(result.masked[1]).all()


def test_stage_by_name_and_unknown_stage():
    q = np.eye(2)
    result = attention(q, q, q)
    assert result.stage("weights") is result.weights
    assert result.stage("output") is result.output
    with pytest.raises(ValueError, match="stage"):
        result.stage("logits")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 3, 64, 7])
def test_dtype_never_upcast(dtype, d):
    """Regression: ``1/np.sqrt(d)`` is a float64 scalar that would upcast float32 scores."""
    rng = np.random.default_rng(d)
    q = rng.standard_normal((2, 5, d)).astype(dtype)
    result = attention(q, q, q, causal=True, mask=np.ones((5, 5), bool))
    for stage in STAGES:
        assert result.stage(stage).dtype == dtype, stage
    assert result.fully_masked_rows.dtype == np.bool_


def test_float32_scaled_stage_uses_float32_factor():
    q = np.full((1, 3), 3.0, dtype=np.float32)
    result = attention(q, q)
    expected = np.float32(27.0) * np.float32(1 / np.sqrt(3.0))  # q·q = 3·9
    assert result.scaled.dtype == np.float32
    assert result.scaled[0, 0] == expected


def test_float64_value_promotes_everything():
    q = np.eye(2, dtype=np.float32)
    result = attention(q, q, np.eye(2))
    assert result.weights.dtype == np.float64 and result.output.dtype == np.float64


def test_multi_dimensional_values_and_heads():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 3, 4, 5))
    k = rng.standard_normal((2, 3, 6, 5))
    v = rng.standard_normal((2, 3, 6, 7))
    result = attention(q, k, v)
    assert result.output.shape == (2, 3, 4, 7)
    weights, _ = reference_softmax(reference_scores(q, k) / np.sqrt(5), None)
    np.testing.assert_allclose(result.output, weights @ v, rtol=1e-12)


def test_sliding_window_is_a_band_below_the_diagonal():
    """Window 3 on 6 tokens: query i sees keys i-2..i, written out by hand."""
    expected = np.array(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [0, 1, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 1, 1, 1],
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(causal_keep(6, 6, 3), expected)
    rng = np.random.default_rng(4)
    q = rng.standard_normal((6, 4))
    for strategy in STRATEGIES:
        result = attention(q, q, q, strategy=strategy, causal=True, window=3)
        np.testing.assert_array_equal(result.weights > 0, expected, err_msg=strategy)
        np.testing.assert_array_equal(np.isneginf(result.masked), ~expected, err_msg=strategy)
    # A window as wide as the text is the causal mask itself; window 1 sees only itself.
    np.testing.assert_array_equal(causal_keep(6, 6, 6), causal_keep(6, 6))
    np.testing.assert_array_equal(causal_keep(6, 6, 1), np.eye(6, dtype=bool))


@pytest.mark.parametrize(
    ("window", "causal", "message"),
    [(0, True, "≥ 1"), (-2, True, "≥ 1"), (2.0, True, "whole"), (True, True, "whole"),
     (3, False, "causal=True")],
)  # fmt: skip
def test_bad_windows_are_refused_with_one_message(window, causal, message):
    q = np.ones((4, 2))
    for strategy in ("batched", "tiled"):
        with pytest.raises(ValueError, match=message):
            attention(q, q, q, strategy=strategy, causal=causal, window=window)
