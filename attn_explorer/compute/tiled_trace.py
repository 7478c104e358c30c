"""The tiled strategy one key block at a time, for the stepper. Never imports Qt.

:func:`tiled_trace` runs the same recurrence as
:func:`attn_explorer.compute.tiled.attention_tiled` for one (batch, head), in the paper's
form (m moves to the max at every key block, where the strategy lets it lag by up to
``SHIFT_LAG``: the same numbers, up to rounding), and yields a
:class:`TiledStep` after every key block reaches a query block: the running max ``m``,
the normaliser ``ℓ`` and the accumulator ``O`` of that query block's rows, before and
after the block, so a reader sees the old sums shrink by exp(m − m_new) and the new
block's terms arrive. The last step of each query block also gives that block's output
rows, O / ℓ. Steps are numbered from 0; :meth:`TiledTrace.step` seeks to any of them
(it replays the query block's key blocks up to it, at most T / block tiles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute.tiled import (
    DEFAULT_BLOCK,
    check_block,
    first_key_block,
    hidden_in_tile,
)


@dataclass(frozen=True)
class TiledStep:
    """The state of one query block after one key block (rows i0…i1−1, keys j0…j1−1).

    ``m``, ``norm`` are (bq,), ``acc`` (bq, d_v), each ``*_before`` the same before this
    key block; ``rescale`` (bq,) is exp(m_before − m), what the old sums were multiplied
    by; ``weights_tile`` (bq, bk) is exp(score − m) of this block (0 where hidden).
    ``output`` (bq, d_v) is O / ℓ once ``last`` (the query block's final key block), else None.
    """

    index: int
    i0: int
    i1: int
    j0: int
    j1: int
    m_before: np.ndarray
    norm_before: np.ndarray
    acc_before: np.ndarray
    m: np.ndarray
    norm: np.ndarray
    acc: np.ndarray
    rescale: np.ndarray
    weights_tile: np.ndarray
    last: bool
    output: np.ndarray | None


class TiledTrace:
    """Every key-block step of the tiled strategy on one head (see the module docstring).

    ``query`` is (T_q, d), ``key`` (T_k, d) and ``value`` (T_k, d_v): one head's arrays.
    """

    def __init__(
        self,
        query: np.ndarray,
        key: np.ndarray,
        value: np.ndarray,
        factor: float,
        *,
        causal: bool = False,
        block: int = DEFAULT_BLOCK,
        window: int | None = None,
    ) -> None:
        self.query = np.asarray(query)
        self.key = np.asarray(key)
        self.value = np.asarray(value)
        if not (self.query.ndim == self.key.ndim == self.value.ndim == 2):
            raise ValueError("tiled trace: give one head's query, key and value, each (T, d).")
        self.factor = factor
        self.causal = causal
        self.window = window
        self.block = check_block(block)
        t_q, t_k = self.query.shape[0], self.key.shape[0]
        self.offset = t_k - t_q
        #: (i0, j0) of every step, in the order the strategy runs them
        self.tiles: list[tuple[int, int]] = []
        for i0 in range(0, t_q, self.block):
            i1 = min(i0 + self.block, t_q)
            last = min(t_k, i1 + self.offset) if causal else t_k
            first = first_key_block(i0, self.offset, window, self.block)
            starts = list(range(first, max(last, 0), self.block))
            if not starts:  # every key hidden from this block: one empty step still shows it
                starts = [0]
            self.tiles.extend((i0, j0) for j0 in starts)

    def __len__(self) -> int:
        return len(self.tiles)

    def step(self, index: int) -> TiledStep:
        """The state after step ``index`` (0 ≤ index < len(self))."""
        if not 0 <= index < len(self.tiles):
            raise IndexError(f"step {index} is outside 0..{len(self.tiles) - 1}")
        i0 = self.tiles[index][0]
        first = next(n for n, (i, _) in enumerate(self.tiles) if i == i0)
        t_q, t_k = self.query.shape[0], self.key.shape[0]
        i1 = min(i0 + self.block, t_q)
        dtype = self.query.dtype.type
        minus_inf = dtype(-np.inf)
        scale = dtype(self.factor)
        q = self.query[i0:i1]  # (bq, d)
        m = np.full(i1 - i0, minus_inf, dtype=dtype)
        norm = np.zeros(i1 - i0, dtype=dtype)
        acc = np.zeros((i1 - i0, self.value.shape[1]), dtype=dtype)
        with np.errstate(under="ignore"):
            for n in range(first, index + 1):
                j0 = self.tiles[n][1]
                j1 = min(j0 + self.block, t_k)
                m_before, norm_before, acc_before = m, norm, acc
                s = (q @ self.key[j0:j1].T) * scale  # (bq, d) @ (d, bk) -> (bq, bk)
                hidden = hidden_in_tile(i0, i1, j0, j1, self.offset, self.causal, None, self.window)
                if hidden is not None:
                    s = np.where(hidden, minus_inf, s)
                m = np.maximum(m_before, s.max(axis=-1))  # (bq,)
                shift = np.where(m == minus_inf, dtype(0), m)
                p = np.exp(s - shift[:, None])  # (bq, bk)
                rescale = np.exp(m_before - shift)  # (bq,)
                norm = rescale * norm_before + p.sum(axis=-1)
                acc = rescale[:, None] * acc_before + p @ self.value[j0:j1]  # (bq, d_v)
        last = index + 1 == len(self.tiles) or self.tiles[index + 1][0] != i0
        output = acc / np.where(norm > 0, norm, dtype(1))[:, None] if last else None
        return TiledStep(
            index, i0, i1, j0, j1, m_before, norm_before, acc_before, m, norm, acc, rescale, p,
            last, output,
        )  # fmt: skip

    def describe(self, index: int) -> str:
        """The step in words: ``query block 1 of 2 (rows 1–4) · key block 2 of 2 (keys 5–8)``."""
        s = self.step(index)
        t_q, t_k = self.query.shape[0], self.key.shape[0]
        n_q, n_k = math.ceil(t_q / self.block), math.ceil(t_k / self.block)
        return (
            f"query block {s.i0 // self.block + 1} of {n_q} (rows {s.i0 + 1}–{s.i1}) · "
            f"key block {s.j0 // self.block + 1} of {n_k} (keys {s.j0 + 1}–{s.j1})"
            + (" · last for these rows: output = O / ℓ" if s.last else "")
        )


def tiled_trace(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    factor: float,
    *,
    causal: bool = False,
    block: int = DEFAULT_BLOCK,
    window: int | None = None,
) -> TiledTrace:
    """The seekable trace of the tiled strategy on one head (see :class:`TiledTrace`)."""
    return TiledTrace(query, key, value, factor, causal=causal, block=block, window=window)
