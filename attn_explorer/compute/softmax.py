"""Row-wise softmax over a big score tensor, in cache-sized blocks, on every core.

A naive ``exp(x - x.max()) / sum`` makes five passes over the whole (B, H, T, T)
tensor; at T = 2048 that tensor is 256 MB, so each pass waits on memory. Here the
rows are cut into blocks of about ``BLOCK_BYTES``: each block is scaled, masked,
shifted, exponentiated and normalised while it sits in the core's L2 cache, so
the big tensors are read once and written once. numpy releases the GIL inside
each of these calls, so the blocks are shared between threads, one per core.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from attn_explorer.compute.validation import as_float_array

#: Bytes of one block of score rows: half of a 1 MB L2 per core, leaving room for the
#: block's mask and for the next block's input being fetched.
BLOCK_BYTES = 512 * 1024

#: Below this many score entries one thread is faster than handing work over.
THREADED_MIN_ELEMENTS = 1 << 20

#: Blocks a thread takes from the shared queue at a time (neighbours in memory).
CHUNK_BLOCKS = 4

#: Threads the softmax uses at most (one per core).
WORKERS = max(1, min(8, os.cpu_count() or 1))

LOG2_E = 1.4426950408889634  # log2(e)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

Block = tuple[int, int, int, int]  # (first head, last head + 1, first row, last row + 1)


class NonFiniteRows(ValueError):
    """A visible entry of ``x · factor`` is NaN or +inf, or overflowed to −inf.

    ``row`` is the index of the first such row found, without the key axis.
    """

    def __init__(self, message: str, row: list[int]) -> None:
        super().__init__(message)
        self.row = row


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, WORKERS - 1), thread_name_prefix="attn-softmax")
        return _pool


def _blocks(heads: int, t_q: int, t_k: int, itemsize: int) -> Iterator[Block]:
    """Cut (heads, T_q, T_k) into blocks of about ``BLOCK_BYTES``.

    Small grids are grouped several whole heads to a block (fewer numpy calls);
    big grids are cut into runs of query rows within one head.
    """
    rows = max(1, BLOCK_BYTES // (t_k * itemsize))
    if rows >= t_q:
        per_block = max(1, rows // t_q)
        for h in range(0, heads, per_block):
            yield h, min(h + per_block, heads), 0, t_q
    else:
        for h in range(heads):
            for r in range(0, t_q, rows):
                yield h, h + 1, r, min(r + rows, t_q)


class _Softmax:
    """One softmax job: inputs, outputs and the work done on one block."""

    def __init__(
        self,
        x: np.ndarray,
        out: np.ndarray,
        factor: float,
        keep: np.ndarray | None,
    ) -> None:
        t_q, t_k = x.shape[-2], x.shape[-1]
        self.lead = x.shape[:-2]
        heads = int(np.prod(self.lead, dtype=np.int64))
        self.x = x.reshape(heads, t_q, t_k)  # (B·H, T_q, T_k): a view, x is contiguous
        self.out = out.reshape(heads, t_q, t_k)  # (B·H, T_q, T_k)
        self.factor = x.dtype.type(factor)  # a float64 scalar would upcast every block
        # float32 takes powers of 2: numpy's float32 exp2 is ~40% faster than exp, and
        # e^d = 2^(d·log2 e). The shifted d ≤ 0 is rescaled, not x, so the rounding
        # is relative to d and weights match softmax(scaled) as closely as with exp.
        self.log2_e = x.dtype.type(LOG2_E) if x.dtype == np.float32 else None
        self.minus_inf = x.dtype.type(-np.inf)
        # Rows whose max is within ``margin`` of the block's share its shift: their
        # largest exps stay ≥ e^-20, so every weight within 60 e-folds of its row's
        # largest is a normal float (float32 underflows near e^-87).
        self.margin = x.dtype.type(20.0 if x.dtype == np.float32 else 200.0)
        # keep is either one (T_q, T_k) grid for every head, or broadcast per head.
        self.keep_grid: np.ndarray | None = None
        self.keep_heads: np.ndarray | None = None
        if keep is not None:
            if keep.ndim <= 2:
                self.keep_grid = np.broadcast_to(keep, (t_q, t_k))
            else:
                self.keep_heads = np.broadcast_to(keep, x.shape)  # no copy: a view
        self.fully = np.zeros((heads, t_q), dtype=bool)
        #: (head, row) of rows whose scaled entries are not finite; appended by any thread
        self.bad: list[tuple[int, int]] = []

    def _visible(self, block: Block) -> np.ndarray | None:
        h0, h1, r0, r1 = block
        if self.keep_grid is not None:
            return self.keep_grid[r0:r1]  # (rows, T_k), broadcast over the block's heads
        if self.keep_heads is not None:
            index: tuple[Any, ...] = np.unravel_index(np.arange(h0, h1), self.lead)
            return self.keep_heads[(*index, slice(r0, r1))]  # (heads, rows, T_k): block-sized
        return None

    def _scaled_masked(self, block: Block, blk: np.ndarray) -> None:
        """Write ``x * factor`` of the block into ``blk``, −inf where a key is hidden.

        An entry that overflows to −inf would pass for a hidden key: such rows are
        recorded in ``bad`` (one min over the cache-resident block when |factor| > 1).
        """
        h0, h1, r0, r1 = block
        src = self.x[h0:h1, r0:r1]  # (heads, rows, T_k)
        visible = self._visible(block)
        if self.factor == 1:
            np.copyto(blk, src)
        else:
            np.multiply(src, self.factor, out=blk)
            if abs(self.factor) > 1 and blk.min() == self.minus_inf:
                overflowed = np.isneginf(blk) & ~np.isneginf(src)  # (heads, rows, T_k)
                if visible is not None:
                    overflowed &= visible  # a hidden entry may overflow: it is −inf anyway
                self._record_bad(block, np.asarray(overflowed.any(axis=-1)))
        if visible is not None:
            np.copyto(blk, self.minus_inf, where=~visible)

    def _record_bad(self, block: Block, rows: np.ndarray) -> bool:
        """Note the first row of ``block`` flagged in ``rows`` (heads, rows); True if any."""
        if not rows.any():
            return False
        h, r = (int(i) for i in np.argwhere(rows)[0])
        self.bad.append((block[0] + h, block[2] + r))
        return True

    def run(self, blocks: list[Block]) -> None:
        # Overflow and inf − inf are detected below and reported by softmax_rows.
        with np.errstate(over="ignore", invalid="ignore"):
            for block in blocks:
                self._run_block(block)

    def _run_block(self, block: Block) -> None:
        h0, h1, r0, r1 = block
        blk = self.out[h0:h1, r0:r1]  # (heads, rows, T_k) view into the output
        self._scaled_masked(block, blk)
        # Any shift c gives the same softmax, exp(x − c) / Σ exp(x − c). One c for
        # the whole block (its max) makes the subtraction a scalar one, about 3×
        # faster than subtracting a column of row maxima. Rows whose own max lies
        # far below c (or that are fully hidden) would underflow: they are set
        # aside and get the textbook per-row softmax.
        row_max = blk.max(axis=-1)  # (heads, rows); NaN if the row holds a NaN
        if self._record_bad(block, ~(row_max < np.inf)) or self.bad:
            return  # NaN or +inf: softmax_rows raises, the block's weights do not matter
        shift = row_max.max()
        if shift == self.minus_inf:  # every key hidden for every row of the block
            blk[...] = 0
            self.fully[h0:h1, r0:r1] = True
            return
        far = row_max < shift - self.margin  # (heads, rows)
        any_far = bool(far.any())
        far_rows = blk[far] if any_far else None  # (n, T_k) copy, before blk changes
        np.subtract(blk, shift, out=blk)
        if self.log2_e is not None:
            np.multiply(blk, self.log2_e, out=blk)
            np.exp2(blk, out=blk)
        else:
            np.exp(blk, out=blk)
        row_sum = blk.sum(axis=-1, keepdims=True)  # (heads, rows, 1), ≥ e^-20
        if far_rows is not None:
            row_sum[far] = 1  # those rows are overwritten below
        np.divide(blk, row_sum, out=blk)
        if far_rows is not None:
            exact, dead = softmax_each_row(far_rows)
            blk[far] = exact
            self.fully[h0:h1, r0:r1][far] = dead


def softmax_each_row(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The textbook softmax of each row, in place: shift by the row max, exp, normalise.

    Rows whose entries are all −inf (every key hidden) become all zeros and are
    flagged in the returned boolean array.
    """
    row_max = rows.max(axis=-1, keepdims=True)  # (..., 1)
    dead = np.isneginf(row_max)  # every key of the row is hidden
    row_max[dead] = 0
    np.subtract(rows, row_max, out=rows)
    np.exp(rows, out=rows)
    row_sum = rows.sum(axis=-1, keepdims=True)  # (..., 1), ≥ 1 where alive
    row_sum[dead] = np.inf  # 0 / inf = 0: the dead row's weights are all zero
    np.divide(rows, row_sum, out=rows)
    return rows, dead[..., 0]


def softmax_rows(
    x: np.ndarray,
    *,
    factor: float = 1.0,
    keep: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise softmax of ``x * factor`` with hidden entries (``keep`` False) at zero.

    ``x`` is ``(..., T_q, T_k)`` float32 or float64; ``keep`` is boolean and
    broadcastable to it (True = visible). Each cache-sized block of rows is
    scaled, masked, shifted by its max, exponentiated and normalised in ``out``
    before the next block is touched, and big inputs are shared between threads;
    ``out`` may be ``x`` itself. Returns ``(weights, fully_masked_rows)``: ``weights`` has ``x``'s
    shape and dtype; ``fully_masked_rows`` is boolean ``(..., T_q)``, True where
    every key of the row was hidden (that row's weights are all zero, never NaN).
    """
    x = np.ascontiguousarray(as_float_array("x", x))  # int → float64; booleans refused
    if x.size == 0:
        raise ValueError(
            f"x: shape {x.shape} is empty; the softmax needs at least one row with one key."
        )
    if x.ndim < 2:  # one row
        weights, fully = softmax_rows(x.reshape(1, -1), factor=factor, keep=keep, out=out)
        return weights.reshape(x.shape), fully.reshape(())
    if (
        isinstance(factor, bool | np.bool_)
        or not isinstance(factor, int | float | np.integer | np.floating)
        or not np.isfinite(factor)
    ):
        raise ValueError(f"factor: expected a finite number, got {factor!r}.")
    if keep is not None:
        keep = _check_keep(keep, x.shape)
    if out is None:
        out = np.empty_like(x)
    if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(
            f"out: expected a C-contiguous {x.dtype} array of shape {x.shape}; "
            f"got {out.dtype} {out.shape}."
        )
    job = _Softmax(x, out, factor, keep)
    blocks = list(_blocks(job.x.shape[0], x.shape[-2], x.shape[-1], x.itemsize))
    if WORKERS == 1 or x.size < THREADED_MIN_ELEMENTS or len(blocks) < 2:
        job.run(blocks)
    else:
        # Threads take runs of neighbouring blocks from one shared queue as they
        # come free, so a thread the OS pauses never leaves the others waiting.
        starts = iter(range(0, len(blocks), CHUNK_BLOCKS))

        def take_runs() -> None:
            for start in starts:  # next() on a range iterator is atomic under the GIL
                job.run(blocks[start : start + CHUNK_BLOCKS])

        helpers = [_executor().submit(take_runs) for _ in range(WORKERS - 1)]
        take_runs()
        for helper in helpers:
            helper.result()
    if job.bad:
        head, row = min(job.bad)
        where = [*(int(i) for i in np.unravel_index(head, job.lead)), row]
        raise NonFiniteRows(
            f"x: row {where} of x · factor (factor = {float(factor):g}) is not finite: it "
            "holds NaN or +inf, or overflowed; every visible entry must be a finite number "
            "(−inf marks a hidden key).",
            where,
        )
    return out, job.fully.reshape(x.shape[:-1])


def _check_keep(keep: object, shape: tuple[int, ...]) -> np.ndarray:
    """``keep`` as a boolean array broadcastable to ``shape``; ValueError naming it otherwise."""
    array = np.asarray(keep)
    if array.dtype != np.bool_:
        raise ValueError(f"keep: expected a boolean array (True = visible), got {array.dtype}.")
    try:
        fits = np.broadcast_shapes(array.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"keep: shape {array.shape} does not broadcast to x's shape {shape}.")
    return array
