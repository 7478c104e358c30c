"""Several texts through a decoder as ONE batch: right-padded ids and a key padding mask.

    ids (B, T), keep (B, T): True at a sentence's real tokens, False at its padding
    x = embedding[ids]                                   # (B, T, hidden)
    for each layer:
        q, k, v = RMSNorm(x) · W_q, W_k, W_v              # (B, H or H_kv, T, d), RoPE applied
        visible = causal(T, T) & keep[:, None, None, :]   # (B, 1, T, T): no later key, no padding
        x = x + W_o · attention(q, k[kv_head], v[kv_head], visible)
        x = x + MLP(RMSNorm(x))

The same operations as :meth:`DecoderModel.forward` (its own helpers: ``_qkv``'s norms,
``_rope``, the Gemma soft-cap and sliding window), with a batch axis in front and the
padding hidden from every query, so each sentence's real rows equal the sentence run
alone (tests: within 1e-5). With right-padding the causal mask already hides padding
from real queries; the key mask is what keeps a padded query row off the other padding.
Lives apart from ``llama.py`` so the single-text path stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_explorer.compute import attention
from attn_explorer.compute.pipeline import causal_keep
from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.long_pass import MAX_RECORD_BYTES
from attn_explorer.models.decoder.ops import ACTIVATIONS, apply_rope, rms_norm, softcap, window_keep
from attn_explorer.models.formats.serial import one_call_at_a_time


@dataclass(frozen=True)
class BatchForward:
    """One batched pass: (B, L, …) arrays of every layer, padding included."""

    query: np.ndarray  # (B, L, H, T, d)
    key: np.ndarray  # (B, L, H_kv, T, d)
    value: np.ndarray  # (B, L, H_kv, T, d)
    scores: np.ndarray  # (B, L, H, T, T): raw q·k, before the scale and the mask
    weights: np.ndarray  # (B, L, H, T, T): exactly 0 at every hidden key
    hidden_states: np.ndarray  # (B, L + 1, T, hidden)
    logits: np.ndarray  # (B, T, vocab)
    scale: float


def _dense(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(B, T, in) @ weightᵀ as one (B·T, in) matmul: one BLAS call for the whole batch."""
    rows: np.ndarray = x.reshape(-1, x.shape[-1]) @ weight.T  # (B·T, in) @ (in, out)
    return rows.reshape(*x.shape[:-1], -1)


@one_call_at_a_time
def forward_batch(model: DecoderModel, input_ids: np.ndarray, keep: np.ndarray) -> BatchForward:
    """Run right-padded (B, T) ids with ``keep`` (B, T) True at real tokens; keep every head.

    ValueError when the shapes disagree, an id is out of the vocabulary, a row has no
    real token, the padding is not on the right, or the recorded attention would pass
    ``MAX_RECORD_BYTES``.
    """
    c = model.config
    ids = np.asarray(input_ids, dtype=np.int64)
    real = np.asarray(keep, dtype=bool)
    if ids.ndim != 2 or ids.size == 0 or real.shape != ids.shape:
        raise ValueError(f"input_ids: expected (B, T) ids and a (B, T) mask, got {ids.shape}.")
    if ids.min() < 0 or ids.max() >= c.vocab_size:
        raise ValueError(f"input_ids: ids must lie in 0 … {c.vocab_size - 1}.")
    lengths = real.sum(axis=1)
    if not lengths.min() >= 1 or (real != (np.arange(ids.shape[1]) < lengths[:, None])).any():
        raise ValueError("keep: each row needs ≥ 1 real token, the padding after it (right).")
    streams, t = ids.shape
    record = streams * c.num_layers * c.num_heads * t * t * 8  # scores + weights, float32
    if record > MAX_RECORD_BYTES:
        raise ValueError(
            f"a batch of {streams} × {t} tokens would record {record:,} bytes of attention, "
            f"over {MAX_RECORD_BYTES:,}; use fewer or shorter sentences."
        )
    x = model.weights.embed(ids.reshape(-1)).reshape(streams, t, -1)  # (B, T, hidden)
    if c.embedding_scale != 1.0:
        x = x * np.float32(c.embedding_scale)  # Gemma: × √width
    activation = ACTIVATIONS[c.activation]
    visible_keys = real[:, None, None, :]  # (B, 1, 1, T): no query sees a padded key
    kept: list[list[np.ndarray]] = [[], [], [], [], []]  # q, k, v, scores, weights per layer
    hidden = [x]
    for index in range(c.num_layers):
        w = model.weights.layer(index)
        local = bool(c.layer_kinds) and c.layer_kinds[index] == "local"
        cos, sin = model._rope(0, t, "local" if local else "global")
        h = rms_norm(x, w.attn_norm, c.rms_norm_eps)
        parts = []
        for which, weight in enumerate((w.query, w.key, w.value)):
            y = _dense(h, weight)  # (B, T, count·d)
            bias = w.bias(which)
            y = y if bias is None else y + bias
            parts.append(y.reshape(streams, t, -1, c.head_dim).transpose(0, 2, 1, 3))
        q, k, v = parts  # (B, H or H_kv, T, d)
        if w.q_norm is not None and w.k_norm is not None:  # Qwen3, Gemma 3: per-head norms
            q, k = rms_norm(q, w.q_norm, c.rms_norm_eps), rms_norm(k, w.k_norm, c.rms_norm_eps)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        window = window_keep(np.arange(t), t, c.sliding_window) if local else causal_keep(t, t)
        visible = window & visible_keys  # (B, 1, T, T)
        k_h, v_h = k[:, model.kv_heads], v[:, model.kv_heads]  # (B, H, T, d): group's copies
        if c.attn_softcap:  # Gemma 2: the scaled scores soft-capped before the softmax
            scores = np.matmul(q, k_h.swapaxes(-1, -2))  # (B, H, T, T)
            capped = softcap(scores * np.float32(model.scale), c.attn_softcap)
            weights, _ = softmax_rows(capped, keep=np.broadcast_to(visible, capped.shape))
            output = np.matmul(weights, v_h)  # (B, H, T, T) @ (B, H, T, d)
        else:
            att = attention(q, k_h, v_h, mask=visible, scale=c.attention_scale or True)
            assert att.output is not None
            scores, weights, output = att.scores, att.weights, att.output
        mixed = output.transpose(0, 2, 1, 3).reshape(streams, t, -1)  # (B, T, H·d)
        attended = _dense(mixed, w.attn_output)
        if w.post_attn_norm is not None:  # Gemma's sandwich norms
            attended = rms_norm(attended, w.post_attn_norm, c.rms_norm_eps)
        x = x + attended
        f = rms_norm(x, w.ffn_norm, c.rms_norm_eps)
        mlp = _dense(activation(_dense(f, w.gate)) * _dense(f, w.up), w.down)  # (B, T, hidden)
        if w.post_ffn_norm is not None:
            mlp = rms_norm(mlp, w.post_ffn_norm, c.rms_norm_eps)
        x = x + mlp
        hidden.append(x)
        for into, array in zip(kept, (q, k, v, scores, weights), strict=True):
            into.append(array)
    normed = rms_norm(x, model.weights.final_norm, c.rms_norm_eps).reshape(streams * t, -1)
    logits = model.weights.logits(normed).reshape(streams, t, -1)  # (B, T, vocab)
    if c.final_softcap:
        logits = softcap(logits, c.final_softcap)
    q5, k5, v5, s5, a5 = (np.stack(arrays, axis=1) for arrays in kept)  # (B, L, …)
    return BatchForward(q5, k5, v5, s5, a5, np.stack(hidden, axis=1), logits, model.scale)
