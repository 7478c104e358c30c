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

from attn_explorer.compute.pipeline import AttentionResult, attention
from attn_explorer.compute.validation import as_float_array


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
) -> MultiHeadResult:
    """Project ``x`` (B, T, d_model) into H heads, attend, and merge the heads back.

    ``w_query``/``w_key``/``w_value`` are (d_model, H·d_head), optional biases
    (H·d_head,); ``w_out`` (H·d_head, d_model) with bias ``b_out``. ``mask`` is
    boolean and broadcastable to (B, H, T, T) — e.g. a padding mask (B, 1, 1, T).
    """
    x_arr = as_float_array("x", x)
    if x_arr.ndim != 3:
        raise ValueError(f"x: expected (B, T, d_model), got shape {x_arr.shape}.")
    if isinstance(heads, bool) or not isinstance(heads, int | np.integer) or heads < 1:
        raise ValueError(f"heads: expected a whole number ≥ 1, got {heads!r}.")
    dtype = x_arr.dtype

    def project(name: str, w: object, b: object | None) -> np.ndarray:
        w_arr = as_float_array(name, w).astype(dtype, copy=False)
        if w_arr.ndim != 2 or w_arr.shape[0] != x_arr.shape[-1] or w_arr.shape[1] % heads:
            raise ValueError(
                f"{name}: expected (d_model={x_arr.shape[-1]}, H·d_head) with H={heads}; "
                f"got shape {w_arr.shape}."
            )
        y = x_arr @ w_arr  # (B, T, d_model) @ (d_model, H·d_head) -> (B, T, H·d_head)
        if b is not None:
            y = y + as_float_array(name + " bias", b).astype(dtype, copy=False)
        return split_heads(y, heads)  # (B, H, T, d_head)

    q = project("w_query", w_query, b_query)
    k = project("w_key", w_key, b_key)
    v = project("w_value", w_value, b_value)
    # One call covers every batch entry and every head: (B, H, T, d_head) in, (B, H, T, T) out.
    result = attention(q, k, v, strategy=strategy, scale=scale, causal=causal, mask=mask)
    assert result.output is not None
    merged = merge_heads(result.output)  # (B, T, H·d_head)
    if w_out is not None:
        w_out_arr = as_float_array("w_out", w_out).astype(dtype, copy=False)
        if w_out_arr.ndim != 2 or w_out_arr.shape[0] != merged.shape[-1]:
            raise ValueError(
                f"w_out: expected (H·d_head={merged.shape[-1]}, d_model); "
                f"got shape {w_out_arr.shape}."
            )
        merged = merged @ w_out_arr  # (B, T, H·d_head) @ (H·d_head, d_model) -> (B, T, d_model)
        if b_out is not None:
            merged = merged + as_float_array("w_out bias", b_out).astype(dtype, copy=False)
    return MultiHeadResult(query=q, key=k, value=v, attention=result, output=merged)
