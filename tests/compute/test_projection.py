"""multi_head_attention: split into heads, attend, merge — against a per-head reference."""

import numpy as np
import pytest
from compute_reference import reference_causal_keep, reference_softmax
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_explorer.compute import STRATEGIES, merge_heads, multi_head_attention, split_heads


def per_head_reference(x, w_q, w_k, w_v, heads, w_o=None, causal=False, biases=None):
    """Karpathy's ``Head`` / ``MultiHeadAttention`` form: one head at a time, float64."""
    x = x.astype(np.float64)
    b_q, b_k, b_v, b_o = biases or (0.0, 0.0, 0.0, 0.0)
    d_head = w_q.shape[1] // heads
    outputs = []
    for h in range(heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = x @ w_q[:, cols] + (b_q[cols] if np.ndim(b_q) else b_q)  # (B, T, d_head)
        k = x @ w_k[:, cols] + (b_k[cols] if np.ndim(b_k) else b_k)
        v = x @ w_v[:, cols] + (b_v[cols] if np.ndim(b_v) else b_v)
        scaled = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)  # (B, T, T)
        keep = reference_causal_keep(x.shape[1], x.shape[1]) if causal else None
        weights, _ = reference_softmax(scaled, keep)
        outputs.append(weights @ v)  # (B, T, d_head)
    merged = np.concatenate(outputs, axis=-1)  # (B, T, H·d_head)
    if w_o is not None:
        merged = merged @ w_o + b_o
    return merged


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 2),
    tokens=st.integers(1, 5),
    d_model=st.integers(1, 6),
    heads=st.integers(1, 3),
    d_head=st.integers(1, 3),
    causal=st.booleans(),
    with_out=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    strategy=st.sampled_from(STRATEGIES),
    seed=st.integers(0, 2**16),
)
def test_matches_per_head_reference(
    batch, tokens, d_model, heads, d_head, causal, with_out, dtype, strategy, seed
):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, tokens, d_model)).astype(dtype)
    w_q, w_k, w_v = (rng.standard_normal((d_model, heads * d_head)) for _ in range(3))
    w_o = rng.standard_normal((heads * d_head, d_model)) if with_out else None
    result = multi_head_attention(
        x, w_q, w_k, w_v, heads, w_out=w_o, strategy=strategy, causal=causal
    )
    assert result.query.shape == (batch, heads, tokens, d_head)
    assert result.value.shape == (batch, heads, tokens, d_head)
    assert result.attention.weights.shape == (batch, heads, tokens, tokens)
    width = d_model if with_out else heads * d_head
    assert result.output.shape == (batch, tokens, width)
    assert result.output.dtype == dtype
    expected = per_head_reference(x, w_q, w_k, w_v, heads, w_o, causal)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}
    np.testing.assert_allclose(result.output, expected, **tol)


def test_biases_and_padding_mask():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6))
    w = [rng.standard_normal((6, 4)) for _ in range(3)]
    w_o = rng.standard_normal((4, 6))
    biases = [rng.standard_normal(4) for _ in range(3)] + [rng.standard_normal(6)]
    result = multi_head_attention(
        x, *w, 2, w_out=w_o, b_query=biases[0], b_key=biases[1], b_value=biases[2],
        b_out=biases[3],
    )  # fmt: skip
    expected = per_head_reference(x, *w, 2, w_o, biases=biases)
    np.testing.assert_allclose(result.output, expected, rtol=1e-10)
    padding = np.ones((2, 1, 1, 4), dtype=bool)
    padding[1, ..., 3] = False  # the second sentence has a padding token at the end
    masked = multi_head_attention(x, *w, 2, mask=padding)
    assert (masked.attention.weights[1, :, :, 3] == 0).all()
    assert (masked.attention.weights[0, :, :, 3] > 0).all()


def test_split_and_merge_heads_are_inverse_and_place_heads():
    x = np.arange(2 * 3 * 6).reshape(2, 3, 6)  # (B, T, H·d_head) with H=3, d_head=2
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 3, 2)  # (B, H, T, d_head)
    # head h holds columns h·d_head … (h+1)·d_head − 1 of every token
    np.testing.assert_array_equal(heads[1, 2, 0], x[1, 0, 4:6])
    np.testing.assert_array_equal(heads[0, 1, 2], x[0, 2, 2:4])
    np.testing.assert_array_equal(merge_heads(heads), x)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"x": np.ones((4, 6))}, "x"),
        ({"w_query": np.ones((5, 4))}, "w_query"),
        ({"w_key": np.ones((6, 5))}, "w_key"),
        ({"w_value": np.ones(6)}, "w_value"),
        ({"w_out": np.ones((3, 6))}, "w_out"),
        ({"heads": 0}, "heads"),
        ({"heads": 3}, "w_query"),
    ],
)
def test_projection_errors_name_the_argument(bad, match):
    args = {"x": np.ones((1, 4, 6)), **{n: np.ones((6, 4)) for n in ("w_query", "w_key")}}
    args.update({"w_value": np.ones((6, 4)), "heads": 2, "w_out": None})
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        multi_head_attention(
            args["x"], args["w_query"], args["w_key"], args["w_value"], args["heads"],
            w_out=args["w_out"],
        )  # fmt: skip


def test_a_sliding_window_reaches_the_heads_and_is_checked_first():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 6, 4))
    w_q, w_k, w_v = (rng.standard_normal((4, 4)) for _ in range(3))
    result = multi_head_attention(x, w_q, w_k, w_v, 2, causal=True, window=2)
    for head in range(2):
        scaled = result.query[0, head] @ result.key[0, head].T / np.sqrt(2)
        weights, _ = reference_softmax(scaled, reference_causal_keep(6, 6, 2))
        np.testing.assert_allclose(result.attention.weights[0, head], weights, rtol=1e-12)
    with pytest.raises(ValueError, match="causal=True"):
        multi_head_attention(x, w_q, w_k, w_v, 2, window=2)
