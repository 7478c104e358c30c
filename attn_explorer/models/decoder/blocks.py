"""Rerun a decoder's blocks from layer l, with heads masked: the hook behind head ablation.

``run_blocks(model, x, first, head_mask)`` takes the residual stream entering block
``first`` (kept from a clean run) and runs blocks ``first`` … L − 1, multiplying each
query head's attention output (its slice [h·d, (h+1)·d) of the output projection's
input) by the mask: 0 ablates the head. So ablating a head of layer l costs L − l
blocks, not a whole forward pass. Several masks at once run as B streams, each
projection one (B·T)-row matmul; one stream runs exactly as ``DecoderModel.forward``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute import attention
from attn_explorer.compute.pipeline import causal_keep
from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.ops import (
    ACTIVATIONS,
    apply_rope,
    attend_one_row,
    rms_norm,
    softcap,
    window_keep,
)
from attn_explorer.models.decoder.weights import LayerWeights


@dataclass(frozen=True)
class BlockTrace:
    """One stream's run through every block, as ``run_blocks(..., trace=)`` records it.

    ``inputs`` (L + 1, T, hidden): block l's input (l = 0 the embeddings, L the last
    block's output, before the final norm). ``mixed`` (L, T, H·d): every query head's
    weights @ V, head-major (TransformerLens's ``z``). ``attn_last`` and ``mlp_last``
    (L, hidden): block l's change of the stream by its attention (after Gemma's norm
    after attention) and by its MLP, at the last position.
    """

    inputs: np.ndarray
    mixed: np.ndarray
    attn_last: np.ndarray
    mlp_last: np.ndarray

    @classmethod
    def empty(cls, model: DecoderModel, tokens: int) -> BlockTrace:
        """Buffers for a run of ``tokens`` positions through ``model``."""
        c = model.config
        width = c.num_heads * c.head_dim
        return cls(
            inputs=np.zeros((c.num_layers + 1, tokens, c.hidden_size), np.float32),
            mixed=np.zeros((c.num_layers, tokens, width), np.float32),
            attn_last=np.zeros((c.num_layers, c.hidden_size), np.float32),
            mlp_last=np.zeros((c.num_layers, c.hidden_size), np.float32),
        )


def dense(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(…, in) @ weightᵀ as one (rows, in) matmul: a batch of streams is one BLAS call."""
    if x.ndim == 2:
        result: np.ndarray = x @ weight.T  # (T, in) @ (in, out)
        return result
    rows: np.ndarray = x.reshape(-1, x.shape[-1]) @ weight.T  # (B·T, in) @ (in, out)
    return rows.reshape(*x.shape[:-1], -1)


def run_blocks(
    model: DecoderModel,
    x: np.ndarray,
    first: int,
    head_mask: np.ndarray | None = None,
    last_row: bool = False,
    trace: BlockTrace | None = None,
    on_layer: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Blocks ``first`` … L − 1 of ``model`` on ``x``, the residual stream entering ``first``.

    ``x`` is (T, hidden) or (B, T, hidden) at positions 0 … T − 1, no cache.
    ``head_mask`` (L, H) or (B, L, H) multiplies each query head's attention output in
    every block from ``first``; a batch axis in the mask but not in ``x`` splits the
    stream into B at the first block that masks, so the blocks and attention before it
    run once. With ``last_row`` only the last position goes through the last block's
    feed-forward (all a next-token readout needs). Returns the residual stream after the
    last block, before the final norm: (…, T or 1, hidden). Unbatched and unmasked it
    equals ``forward``'s last hidden state bit for bit (the same operations in order).

    ``trace`` (one unbatched, unmasked stream, all rows) records what activation patching
    and direct logit attribution read: every block's input, its heads' outputs and, at
    the last position, its attention's and MLP's changes of the stream (only copies: the
    numbers are those of the run without it). ``on_layer(index)`` hears each block's end
    (a stop check may raise from it).
    """
    c = model.config
    x = np.asarray(x, dtype=np.float32)
    if x.ndim not in (2, 3) or x.shape[-1] != c.hidden_size or not 0 <= first < c.num_layers:
        raise ValueError(f"run_blocks: expected (…, T, {c.hidden_size}) and 0 ≤ first < L.")
    mask = None if head_mask is None else np.asarray(head_mask, dtype=np.float32)
    if mask is not None and mask.shape[-2:] != (c.num_layers, c.num_heads):
        raise ValueError(f"head_mask: expected (…, {c.num_layers}, {c.num_heads}).")
    if trace is not None and (x.ndim != 2 or mask is not None or last_row):
        raise ValueError("run_blocks: a trace records one unmasked stream, every row.")
    activation = ACTIVATIONS[c.activation]
    t = x.shape[-2]
    for index in range(first, c.num_layers):
        w = model.weights.layer(index)
        local = bool(c.layer_kinds) and c.layer_kinds[index] == "local"
        cos, sin = model._rope(0, t, "local" if local else "global")
        keep = window_keep(np.arange(t), t, c.sliding_window) if local else None
        normed = rms_norm(x, w.attn_norm, c.rms_norm_eps)
        mixed = attention_mix(model, normed, w, cos, sin, keep)
        if mask is not None and not (mask[..., index, :] == 1).all():
            columns = np.repeat(mask[..., index, :], c.head_dim, axis=-1)  # (…, H·d)
            mixed = mixed * columns[..., None, :]  # (…, T, H·d): B streams from here
        attended = dense(mixed, w.attn_output)
        if w.post_attn_norm is not None:  # Gemma's sandwich norms, as in forward
            attended = rms_norm(attended, w.post_attn_norm, c.rms_norm_eps)
        if trace is not None:
            trace.inputs[index], trace.mixed[index] = x, mixed
            trace.attn_last[index] = attended[-1]
        x = x + attended
        if last_row and index == c.num_layers - 1:
            x = x[..., -1:, :]  # (…, 1, hidden)
        h = rms_norm(x, w.ffn_norm, c.rms_norm_eps)
        mlp = dense(activation(dense(h, w.gate)) * dense(h, w.up), w.down)
        if w.post_ffn_norm is not None:
            mlp = rms_norm(mlp, w.post_ffn_norm, c.rms_norm_eps)
        x = x + mlp
        if trace is not None:
            trace.mlp_last[index] = mlp[-1]
        if on_layer is not None:
            on_layer(index)
    if trace is not None:
        trace.inputs[c.num_layers] = x
    return x


def attention_mix(
    model: DecoderModel,
    h: np.ndarray,
    w: LayerWeights,
    cos: np.ndarray,
    sin: np.ndarray,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """Normed (…, T, hidden) -> every query head's weights @ V, (…, T, H·d), head-major.

    One stream runs exactly as in ``DecoderModel.forward``; B streams as one (B·T)-row
    matmul per projection and one batched attention (query head h reads KV head
    h // group, broadcast over its group, never copied).
    """
    c = model.config
    if h.ndim == 2:
        q, k, v = model._qkv(h, w, cos, sin)
        if h.shape[0] == 1:
            output = attend_one_row(q, k, v, model.scale, keep, c.attn_softcap)[2]
        elif c.attn_softcap:
            output = model._capped_attention(q, k, v, keep)[2]
        else:
            att = attention(
                q,
                k[model.kv_heads],
                v[model.kv_heads],
                causal=True,
                mask=keep,
                scale=c.attention_scale or True,
            )
            assert att.output is not None
            output = att.output
        return output.transpose(1, 0, 2).reshape(h.shape[0], -1)  # (T, H·d)
    streams, t, d = h.shape[0], h.shape[1], c.head_dim
    parts = []
    for index, weight in enumerate((w.query, w.key, w.value)):
        y = dense(h, weight)  # (B, T, count·d)
        bias = w.bias(index)
        y = y if bias is None else y + bias
        parts.append(y.reshape(streams, t, -1, d).transpose(0, 2, 1, 3))  # (B, count, T, d)
    q, k, v = parts
    if w.q_norm is not None and w.k_norm is not None:  # Qwen3, Gemma 3: per-head q/k norms
        q, k = rms_norm(q, w.q_norm, c.rms_norm_eps), rms_norm(k, w.k_norm, c.rms_norm_eps)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    kv, group = c.num_kv_heads, c.group_size
    q5 = q.reshape(streams, kv, group, t, d)  # (B, H_kv, group, T, d): h = kv·group + g
    scores = np.matmul(q5, k[:, :, None].swapaxes(-1, -2))  # (B, H_kv, group, T, T)
    visible = causal_keep(t, t) if keep is None else causal_keep(t, t) & keep  # (T, T)
    if c.attn_softcap:  # Gemma 2: the scaled scores soft-capped before the softmax
        capped = softcap(scores * np.float32(model.scale), c.attn_softcap)
        weights, _ = softmax_rows(capped, keep=visible)
    else:
        weights, _ = softmax_rows(scores, factor=model.scale, keep=visible)
    output = np.matmul(weights, v[:, :, None])  # (B, H_kv, group, T, d)
    answer: np.ndarray = (
        output.reshape(streams, -1, t, d).transpose(0, 2, 1, 3).reshape(streams, t, -1)
    )
    return answer
