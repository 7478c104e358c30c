"""Issue 12, items 1 and 8: hostile arguments to the compute API get a ValueError naming them.

Never a silent NaN, never a raw TypeError / OverflowError / ZeroDivisionError /
StatisticsError from deep inside numpy or the standard library.
"""

import numpy as np
import pytest

from attn_explorer.compute import (
    LIMITS,
    MAX_ABS_VALUE,
    attention,
    attention_scores,
    loop_trace,
    softmax_rows,
    time_strategies,
)

Q = np.ones((3, 2))


# -- item 1: one legal number must not overflow downstream ----------------------------------------
@pytest.mark.parametrize(
    ("query", "key", "words"),
    [
        ([[1e200]], [[1e200], [1.0]], ["query", "[0, 0]", "1e+200"]),
        (np.array([[1e30]], np.float32), np.array([[1e30], [1]], np.float32), ["query"]),
        ([[1.0]], [[1.0], [-1.7e308]], ["key", "[1, 0]"]),
        ([[1e154]], [[1e154]], ["query"]),
    ],
)
@pytest.mark.parametrize("entry", ["scores", "attention", "trace", "timing"])
def test_values_over_the_magnitude_limit_are_refused(query, key, words, entry):
    calls = {
        "scores": lambda: attention_scores(query, key),
        "attention": lambda: attention(query, key),
        "trace": lambda: loop_trace(query, key),
        "timing": lambda: time_strategies(query, key, ("batched",), repeats=1),
    }
    with pytest.raises(ValueError) as caught:
        calls[entry]()
    message = str(caught.value)
    for word in [*words, "limit", f"{MAX_ABS_VALUE:g}"]:
        assert word in message, (word, message)


def test_the_limit_itself_is_accepted_and_stays_finite_in_float32():
    """|q|, |k| ≤ MAX_ABS_VALUE and d at its limit: the scores fit float32."""
    d = LIMITS.max_dim
    big = np.full((2, d), MAX_ABS_VALUE, np.float32)
    result = attention(big, -big, big)
    assert np.isfinite(result.scores).all() and np.isfinite(result.weights).all()


def test_value_over_the_limit_is_refused():
    with pytest.raises(ValueError, match=r"value.*limit"):
        attention(Q, Q, [[1.0], [2e15], [0.0]])


# -- item 8: never a silent NaN --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scores_that_overflow_after_scaling_are_reported(dtype):
    q = np.full((2, 2), 1e10, dtype)
    with pytest.raises(ValueError, match=r"scores.*not finite"):
        attention(q, q, scale=1e300 if dtype == np.float64 else 1e30)


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_softmax_refuses_nan_and_plus_inf(bad):
    x = np.array([[1.0, 2.0], [bad, 0.0]])
    with pytest.raises(ValueError, match=r"x.*row \[1\].*finite"):
        softmax_rows(x)


def test_softmax_overflowing_factor_is_reported():
    with pytest.raises(ValueError, match="finite"):
        softmax_rows(np.array([[1e300, 0.0]]), factor=1e300)


def test_softmax_minus_inf_still_means_hidden():
    weights, fully = softmax_rows(np.array([[-np.inf, 0.0], [-np.inf, -np.inf]]))
    assert weights.tolist() == [[0.0, 1.0], [0.0, 0.0]]
    assert fully.tolist() == [False, True]


@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0,), (1, 0, 4)])
def test_softmax_of_empty_input(shape):
    with pytest.raises(ValueError, match=r"x.*empty"):
        softmax_rows(np.empty(shape))


def test_softmax_of_integers_is_the_softmax_of_their_floats():
    weights, _ = softmax_rows(np.array([[1, 2, 3]], dtype=np.int64))
    expected, _ = softmax_rows(np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(weights, expected)


@pytest.mark.parametrize("factor", [None, "abc", float("nan"), float("inf"), [1.0]])
def test_softmax_bad_factor(factor):
    with pytest.raises(ValueError, match="factor"):
        softmax_rows(np.ones((2, 2)), factor=factor)


@pytest.mark.parametrize("keep", [np.ones((2, 3), bool), np.ones((2, 2), int)])
def test_softmax_bad_keep(keep):
    with pytest.raises(ValueError, match="keep"):
        softmax_rows(np.ones((2, 2)), keep=keep)


@pytest.mark.parametrize("scale", [None, "abc", [1.0], object()])
def test_bad_scale_is_named(scale):
    with pytest.raises(ValueError, match="scale"):
        attention(Q, Q, scale=scale)


def test_numpy_scale_values_still_work():
    assert attention(Q, Q, scale=np.float32(0.5)).scale == 0.5
    assert attention(Q, Q, scale=np.bool_(False)).scale == 1.0
    assert attention(Q, Q, scale=2).scale == 2.0


@pytest.mark.parametrize("causal", ["no", "", 1, 0, None, [True]])
def test_causal_must_be_true_or_false(causal):
    with pytest.raises(ValueError, match="causal"):
        attention(Q, Q, causal=causal)


def test_numpy_bool_causal_works():
    assert attention(Q, Q, causal=np.bool_(True)).keep is not None


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"repeats": 0}, "repeats"),
        ({"repeats": -1}, "repeats"),
        ({"repeats": 1.5}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"min_seconds": float("nan")}, "min_seconds"),
        ({"loop_budget": -1.0}, "loop_budget"),
    ],
)
def test_time_strategies_bad_counts(kwargs, name):
    with pytest.raises(ValueError, match=name):
        time_strategies(Q, Q, ("batched",), **kwargs)


def test_booleans_are_refused():
    with pytest.raises(ValueError, match=r"query.*boolean"):
        attention([[True, False]], [[1.0, 0.0]])


def test_integers_beyond_float64_precision_are_refused():
    big = np.array([[2**53 + 1]], dtype=np.int64)
    with pytest.raises(ValueError, match=r"key.*2\*\*53"):
        attention_scores([[1]], big)
