"""The decoder's building blocks in numpy: norms, activations, RoPE, the one-row attention of a
decode step, the KV cache, and the (L, …) arrays a recorded pass fills layer by layer. Each
is the textbook formula with the shapes on the lines; the forward pass in ``llama.py``
strings them together per family.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attn_explorer.compute.softmax import softmax_rows


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / √(mean(x²) + eps) · weight over the last axis."""
    t = x.dtype.type
    mean_square = (x * x).mean(axis=-1, keepdims=True)  # (..., 1)
    result: np.ndarray = x / np.sqrt(mean_square + t(eps)) * weight
    return result


def silu(x: np.ndarray) -> np.ndarray:
    """x · sigmoid(x)."""
    answer: np.ndarray = x / (x.dtype.type(1) + np.exp(-x))
    return answer


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (PyTorch's ``gelu(approximate="tanh")``): Gemma's MLP gate."""
    t = x.dtype.type
    inner = t(np.sqrt(2.0 / np.pi)) * (x + t(0.044715) * x * x * x)
    answer: np.ndarray = t(0.5) * x * (t(1) + np.tanh(inner))
    return answer


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """cap · tanh(x / cap): Gemma 2's soft-capping of attention and final logits."""
    t = x.dtype.type
    answer: np.ndarray = np.tanh(x / t(cap)) * t(cap)
    return answer


def window_keep(positions: np.ndarray, keys: int, window: int) -> np.ndarray:
    """(T, keys) True where key j is within ``window`` of the query at ``positions[i]``
    (i − j < window, the query itself included) and not after it."""
    distance = positions[:, None] - np.arange(keys)[None, :]  # (T, keys)
    return (distance >= 0) & (distance < window)


def rope_tables(
    positions: np.ndarray, head_dim: int, theta: float, factors: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """cos and sin, each (T, d): frequency i for dims i and i + d/2 (the halves layout).

    ``factors`` (d/2,) divide the frequencies, as llama.cpp applies a GGUF's
    ``rope_freqs.weight`` (Llama 3's scaling of the low frequencies).
    """
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (d/2,)
    if factors is not None:
        inv_freq = inv_freq / np.asarray(factors, dtype=np.float64)  # (d/2,)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # (T, d/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, d)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate_halves(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE on (..., T, d): (x1, x2) -> (x1 cos − x2 sin, x2 cos + x1 sin) per frequency."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # rotate_half
    answer: np.ndarray = x * cos + rotated * sin
    return answer


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """:func:`rotate_halves` of (..., T, d) into one new C-contiguous array, bit for bit.

    ``x`` may be a strided view (the heads of a projection); the rotated copy
    ``rotate_halves`` builds is never made: x1·cos + (−x2)·sin is x1·cos − x2·sin
    exactly in floating point, and cos and sin repeat over the two halves.
    """
    half = x.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]  # (T, d/2): the halves' angles are the same
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty(x.shape, dtype=x.dtype)
    o1, o2 = out[..., :half], out[..., half:]
    np.multiply(x1, c, out=o1)
    tmp = x2 * s
    np.subtract(o1, tmp, out=o1)
    np.multiply(x2, c, out=o2)
    np.multiply(x1, s, out=tmp)
    np.add(o2, tmp, out=o2)
    return out


def attend_one_row(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    keep: np.ndarray | None = None,
    cap: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Causal attention of one new query row per head against every cached key.

    ``q`` (H, 1, d); ``k``, ``v`` (H_kv, t, d), query head h reading KV head
    h // (H / H_kv). Returns scores, weights (H, 1, t) and output (H, 1, d), equal bit
    for bit to ``compute.attention(q, k[kv_heads], v[kv_heads], causal=True)``: the
    same one-row matmuls (the KV head is broadcast across its group, not copied) and
    the same softmax, without the per-call checks (the last row sees every key, so
    the causal mask hides nothing). ``keep`` (1, t) hides keys outside a sliding window;
    ``cap`` soft-caps the scaled scores first (Gemma 2).
    """
    heads, kv, t = q.shape[0], k.shape[0], k.shape[1]
    group = heads // kv
    q4 = q.reshape(kv, group, 1, q.shape[-1])  # (H_kv, group, 1, d)
    scores = np.matmul(q4, k[:, None].swapaxes(-1, -2))  # (H_kv, group, 1, t)
    if cap:
        capped = softcap(scores.reshape(heads, 1, t) * q.dtype.type(scale), cap)
        weights, _ = softmax_rows(capped, keep=keep)  # (H, 1, t)
    else:
        weights, _ = softmax_rows(scores.reshape(heads, 1, t), factor=scale, keep=keep)
    output = np.matmul(weights.reshape(kv, group, 1, t), v[:, None])  # (H_kv, group, 1, d)
    return scores.reshape(heads, 1, t), weights, output.reshape(heads, 1, -1)


@dataclass
class KVCache:
    """Each layer's keys and values so far and how many positions they hold.

    ``keys[i]`` and ``values[i]`` are (H_kv, capacity, d) buffers whose first
    ``length`` positions are filled; they grow by doubling, so a generated token
    writes its key and value in place instead of copying the whole cache.
    """

    keys: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    length: int = 0

    def extend(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store (H_kv, T, d) keys and values after ``length``; views of all length + T.

        ``length`` itself moves on once every layer has its new positions (``advance``).
        """
        end = self.length + k.shape[1]
        if layer == len(self.keys):
            capacity = 2 * end
            self.keys.append(np.empty((k.shape[0], capacity, k.shape[2]), k.dtype))
            self.values.append(np.empty((v.shape[0], capacity, v.shape[2]), v.dtype))
        elif end > self.keys[layer].shape[1]:
            for buffers in (self.keys, self.values):
                old = buffers[layer]
                heads, capacity, d = old.shape
                grown = np.empty((heads, max(end, 2 * capacity), d), old.dtype)
                grown[:, : self.length] = old[:, : self.length]
                buffers[layer] = grown
        keys, values = self.keys[layer], self.values[layer]
        keys[:, self.length : end] = k
        values[:, self.length : end] = v
        return keys[:, :end], values[:, :end]

    def advance(self, count: int) -> None:
        self.length += count


def kept_layer(
    kept: list[np.ndarray], layers: int, index: int, arrays: tuple[np.ndarray, ...]
) -> list[np.ndarray]:
    """Copy one layer's ``arrays`` into the (L, …) arrays ``kept`` (made empty on the first
    layer, so a page is only touched when its layer is written) and return the stored copies."""
    if not kept:
        kept.extend(np.empty((layers, *a.shape), dtype=a.dtype) for a in arrays)
    for into, array in zip(kept, arrays, strict=True):
        into[index] = array
    return [into[index] for into in kept]
