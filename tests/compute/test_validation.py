"""Every input mistake raises ValueError naming the argument and the shapes."""

import numpy as np
import pytest

from attn_explorer.compute import LIMITS, attention, attention_scores, loop_trace, time_strategies

Q = np.ones((3, 2))


@pytest.mark.parametrize(
    "query, key, words",
    [
        (np.ones((3, 2)), np.ones((3, 4)), ["vector size d", "(3, 2)", "(3, 4)"]),
        (np.ones((2, 3, 2)), np.ones((4, 3, 2)), ["leading", "(2, 3, 2)", "(4, 3, 2)"]),
        (np.ones((2, 3, 2)), np.ones((3, 2)), ["leading", "(2, 3, 2)", "(3, 2)"]),
        (np.ones(3), Q, ["query", "dimension", "(3,)"]),
        (Q, np.ones((1, 1, 1, 3, 2)), ["key", "dimension", "(1, 1, 1, 3, 2)"]),
        (np.ones((0, 2)), Q, ["query", "empty", "(0, 2)"]),
        (Q, np.ones((3, 0)), ["key", "empty", "(3, 0)"]),
        ([[1.0, np.nan], [0, 1]], Q[:2], ["query", "NaN", "[0, 1]"]),
        (Q, [[1.0, 0], [np.inf, 0]], ["key", "finite", "[1, 0]"]),
        (np.array([["a", "b"]]), Q, ["query", "numbers"]),
        (Q, [[1, 2], [3]], ["key"]),
    ],
)
@pytest.mark.parametrize("entry", ["scores", "attention", "trace", "timing"])
def test_bad_inputs_name_the_argument(query, key, words, entry):
    calls = {
        "scores": lambda: attention_scores(query, key, "loop"),
        "attention": lambda: attention(query, key),
        "trace": lambda: loop_trace(query, key),
        "timing": lambda: time_strategies(query, key, ("batched",), repeats=1),
    }
    with pytest.raises(ValueError) as caught:
        calls[entry]()
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize(
    "shape, words",
    [
        ((LIMITS.max_batch + 1, 1, 2, 2), ["batch size B", str(LIMITS.max_batch)]),
        ((1, LIMITS.max_heads + 1, 2, 2), ["number of heads H", str(LIMITS.max_heads)]),
        ((LIMITS.max_tokens + 1, 2), ["number of tokens T", str(LIMITS.max_tokens)]),
        ((2, LIMITS.max_dim + 1), ["vector size d", str(LIMITS.max_dim)]),
        ((8, 64, 4096, 64), ["values", "limit"]),  # 128 Mi elements, each extent allowed
    ],
)
def test_over_limits(shape, words):
    # np.broadcast_to: a huge shape without allocating it
    big = np.broadcast_to(np.float32(1), shape)
    with pytest.raises(ValueError) as caught:
        attention_scores(big, big)
    message = str(caught.value)
    assert "query" in message
    for word in words:
        assert word in message, (word, message)


def test_score_tensor_limit():
    query = np.broadcast_to(np.float32(1), (8, 16, 4096, 1))  # 2 Gi scores > 256 Mi
    with pytest.raises(ValueError, match="score tensor"):
        attention_scores(query, query)


def test_bad_strategy_named():
    for call in (
        lambda: attention_scores(Q, Q, "fast"),
        lambda: attention(Q, Q, strategy="fast"),
    ):
        with pytest.raises(ValueError, match=r"strategy.*'fast'.*loop, matmul, batched"):
            call()


def test_bad_strategy_in_timing():
    with pytest.raises(ValueError, match="strateg"):
        time_strategies(Q, Q, ("fast",), repeats=1)


@pytest.mark.parametrize(
    "mask, words",
    [
        (np.ones((3, 3), dtype=int), ["mask", "boolean", "int"]),
        (np.ones((3, 4), dtype=bool), ["mask", "(3, 4)", "(3, 3)"]),
        (np.ones((2, 3, 3), dtype=bool), ["mask", "(2, 3, 3)"]),
        ([[1.0]], ["mask", "boolean", "float64"]),
    ],
)
def test_bad_mask(mask, words):
    with pytest.raises(ValueError) as caught:
        attention(Q, Q, mask=mask)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    "value, words",
    [
        (np.ones((4, 2)), ["value", "(4, 2)", "(3, 2)"]),
        (np.ones((2, 3, 2)), ["value", "(2, 3, 2)"]),
        (np.ones(3), ["value", "(3,)"]),
        (np.ones((3, 0)), ["value", "(3, 0)"]),
        ([[1.0, 2.0], [np.nan, 0.0], [0.0, 0.0]], ["value", "NaN"]),
    ],
)
def test_bad_value(value, words):
    with pytest.raises(ValueError) as caught:
        attention(Q, Q, value)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="scale"):
        attention(Q, Q, scale=scale)


def test_float16_and_ints_are_accepted_as_float64():
    assert attention_scores(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16)).dtype == (
        np.float64
    )
    assert attention_scores(np.ones((2, 2), np.int32), np.ones((2, 2), np.int8)).dtype == (
        np.float64
    )
