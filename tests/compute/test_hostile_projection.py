"""Issue 12, items 5 and 8: multi_head_attention names its own arguments, checks before work."""

import tracemalloc

import numpy as np
import pytest

from attn_explorer.compute import LIMITS, multi_head_attention


# -- multi_head_attention names its own arguments and checks sizes before projecting --------------
def mha_args(t=3, d_model=4, heads=2):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, t, d_model))
    w = [rng.standard_normal((d_model, d_model)) for _ in range(3)]
    return x, w, heads


@pytest.mark.parametrize("where", ["x", "w_query", "w_key", "w_value"])
def test_mha_nan_is_reported_by_its_argument_name(where):
    x, (wq, wk, wv), heads = mha_args()
    arrays = {"x": x, "w_query": wq, "w_key": wk, "w_value": wv}
    arrays[where] = arrays[where].copy()
    arrays[where].flat[1] = np.nan
    with pytest.raises(ValueError) as caught:
        multi_head_attention(
            arrays["x"], arrays["w_query"], arrays["w_key"], arrays["w_value"], heads
        )
    assert str(caught.value).startswith(where + ":"), str(caught.value)


@pytest.mark.parametrize("bias", ["b_query", "b_key", "b_value", "b_out"])
def test_mha_bad_bias_shape_is_named(bias):
    x, (wq, wk, wv), heads = mha_args()
    kwargs = {bias: np.ones(3), "w_out": np.eye(4)}
    with pytest.raises(ValueError) as caught:
        multi_head_attention(x, wq, wk, wv, heads, **kwargs)
    message = str(caught.value)
    assert message.startswith(bias + ":") and "(4,)" in message and "(3,)" in message, message


def test_mha_nan_bias_is_named():
    x, (wq, wk, wv), heads = mha_args()
    with pytest.raises(ValueError, match=r"^b_key:.*finite"):
        multi_head_attention(x, wq, wk, wv, heads, b_key=np.array([0, 0, np.nan, 0]))


def test_mha_refuses_too_many_tokens_before_projecting():
    """T = 20 000 is over the limit: refused from the shape, before any projection is allocated."""
    d_model = 512
    x = np.broadcast_to(np.float32(1), (1, 20_000, d_model))  # no memory behind it
    w = np.broadcast_to(np.float32(0.01), (d_model, d_model))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"number of tokens T = 20000"):
            multi_head_attention(x, w, w, w, 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB allocated before refusing"


def test_mha_refuses_too_many_heads_before_projecting():
    x, (wq, wk, wv), _ = mha_args(d_model=LIMITS.max_heads + 1)
    with pytest.raises(ValueError, match="number of heads H"):
        multi_head_attention(x, wq, wk, wv, LIMITS.max_heads + 1)
