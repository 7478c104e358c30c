"""A lazy, seekable trace of the loop strategy, one multiply-add per step.

Step ``n`` is decoded from its index (mixed radix over b, h, i, j, d), and its
partial sum is recomputed from the inputs in the same order the loop adds, so
``trace[n]`` costs O(d) and the trace keeps no history: stepping back and
seeking are as cheap as stepping forward.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from attn_explorer.compute.validation import check_pair, to_4d

#: Coarser units of the same trace, from finest to coarsest.
GRANULARITIES = ("multiply-add", "cell", "row", "head")


@dataclass(frozen=True)
class LoopStep:
    """One multiply-add of the loop: ``total += q[i][d] * k[j][d]``."""

    index: int
    batch: int
    head: int
    i: int
    j: int
    d: int
    q_value: float
    k_value: float
    product: float
    partial_sum: float
    cell_complete: bool


#: Up to this many score cells, :meth:`LoopTrace.filled_mask` is a view of one kept
#: template of twice as many bools (16 MB at most); past it, a new array each time.
PREFIX_TEMPLATE_CELLS = 1 << 23


class LoopTrace(Sequence[LoopStep]):
    """Every multiply-add of ``scores_loop`` in execution order, computed on demand."""

    batches: int
    heads: int
    t_q: int
    t_k: int
    d: int

    def __init__(self, query: object, key: object) -> None:
        q, k = check_pair(query, key)
        self.query = to_4d(q)  # (B, H, T_q, d)
        self.key = to_4d(k)  # (B, H, T_k, d)
        self.batches, self.heads, self.t_q, self.d = self.query.shape
        self.t_k = self.key.shape[2]
        self._cells_per_head = self.t_q * self.t_k
        self._prefix: np.ndarray | None = None  # see filled_mask

    # -- sizes ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.batches * self.heads * self._cells_per_head * self.d

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """(B, H, T_q, T_k, d): the loop nest's extents."""
        return (self.batches, self.heads, self.t_q, self.t_k, self.d)

    def unit_size(self, granularity: str) -> int:
        """Multiply-adds in one unit of ``granularity``."""
        sizes = {
            "multiply-add": 1,
            "cell": self.d,
            "row": self.t_k * self.d,
            "head": self._cells_per_head * self.d,
        }
        if granularity not in sizes:
            raise ValueError(
                f"granularity: unknown {granularity!r}; choose one of {', '.join(GRANULARITIES)}."
            )
        return sizes[granularity]

    def unit_count(self, granularity: str) -> int:
        """How many units of ``granularity`` the whole run has."""
        return len(self) // self.unit_size(granularity)

    def unit_end(self, granularity: str, unit: int) -> int:
        """Index of the last multiply-add of unit number ``unit`` (0-based)."""
        return (unit + 1) * self.unit_size(granularity) - 1

    def unit_of(self, granularity: str, index: int) -> int:
        """The unit number that multiply-add ``index`` belongs to."""
        return index // self.unit_size(granularity)

    def index_of_cell(self, batch: int, head: int, i: int, j: int, d: int = 0) -> int:
        """Step index at which the loop multiplies q[i][d]·k[j][d] of (batch, head)."""
        cell = ((batch * self.heads + head) * self.t_q + i) * self.t_k + j
        return cell * self.d + d

    # -- access --------------------------------------------------------------
    def _decode(self, index: int) -> tuple[int, int, int, int, int]:
        cell, d = divmod(index, self.d)
        cell, j = divmod(cell, self.t_k)
        cell, i = divmod(cell, self.t_q)
        b, h = divmod(cell, self.heads)
        return b, h, i, j, d

    def step(self, index: int) -> LoopStep:
        """Step ``index`` (negative counts from the end) in O(d) time."""
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"step {index} is outside the trace of {n} multiply-adds")
        b, h, i, j, d = self._decode(index)
        q_row = self.query[b, h, i].tolist()
        k_row = self.key[b, h, j].tolist()
        total = 0.0
        for e in range(d + 1):  # same order and float arithmetic as the loop strategy
            total += q_row[e] * k_row[e]
        return LoopStep(
            index=index,
            batch=b,
            head=h,
            i=i,
            j=j,
            d=d,
            q_value=q_row[d],
            k_value=k_row[d],
            product=q_row[d] * k_row[d],
            partial_sum=total,
            cell_complete=d == self.d - 1,
        )

    @overload
    def __getitem__(self, index: int) -> LoopStep: ...
    @overload
    def __getitem__(self, index: slice) -> list[LoopStep]: ...
    def __getitem__(self, index: int | slice) -> LoopStep | list[LoopStep]:
        if isinstance(index, slice):
            return [self.step(n) for n in range(*index.indices(len(self)))]
        return self.step(int(index))

    def __iter__(self) -> Iterator[LoopStep]:
        # Forward iteration keeps a running total instead of re-summing each step.
        B, H, T_q, T_k, D = self.shape
        n = 0
        for b in range(B):
            for h in range(H):
                Q = self.query[b, h].tolist()
                K = self.key[b, h].tolist()
                for i in range(T_q):
                    for j in range(T_k):
                        total = 0.0
                        for d in range(D):
                            product = Q[i][d] * K[j][d]
                            total += product
                            yield LoopStep(
                                n, b, h, i, j, d, Q[i][d], K[j][d], product, total, d == D - 1
                            )
                            n += 1

    def filled_mask(self, index: int) -> np.ndarray:
        """Boolean (B, H, T_q, T_k): cells whose dot product is complete after step ``index``.

        ``index = -1`` means nothing has run yet. The cells done are a prefix in loop order,
        so the mask is a window on one read-only template, N True then N False (N cells):
        the ``N`` bools starting at ``N - cells_done``. Each step then costs no new array;
        a fresh one (4 MB at H = 16, T = 512) cost ~5 ms of every step by head, nearly
        all of it the kernel handing out new pages.
        """
        n = self.batches * self.heads * self._cells_per_head
        cells_done = min(max((index + 1) // self.d, 0), n)  # cells completed, in loop order
        if n > PREFIX_TEMPLATE_CELLS:
            flat = np.zeros(n, dtype=bool)
            flat[:cells_done] = True
        else:
            if self._prefix is None:
                self._prefix = np.zeros(2 * n, dtype=bool)
                self._prefix[:n] = True
                self._prefix.flags.writeable = False  # every frame shares it
            flat = self._prefix[n - cells_done : 2 * n - cells_done]
        return flat.reshape(self.batches, self.heads, self.t_q, self.t_k)

    def working(self, index: int) -> str:
        """The partial sum written out, e.g. ``"1·1 + 0·0 = 1"``."""
        s = self.step(index)
        q_row = self.query[s.batch, s.head, s.i].tolist()
        k_row = self.key[s.batch, s.head, s.j].tolist()
        terms = " + ".join(f"{_fmt(q_row[e])}·{_fmt(k_row[e])}" for e in range(s.d + 1))
        return f"{terms} = {_fmt(s.partial_sum)}"


def _fmt(x: float) -> str:
    return f"{x:.6g}" if x != int(x) or abs(x) >= 1e15 else str(int(x))


def loop_trace(query: object, key: object) -> LoopTrace:
    """The lazy, seekable trace of every multiply-add the loop strategy performs."""
    return LoopTrace(query, key)
