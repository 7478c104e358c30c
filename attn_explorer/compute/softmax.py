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
LN_2 = 0.6931471805599453  # ln(2) = 1 / log2(e)

#: numpy's float32 exp2 takes ~24 µs per 128 K values when every result is a normal
#: float, but 135 µs when a quarter are exp2(−inf) and ~1.8 ms when results are
#: subnormal (measured here); np.exp stays at ~42 µs for all of them. Blocks whose
#: shifted values all lie at or above this use exp2, the others exp.
EXP2_NORMAL_MIN = -126.0

#: A float32 block whose largest scaled score is at most this (and smallest at least
#: EXP2_NORMAL_MIN) is exponentiated without a shift: each 2^y ≤ 2^64, a row of up to
#: 2^24 keys sums to at most 2^88, far below float32's 2^128.
NO_SHIFT_MAX = 64.0

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


def executor() -> ThreadPoolExecutor:
    """The pool of WORKERS − 1 threads the callers share their blocks with (made once)."""
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
    """One softmax job: inputs, outputs and the work done on one block.

    Per block, while it sits in cache: ``blk = x · c`` (hidden keys −inf), shift by
    the block's max (float32 skips the shift where no 2^y could overflow or go
    subnormal: see NO_SHIFT_MAX), exponentiate, sum each row with one BLAS
    matrix-vector product, multiply by the reciprocal sums. For float32,
    ``c = factor · log2 e`` and the exponential is ``exp2``: the scale, the change of
    base and the copy out of the scores are one pass. Rows whose sum is tiny (their
    max lies far below the block's, or every key is hidden) are redone with the
    textbook per-row softmax.
    """

    def __init__(
        self,
        x: np.ndarray,
        out: np.ndarray,
        factor: float,
        keep: np.ndarray | None,
    ) -> None:
        t_q, t_k = x.shape[-2], x.shape[-1]
        self.t_q, self.t_k = t_q, t_k
        self.lead = x.shape[:-2]
        heads = int(np.prod(self.lead, dtype=np.int64))
        self.x = x.reshape(heads, t_q, t_k)  # (B·H, T_q, T_k): a view, x is contiguous
        self.out = out.reshape(heads, t_q, t_k)  # (B·H, T_q, T_k)
        self.out_rows = out.reshape(heads * t_q, t_k)  # every row of every head, a view
        self.in_place = np.shares_memory(x, out)
        dtype = x.dtype.type
        self.factor = dtype(factor)  # a float64 scalar would upcast every block
        # float32 takes powers of 2 where it can: numpy's float32 exp2 is ~40% faster than
        # exp, and e^y = 2^(y·log2 e), so the base change folds into the scale:
        # c = factor·log2 e (see EXP2_NORMAL_MIN for where exp2 is slow).
        self.base2 = x.dtype == np.float32
        self.c = dtype(float(factor) * LOG2_E) if self.base2 else self.factor
        self.ln_2 = dtype(LN_2)
        self.minus_inf = dtype(-np.inf)
        self.ones = np.ones(t_k, dtype=x.dtype)  # (T_k,): row sums as one BLAS gemv
        # A row counts as far when its sum after the block's shift is below T_k·e^-margin:
        # every row kept on the fast path then has its max within ``margin`` e-folds of
        # the shift, so its largest exps stay ≥ e^-20 and every weight within 60 e-folds
        # of its row's largest is a normal float (float32 underflows near e^-87).
        margin = 20.0 if x.dtype == np.float32 else 200.0
        self.tiny = dtype(t_k * np.exp(-margin))
        # keep is either one (T_q, T_k) grid for every head, or broadcast per head.
        self.keep_grid: np.ndarray | None = None
        # 0 where visible, −inf where hidden: adding it masks a block in one fast pass
        # (a copyto with a boolean where= is ~3× slower).
        self.bias_grid: np.ndarray | None = None
        self.keep_heads: np.ndarray | None = None
        if keep is not None:
            if keep.ndim <= 2:
                self.keep_grid = np.broadcast_to(keep, (t_q, t_k))
                self.bias_grid = np.where(self.keep_grid, dtype(0), self.minus_inf)  # (T_q, T_k)
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

    def _scaled_masked(
        self, block: Block, src: np.ndarray, visible: np.ndarray | None, blk: np.ndarray
    ) -> bool:
        """Write ``src · c`` into ``blk``, −inf where a key is hidden; False if it overflowed.

        An entry that overflows to −inf would pass for a hidden key, so with |c| > 1
        one min over the cache-resident block looks for it (``+inf`` and NaN show in
        the block's max, which the caller takes anyway).
        """
        if self.c == 1:
            np.copyto(blk, src)
        else:
            np.multiply(src, self.c, out=blk)
            if abs(self.c) > 1 and blk.min() == self.minus_inf:
                overflowed = np.isneginf(blk) & ~np.isneginf(src)  # (heads, rows, T_k)
                if visible is not None:
                    overflowed &= visible  # a hidden entry may overflow: it is −inf anyway
                if overflowed.any():
                    return False
        if self.bias_grid is not None:
            np.add(blk, self.bias_grid[block[2] : block[3]], out=blk)
        elif visible is not None:
            np.copyto(blk, self.minus_inf, where=~visible)
        return True

    def _record_bad(self, block: Block, rows: np.ndarray) -> bool:
        """Note the first row of ``block`` flagged in ``rows`` (heads, rows); True if any."""
        if not rows.any():
            return False
        h, r = (int(i) for i in np.argwhere(rows)[0])
        self.bad.append((block[0] + h, block[2] + r))
        return True

    def run(self, blocks: list[Block]) -> None:
        # Overflow and inf − inf are detected below and reported by softmax_rows.
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            for block in blocks:
                self._run_block(block)

    def _run_block(self, block: Block) -> None:
        h0, h1, r0, r1 = block
        blk = self.out[h0:h1, r0:r1]  # (heads, rows, T_k) view into the output
        rows = self.out_rows[h0 * self.t_q + r0 : (h1 - 1) * self.t_q + r1]  # same, 2-D
        src = self.x[h0:h1, r0:r1]
        if self.in_place:  # blk is src: keep the scores for rows redone below
            src = src.copy()
        visible = self._visible(block)
        if not self._scaled_masked(block, src, visible, blk):
            self._find_bad(block, src, visible)
            return
        # Any shift m gives the same softmax, exp(y − m) / Σ exp(y − m). One m for the
        # whole block (its max, one cheap reduction) makes the subtraction a scalar one.
        shift = blk.max()  # NaN if the block holds a NaN, +inf if it holds +inf
        if not shift < np.inf and visible is not None:
            # Adding −inf to a +inf (or NaN) under a hidden key leaves NaN: hidden keys
            # must not count, whatever they hold, so mask this block by overwriting.
            np.multiply(src, self.c, out=blk)
            np.copyto(blk, self.minus_inf, where=~np.broadcast_to(visible, blk.shape))
            shift = blk.max()
        if not shift < np.inf:
            self._find_bad(block, src, visible)
            return
        if self.bad:
            return  # softmax_rows raises: the weights do not matter any more
        if shift == self.minus_inf:  # every key hidden for every row of the block
            blk[...] = 0
            self.fully[h0:h1, r0:r1] = True
            return
        low = blk.min() if self.base2 else self.minus_inf  # −inf where a key is hidden
        if low >= EXP2_NORMAL_MIN and shift <= NO_SHIFT_MAX:
            # Every 2^y is a normal float32 and the sums stay far from overflow: the shift
            # would change no weight (2^(y−m) / Σ 2^(y−m) = 2^y / Σ 2^y), so skip its pass.
            np.exp2(blk, out=blk)
        elif low - shift >= EXP2_NORMAL_MIN:  # min(y − m) = min(y) − m: subtraction is monotonic
            np.subtract(blk, shift, out=blk)
            np.exp2(blk, out=blk)  # every 2^y a normal float32: exp2's fast path
        else:
            np.subtract(blk, shift, out=blk)
            if self.base2:  # exp2 is 5–75× slower when a result is subnormal, 0 or of −inf
                np.multiply(blk, self.ln_2, out=blk)
            np.exp(blk, out=blk)
        row_sum = rows @ self.ones  # (rows,): a BLAS gemv, ~4× faster than sum(axis=-1)
        far = row_sum < self.tiny  # max far below the shift, or every key hidden
        if far.any():
            row_sum[far] = 1  # those rows are overwritten below
        np.reciprocal(row_sum, out=row_sum)
        # Each row times its reciprocal sum. (einsum("ij,i->ij") beat this broadcast on a
        # separate output, 38 against 54 µs a 128 K block, but was slower in place.)
        np.multiply(rows, row_sum[:, None], out=rows)
        if far.any():
            self._redo_far_rows(block, src, visible, far.reshape(blk.shape[:2]))

    def _redo_far_rows(
        self, block: Block, src: np.ndarray, visible: np.ndarray | None, far: np.ndarray
    ) -> None:
        """The textbook softmax, row by row, of the rows the block's shift would underflow."""
        h0, h1, r0, r1 = block
        y = src[far] * self.factor  # (n, T_k): a copy
        if visible is not None:
            y[~np.broadcast_to(visible, src.shape)[far]] = self.minus_inf
        exact, dead = softmax_each_row(y)
        self.out[h0:h1, r0:r1][far] = exact
        self.fully[h0:h1, r0:r1][far] = dead

    def _find_bad(self, block: Block, src: np.ndarray, visible: np.ndarray | None) -> None:
        """Record the first row whose visible ``src · factor`` is NaN, +inf or overflowed."""
        y = src * self.factor
        finite = np.isfinite(y) | (np.isneginf(src) & np.isneginf(y))  # −inf scores stay −inf
        if visible is not None:
            finite |= ~np.broadcast_to(visible, src.shape)
        self._record_bad(block, ~finite.all(axis=-1))


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
    threads: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise softmax of ``x * factor`` with hidden entries (``keep`` False) at zero.

    ``x`` is ``(..., T_q, T_k)`` float32 or float64; ``keep`` is boolean and
    broadcastable to it (True = visible). Each cache-sized block of rows is
    scaled, masked, shifted by its max, exponentiated and normalised in ``out``
    before the next block is touched, and big inputs are shared between threads;
    ``out`` may be ``x`` itself. Returns ``(weights, fully_masked_rows)``: ``weights`` has ``x``'s
    shape and dtype; ``fully_masked_rows`` is boolean ``(..., T_q)``, True where
    every key of the row was hidden (that row's weights are all zero, never NaN).

    ``threads=False`` keeps every block in the calling thread, with the same numbers: for
    callers that already share their work among the cores (a task of the shared pool
    that waited on another task of it could wait for ever).
    """
    x = np.ascontiguousarray(as_float_array("x", x))  # int → float64; booleans refused
    if x.size == 0:
        raise ValueError(
            f"x: shape {x.shape} is empty; the softmax needs at least one row with one key."
        )
    if x.ndim < 2:  # one row
        weights, fully = softmax_rows(
            x.reshape(1, -1), factor=factor, keep=keep, out=out, threads=threads
        )
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
    if not threads or WORKERS == 1 or x.size < THREADED_MIN_ELEMENTS or len(blocks) < 2:
        job.run(blocks)
    else:
        # Threads take runs of neighbouring blocks from one shared queue as they
        # come free, so a thread the OS pauses never leaves the others waiting.
        starts = iter(range(0, len(blocks), CHUNK_BLOCKS))

        def take_runs() -> None:
            for start in starts:  # next() on a range iterator is atomic under the GIL
                job.run(blocks[start : start + CHUNK_BLOCKS])

        helpers = [executor().submit(take_runs) for _ in range(WORKERS - 1)]
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
