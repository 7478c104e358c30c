"""A decoder at its full context in bounded memory: attention by query blocks, heads on demand.

At T tokens a pass that records every head holds L·H·T² weights (SmolLM2 at 8 192
tokens: 145 GB). The long pass keeps instead what recomputing any head needs — each
layer's post-RoPE query (L, H, T, d) and key/value (L, H_kv, T, d) and the layer
inputs (L + 1, T, hidden), float32, O(L·T·width) — and computes each layer's
attention one block of query rows at a time::

    for each block of rows i0 … i1 − 1:                  # H heads at once
        raw = Q[:, i0:i1] · K[:, :i1]ᵀ                   # (H, bq, i1): only keys a row may see
        w   = softmax(raw · scale, causal)               # whole rows: exact, no running max
        out[:, i0:i1] = w · V[:, :i1]                    # (H, bq, d)
        fold w into the previews, summaries, head scores # while it is in memory

so no T × T array per head-stack is ever held (one block is H · bq · T floats). While
a block's weights are there they are folded into what the views need: a block
preview of each head (each pixel one block of cells: its largest weight, and its raw
score farthest from 0 among visible keys, as :mod:`attn_explorer.state.results.preview`
reduces the explorer's stages), the per-head summaries of
:mod:`attn_explorer.models.summaries` and the head scores of
:mod:`attn_explorer.analysis.head_scores` (only the key positions each definition
reads). :class:`HeadStack` then answers ``weights[layer, head]`` (or rows of it) by
recomputing that head from the kept query and key, with the same softmax.
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from attn_explorer.compute import Cancelled
from attn_explorer.compute.softmax import WORKERS, executor, softmax_rows
from attn_explorer.models.decoder.ops import softcap
from attn_explorer.models.errors import TextError

#: Most pixels per axis of a head's preview (the explorer's thumbnails use as many).
PREVIEW_PIXELS = 256
#: The block previews' type: they only feed pictures (thumbnails, and the enlarged view
#: until its full head arrives), and float16's 11 bits are finer than a colour map's 256
#: steps. Float32 would hold twice as much: 141 MB instead of 71 at 8 192 tokens of SmolLM2.
PREVIEW_DTYPE = np.float16
#: Query rows per block of the long pass (rounded up to whole preview blocks).
QUERY_BLOCK = 64
#: A pass that would record more than this (L·H·T² scores and weights, 8 bytes a cell)
#: runs as a long pass instead.
MAX_RECORD_BYTES = 1 << 30


def preview_block(tokens: int) -> int:
    """Cells per preview pixel along an axis of ``tokens``: at most PREVIEW_PIXELS remain."""
    return max(1, math.ceil(tokens / PREVIEW_PIXELS))


def records_everything(layers: int, heads: int, tokens: int) -> bool:
    """True when one pass may keep every head's (T × T) scores and weights."""
    return layers * heads * tokens * tokens * 8 <= MAX_RECORD_BYTES


def pass_bytes(
    layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int, ff: int, tokens: int
) -> int:
    """Bytes a long pass of ``tokens`` holds at its peak, besides the model's weights.

    Kept: query, key, value (L, H + 2·H_kv, T, d), layer inputs (L + 1, T, hidden), two
    (L, H, n, n) previews (PREVIEW_DTYPE); per layer: the feed-forward's three (T, ff)
    arrays and a few (T, hidden) ones; per block: raw scores, weights and a mask, (H, bq, T).
    """
    n = -(-tokens // preview_block(tokens))
    kept = layers * (heads + 2 * kv_heads) * tokens * head_dim + (layers + 1) * tokens * hidden
    working = 3 * tokens * ff + 6 * tokens * hidden + 3 * heads * QUERY_BLOCK * tokens
    previews = 2 * layers * heads * n * n * np.dtype(PREVIEW_DTYPE).itemsize
    return 4 * (kept + working) + previews


#: Bytes of one (rows, ff) temporary of the long pass's feed-forward: under glibc's 32 MB
#: mmap threshold, so the rows' temporaries are reused from the heap (no fresh pages, no
#: stall of the GUI thread's allocations), and a few of them at once stay far below one
#: (T, ff) array (at 8 192 tokens of SmolLM2 each of those is 50 MB, four at once).
MLP_CHUNK_BYTES = 16 << 20


def feed_forward_rows(
    h: np.ndarray,
    gate: np.ndarray,
    up: np.ndarray,
    down: np.ndarray,
    activation: Callable[[np.ndarray], np.ndarray],
    chunk_bytes: int = MLP_CHUNK_BYTES,
) -> np.ndarray:
    """``(activation(h @ gate.T) * (h @ up.T)) @ down.T`` a block of rows at a time: (T, hidden).

    Every row is computed by the same products and the same elementwise steps as the whole
    array would be (a row of a matrix product does not depend on the other rows), so the
    numbers are the same; only the temporaries are smaller.
    """
    rows = max(64, chunk_bytes // (4 * max(gate.shape[0], 1)))
    out = np.empty((h.shape[0], down.shape[0]), dtype=h.dtype)  # (T, hidden)
    for r0 in range(0, h.shape[0], rows):
        part = h[r0 : r0 + rows]  # (rows, hidden)
        out[r0 : r0 + rows] = (activation(part @ gate.T) * (part @ up.T)) @ down.T
    return out


def available_bytes() -> int:
    """Memory the system can still give (Linux MemAvailable), or a large number if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 1 << 62


def check_memory(needed: int, tokens: int, available: int | None = None) -> None:
    """TextError, in one sentence, when ``needed`` bytes are more than the memory free now."""
    free = available_bytes() if available is None else available
    if needed > free:
        raise TextError(
            f"text: {tokens:,} tokens need about {needed / 1e9:.1f} GB for one pass, but only "
            f"{free / 1e9:.1f} GB of memory is free; shorten the text or close other programs."
        )


#: Preview blocks up to this many columns wide are reduced one column offset at a time.
STRIDED_MAX = 16


def reduce_blocks(x: np.ndarray, size: int, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc`` (max or min) over blocks of size × size cells of (…, R, C) ``x``; ragged ends.

    Whole blocks are one reduce over a reshaped view, each ragged end one more (a
    ``reduceat`` with short segments took a third of a 1 024-token pass).
    """
    if size == 1:
        return x
    *lead, t_r, t_c = x.shape
    whole_r, whole_c = t_r // size, t_c // size
    rows = np.empty((*lead, -(-t_r // size), t_c), dtype=x.dtype)  # (…, ⌈R/s⌉, C)
    if whole_r:
        cut = x[..., : whole_r * size, :].reshape(*lead, whole_r, size, t_c)
        ufunc.reduce(cut, axis=-2, out=rows[..., :whole_r, :])
    if whole_r * size < t_r:
        ufunc.reduce(x[..., whole_r * size :, :], axis=-2, out=rows[..., -1, :])
    out = np.empty((*lead, rows.shape[-2], -(-t_c // size)), dtype=x.dtype)  # (…, ⌈R/s⌉, ⌈C/s⌉)
    if whole_c:
        cut = rows[..., : whole_c * size].reshape(*lead, rows.shape[-2], whole_c, size)
        if size > STRIDED_MAX:
            ufunc.reduce(cut, axis=-1, out=out[..., :whole_c])
        else:  # a reduce over a short last axis pays per output: fold the columns in turn
            whole = out[..., :whole_c]
            np.copyto(whole, cut[..., 0])
            for k in range(1, size):
                ufunc(whole, cut[..., k], out=whole)
    if whole_c * size < t_c:
        ufunc.reduce(rows[..., whole_c * size :], axis=-1, out=out[..., -1])
    return out


def hidden_cells(i0: int, i1: int, window: int) -> tuple[int, np.ndarray]:
    """The hidden keys of query rows i0 … i1 − 1 against keys 0 … i1 − 1.

    Returns (first column, mask): ``mask`` (i1 − i0, i1 − first) is True where key
    ``first + c`` is hidden from the row (later than it, or ``window`` or more before).
    """
    rows = np.arange(i0, i1)[:, None]  # (bq, 1)
    first = 0 if window else i0
    distance = rows - np.arange(first, i1)[None, :]  # (bq, i1 − first)
    hidden = distance < 0
    if window:
        hidden |= distance >= window
    return first, hidden


def block_weights(
    raw: np.ndarray, i0: int, scale: float, cap: float, window: int, threads: bool = True
) -> np.ndarray:
    """Softmax weights (…, bq, i1) of raw scores (…, bq, i1) of rows i0 …: the long pass's
    softmax and the heads' on demand, the same function so the two agree bit for bit
    (``threads`` changes who computes the blocks, not the numbers)."""
    i1 = raw.shape[-1]
    first, hidden = hidden_cells(i0, i1, window)
    keep = np.ones((i1 - i0, i1), dtype=bool)
    keep[:, first:] = ~hidden
    if cap:  # Gemma 2: the scaled scores soft-capped before the softmax
        weights, _ = softmax_rows(
            softcap(raw * raw.dtype.type(scale), cap), keep=keep, threads=threads
        )
    else:
        weights, _ = softmax_rows(raw, factor=scale, keep=keep, threads=threads)
    return weights


@dataclass
class LayerKeys:
    """How one layer's attention is recomputed: its scale, soft cap and window (0: none)."""

    scale: float
    cap: float = 0.0
    window: int = 0


def long_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    keys: LayerKeys,
    fold: Callable[[int, np.ndarray, np.ndarray], None] | None = None,
) -> np.ndarray:
    """Causal attention of (H, T, d) queries on (H_kv, T, d) keys and values, by query blocks.

    Query head h reads key/value head h // (H / H_kv), broadcast, never copied. Each
    block's raw scores and weights (H, bq, i1) go to ``fold(i0, raw, weights)`` before
    that core computes its next block; the cores take blocks from one shared queue, the
    longest first, so ``fold`` is called from several threads at once. Returns the
    output (H, T, d): a view of a (T, H, d) array, so the layer's (T, H·d) rows for the
    output projection are a reshape, not a copy.
    """
    heads, t, d = q.shape
    kv = k.shape[0]
    group = heads // kv
    block = max(QUERY_BLOCK, preview_block(t))
    block = -(-block // preview_block(t)) * preview_block(t)  # whole preview rows per block
    output = np.empty((t, heads, v.shape[-1]), dtype=q.dtype)  # (T, H, d)
    next_blocks = iter(range((t - 1) // block * block, -1, -block))  # longest rows first

    def work() -> None:  # each core takes the next block of rows until none is left
        for i0 in next_blocks:  # next() on a range iterator is atomic under the GIL
            i1, bq = min(i0 + block, t), min(block, t - i0)
            rows = q[:, i0:i1].reshape(kv, group * bq, d)  # (H_kv, G·bq, d)
            raw = np.matmul(rows, k[:, :i1].swapaxes(-1, -2))  # (H_kv, G·bq, d) @ (H_kv, d, i1)
            raw = raw.reshape(heads, bq, i1)  # (H, bq, i1)
            weights = block_weights(raw, i0, keys.scale, keys.cap, keys.window, threads=False)
            mixed = np.matmul(weights.reshape(kv, group * bq, i1), v[:, :i1])  # (H_kv, G·bq, d)
            output[i0:i1] = mixed.reshape(heads, bq, -1).transpose(1, 0, 2)  # (bq, H, d)
            if fold is not None:
                fold(i0, raw, weights)

    with threadpool_limits(limits=1, user_api="blas"):  # small matmuls: more threads only wait
        helpers = [executor().submit(work) for _ in range(min(WORKERS, -(-t // block)) - 1)]
        work()
        for helper in helpers:
            helper.result()  # an error in a helper is raised here
    return output.transpose(1, 0, 2)  # (H, T, d)


class HeadStack:
    """An (L, H, T, T) stage that is never held: each head recomputed when it is read.

    ``stack[layer, head]`` is that head's (T, T) float32 ``stage`` ("weights": 0 above
    the diagonal; "scores": raw Q·Kᵀ of every cell), ``stack[layer, head, i]`` one row,
    ``stack[layer, head, i0:i1]`` rows, ``stack[layer, head, i, j]`` one value —
    recomputed from the kept query and key with the long pass's own softmax.
    ``preview`` (L, H, n, n) is the pass's block preview of the stage, each pixel
    ``block`` × ``block`` cells.
    """

    def __init__(
        self,
        stage: str,
        query: np.ndarray,
        key: np.ndarray,
        kv_heads: np.ndarray,
        layer_keys: list[LayerKeys],
        preview: np.ndarray,
        block: int,
    ) -> None:
        self.stage = stage
        self.query, self.key, self.kv_heads = query, key, kv_heads
        self.layer_keys = layer_keys
        self.preview, self.block = preview, block
        layers, heads, tokens = query.shape[:3]
        self.shape = (layers, heads, tokens, tokens)
        self.ndim = 4
        self.dtype = query.dtype
        self._last: tuple[tuple[int, int], np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"HeadStack({self.stage}, shape={self.shape}, recomputed per head)"

    def __array__(self, *_: object, **__: object) -> np.ndarray:
        raise ValueError(
            f"{self.stage}: the {self.shape} stage of a long text is never held; "
            "read one head (stack[layer, head]) or rows of it."
        )

    def rows(self, layer: int, head: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` … ``stop`` − 1 of one head: (stop − start, T) float32."""
        t = self.shape[-1]
        q = self.query[layer, head, start:stop]  # (rows, d)
        k = self.key[layer, int(self.kv_heads[head])]  # (T, d)
        fill = np.empty if self.stage == "scores" else np.zeros  # weights: 0 above the diagonal
        out = fill((stop - start, t), dtype=self.dtype)
        keys = self.layer_keys[layer]
        # Both stages go QUERY_BLOCK rows at a time on one BLAS thread, so a row's bits do
        # not depend on how many rows were asked for: rows read from a block boundary (an
        # export's, an enlarged view's) equal the same rows of the whole head. One
        # (rows, d) @ (d, T) product for "scores" let BLAS split the work by its size,
        # and on some CPUs that changed the last bit of one score in ten.
        with threadpool_limits(limits=1, user_api="blas"):  # small matmuls, as in the pass
            for i0 in range(start, stop, QUERY_BLOCK):  # each row sees keys up to itself only
                i1 = min(i0 + QUERY_BLOCK, stop)
                if self.stage == "scores":  # every cell, as a full pass records it
                    out[i0 - start : i1 - start] = q[i0 - start : i1 - start] @ k.T
                    continue
                raw = q[i0 - start : i1 - start] @ k[:i1].T  # (bq, d) @ (d, i1)
                weights = block_weights(raw, i0, keys.scale, keys.cap, keys.window)
                out[i0 - start : i1 - start, :i1] = weights
        return out

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's whole (T, T) stage, recomputed (the last one asked for is kept)."""
        if self._last is not None and self._last[0] == (layer, head):
            return self._last[1]
        values = self.rows(layer, head, 0, self.shape[-1])
        self._last = ((layer, head), values)
        return values

    def reduced(
        self, layer: int, head: int, pixels: int, should_stop: Callable[[], bool] | None = None
    ) -> np.ndarray:
        """One head in blocks, at most ``pixels`` a side: each block's largest weight, or its
        raw score farthest from 0; the head itself when it is no longer. Rows are computed
        a few blocks at a time, so the whole head is never held; ``should_stop()`` true
        between them raises ``Cancelled`` (a view's background job superseded)."""
        t = self.shape[-1]
        size = max(1, math.ceil(t / pixels))
        if size == 1:
            return self.head(layer, head)
        n = -(-t // size)
        out = np.empty((n, n), dtype=self.dtype)
        step = size * max(1, 256 // size)  # rows per computation: whole blocks
        for r0 in range(0, t, step):
            if should_stop is not None and should_stop():
                raise Cancelled("head stopped")
            rows = self.rows(layer, head, r0, min(r0 + step, t))
            high = reduce_blocks(rows, size, np.maximum)
            if self.stage == "scores":
                low = reduce_blocks(rows, size, np.minimum)
                high = np.where(low + high < 0, low, high)
            out[r0 // size : r0 // size + high.shape[0]] = high
        return out

    def __getitem__(self, key: object) -> np.ndarray:
        if not isinstance(key, tuple) or not 2 <= len(key) <= 4:
            raise TypeError(f"{self.stage}: index one head as [layer, head(, rows(, keys))].")
        layer = range(self.shape[0])[operator.index(key[0])]  # −1 counts from the end
        head = range(self.shape[1])[operator.index(key[1])]
        if len(key) == 2:
            return self.head(layer, head)
        rows, t = key[2], self.shape[-1]
        values: np.ndarray
        if isinstance(rows, slice):
            start, stop, step = rows.indices(t)
            values = self.rows(layer, head, start, max(start, stop))[::step]
        else:
            i = range(t)[operator.index(rows)]
            values = self.rows(layer, head, i, i + 1)[0]
        if len(key) == 4:
            picked: np.ndarray = values[..., key[3]]
            return picked
        return values
