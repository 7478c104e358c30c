"""Multi-head attention from token vectors: where the head dimension comes from.

The three dimensions the seed article warns about appear here in one place:

=========  ==========================================  ==================
dimension  what it indexes                             axis below
=========  ==========================================  ==================
batch B    separate inputs (sentences) processed together  axis 0
head H     which attention head a computation belongs to   axis 1 after the split
sequence T token positions within one input                 axis 2 after the split
=========  ==========================================  ==================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_explorer.compute.pipeline import AttentionResult, attention, check_window
from attn_explorer.compute.validation import (
    as_float_array,
    check_limits,
    check_score_elements,
    check_values,
)


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, H·d_head) -> (B, H, T, d_head)."""
    B, T, width = x.shape
    x = x.reshape(B, T, heads, width // heads)  # (B, T, H, d_head)
    return x.transpose(0, 2, 1, 3)  # (B, H, T, d_head): head moves next to batch


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, T, d_head) -> (B, T, H·d_head)."""
    B, H, T, d_head = x.shape
    x = x.transpose(0, 2, 1, 3)  # (B, T, H, d_head)
    return x.reshape(B, T, H * d_head)  # (B, T, H·d_head): heads side by side again


def _matrix(name: str, value: object, dtype: np.dtype, d_model: int, heads: int) -> np.ndarray:
    """A projection matrix (d_model, H·d_head), checked and in ``dtype``."""
    array = as_float_array(name, value).astype(dtype, copy=False)
    if array.ndim != 2 or array.shape[0] != d_model or array.shape[1] % heads or 0 in array.shape:
        raise ValueError(
            f"{name}: expected (d_model={d_model}, H·d_head) with H={heads}; "
            f"got shape {array.shape}."
        )
    check_values(name, array)
    return array


def _vector(name: str, value: object | None, dtype: np.dtype, size: int) -> np.ndarray | None:
    """An optional bias of shape (size,), checked and in ``dtype``."""
    if value is None:
        return None
    array = as_float_array(name, value).astype(dtype, copy=False)
    if array.shape != (size,):
        raise ValueError(f"{name}: expected shape ({size},), got {array.shape}.")
    check_values(name, array)
    return array


@dataclass(frozen=True)
class MultiHeadResult:
    """Per-head Q, K, V (B, H, T, d_head), every attention stage, and the merged output."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    attention: AttentionResult
    output: np.ndarray  # (B, T, d_model) after W_o, or (B, T, H·d_head) without it


def multi_head_attention(
    x: object,
    w_query: object,
    w_key: object,
    w_value: object,
    heads: int,
    *,
    w_out: object | None = None,
    b_query: object | None = None,
    b_key: object | None = None,
    b_value: object | None = None,
    b_out: object | None = None,
    strategy: str = "batched",
    scale: bool | float = True,
    causal: bool = False,
    mask: object | None = None,
    window: int | None = None,
) -> MultiHeadResult:
    """Project ``x`` (B, T, d_model) into H heads, attend, and merge the heads back.

    ``w_query``/``w_key``/``w_value`` are (d_model, H·d_head), optional biases
    (H·d_head,); ``w_out`` (H·d_head, d_model) with bias ``b_out``. ``mask`` is
    boolean and broadcastable to (B, H, T, T) — e.g. a padding mask (B, 1, 1, T).
    ``window`` (with ``causal``) is a sliding window: query i sees keys i − w + 1 … i.
    """
    x_arr = as_float_array("x", x)
    if x_arr.ndim != 3 or 0 in x_arr.shape:
        raise ValueError(
            f"x: expected (B, T, d_model) with every size ≥ 1, got shape {x_arr.shape}."
        )
    if isinstance(heads, bool) or not isinstance(heads, int | np.integer) or heads < 1:
        raise ValueError(f"heads: expected a whole number ≥ 1, got {heads!r}.")
    window = check_window(window, bool(causal))
    dtype = x_arr.dtype
    batch, tokens, d_model = x_arr.shape
    # Every shape and value is checked before the first projection is allocated.
    weights = {
        name: _matrix(name, w, dtype, d_model, heads)
        for name, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value))
    }
    width = weights["w_query"].shape[1]
    for name, w in weights.items():
        if w.shape[1] != width:
            raise ValueError(
                f"{name}: shape {w.shape} differs from w_query's {weights['w_query'].shape}; "
                "query, key and value need the same H·d_head."
            )
    check_limits("x", (batch, heads, tokens, width // heads))
    check_score_elements(batch * heads * tokens, tokens)
    check_values("x", x_arr)
    biases = {
        name: _vector(name, b, dtype, width)
        for name, b in (("b_query", b_query), ("b_key", b_key), ("b_value", b_value))
    }
    w_out_arr = None if w_out is None else as_float_array("w_out", w_out).astype(dtype, copy=False)
    if w_out_arr is not None:
        if w_out_arr.ndim != 2 or w_out_arr.shape[0] != width:
            raise ValueError(
                f"w_out: expected (H·d_head={width}, d_model); got shape {w_out_arr.shape}."
            )
        check_values("w_out", w_out_arr)
    b_out_arr = None
    if b_out is not None:
        if w_out_arr is None:
            raise ValueError("b_out: given without w_out; pass w_out too, or leave b_out out.")
        b_out_arr = _vector("b_out", b_out, dtype, w_out_arr.shape[1])

    def project(name: str, bias: str) -> np.ndarray:
        y = x_arr @ weights[name]  # (B, T, d_model) @ (d_model, H·d_head) -> (B, T, H·d_head)
        if biases[bias] is not None:
            y = y + biases[bias]  # (B, T, H·d_head) + (H·d_head,)
        check_values(f"x @ {name}", y)  # the projection itself may exceed the value limit
        return split_heads(y, heads)  # (B, H, T, d_head)

    q = project("w_query", "b_query")
    k = project("w_key", "b_key")
    v = project("w_value", "b_value")
    # One call covers every batch entry and every head: (B, H, T, d_head) in, (B, H, T, T) out.
    result = attention(
        q, k, v, strategy=strategy, scale=scale, causal=causal, mask=mask, window=window
    )
    assert result.output is not None
    merged = merge_heads(result.output)  # (B, T, H·d_head)
    if w_out_arr is not None:
        merged = merged @ w_out_arr  # (B, T, H·d_head) @ (H·d_head, d_model) -> (B, T, d_model)
        if b_out_arr is not None:
            merged = merged + b_out_arr
    return MultiHeadResult(query=q, key=k, value=v, attention=result, output=merged)
