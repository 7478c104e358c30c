"""What a long pass folds from each block of weights while it is in memory.

:class:`LongStats` holds, for L layers × H heads, the block previews of the weights and
raw scores (each pixel one block of cells), the sums behind the per-head summaries of
:mod:`attn_explorer.models.summaries` and the head scores of
:mod:`attn_explorer.analysis.head_scores` (only the key positions each definition
reads), and the last query's weights. :func:`~attn_explorer.models.decoder.long_pass.long_attention`
calls :meth:`LongStats.fold` with each block, from every core at once.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attn_explorer.compute.softmax import WORKERS
from attn_explorer.models.decoder.long_pass import (
    PREVIEW_DTYPE,
    LayerKeys,
    hidden_cells,
    preview_block,
    reduce_blocks,
)

#: Index pairs kept for the duplicate / induction scores before they are read densely.
MAX_PAIRS = 1 << 22
#: Longest a core waits at :meth:`LongStats.fold` (or the pass at a layer's end, when
#: paced) while the view holds the pass.
HOLD_S = 0.25


def _open_gate() -> threading.Event:
    gate = threading.Event()
    gate.set()
    return gate


@dataclass
class LongStats:
    """What the long pass folds from every block of weights, for L layers × H heads.

    ``weights_preview`` (L, H, n, n): each block's largest weight; ``scores_preview``
    each block's visible raw score farthest from 0 (−inf where a block has no visible
    key); both PREVIEW_DTYPE (float16: pictures only). The scores' range (``score_low``,
    ``score_high``) is kept exactly. ``entropy``, ``first``, ``previous``, ``cls``, ``sep``,
    ``duplicate``, ``induction`` (L, H) are float64 sums over rows (divided by their row counts in
    :meth:`summaries` and :meth:`head_scores`). ``last_row`` (L, H, T): the last
    query's weights (what a generation's first step shows).
    """

    layers: int
    heads: int
    tokens: int
    input_ids: np.ndarray
    key_tokens: tuple[np.ndarray, np.ndarray]  # the [CLS] and [SEP] key positions
    block: int = field(init=False)
    weights_preview: np.ndarray = field(init=False)
    scores_preview: np.ndarray = field(init=False)
    sums: dict[str, np.ndarray] = field(init=False)
    last_row: np.ndarray = field(init=False)
    score_low: float = math.inf
    score_high: float = -math.inf
    _pairs: dict[str, tuple[np.ndarray, np.ndarray] | None] = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False)
    _defined: dict[str, int] | None = field(init=False, default=None)  # of the ids alone
    _gate: threading.Event = field(init=False, default_factory=_open_gate, repr=False)
    _parked: int = field(init=False, default=0, repr=False)  # cores waiting at the gate
    #: Set by a view that draws each finished layer: the pass waits at each layer's end
    #: until the view has drawn it (see :meth:`rest`).
    paced: bool = field(init=False, default=False)
    #: The query heads' key/value heads (H,) and each layer's kind and the local window,
    #: as the result will have them: the view's grid shows its bands from the first draw.
    kv_heads: np.ndarray | None = field(init=False, default=None)
    layer_kinds: tuple[str, ...] = field(init=False, default=())
    window: int = field(init=False, default=0)
    _resting: bool = field(init=False, default=False, repr=False)  # waiting at a layer's end

    def __post_init__(self) -> None:
        self.block = preview_block(self.tokens)
        n = -(-self.tokens // self.block)
        shape = (self.layers, self.heads, n, n)
        self.weights_preview = np.zeros(shape, dtype=PREVIEW_DTYPE)
        self.scores_preview = np.full(shape, -np.inf, dtype=PREVIEW_DTYPE)
        names = ("entropy", "first", "previous", "cls", "sep", "duplicate", "induction")
        self.sums = {name: np.zeros((self.layers, self.heads)) for name in names}
        self.last_row = np.zeros((self.layers, self.heads, self.tokens), dtype=np.float32)
        self._pairs = {
            "duplicate": _pairs(self.input_ids, 0),
            "induction": _pairs(self.input_ids, 1),
        }

    def hold(self) -> None:
        """The view is drawing: each core waits at its next :meth:`fold` until
        :meth:`release` (at most HOLD_S), so the GUI thread has the interpreter to itself.

        The fold is the pass's Python-heavy part; while two cores ran it, the GUI thread
        waited for the GIL at every step and a grid redraw of ~2 ms took 25–47 ms.
        """
        self._gate.clear()

    @property
    def parked(self) -> int:
        """How many cores wait at the gate now (see :meth:`hold`)."""
        return self._parked

    @property
    def quiet(self) -> bool:
        """True when no core computes the pass: each waits at a fold, or the pass rests at
        a layer's end (:meth:`rest`). A view draws uncontended then."""
        return self._resting or self._parked >= WORKERS

    def pause(self) -> None:
        """A layer has ended (before its progress is reported): when :attr:`paced`, hold
        the pass, so that :meth:`rest` waits for the view's redraw of that layer."""
        if self.paced:
            self._gate.clear()

    def rest(self) -> None:
        """When :attr:`paced`, wait at the layer's end until the view releases the pass
        (at most HOLD_S). Each layer's redraw then runs while no core computes: mid-layer
        even the BLAS of the projections slowed a 15-ms redraw and paint to 60-100 ms."""
        if self.paced and not self._gate.is_set():
            self._resting = True
            try:
                if not self._gate.wait(HOLD_S):  # nobody drew it: the next folds need not wait
                    self._gate.set()
            finally:
                self._resting = False

    def release(self) -> None:
        """The cores go on (see :meth:`hold`)."""
        self._gate.set()

    def fold(
        self, layer: int, i0: int, raw: np.ndarray, weights: np.ndarray, keys: LayerKeys
    ) -> None:
        """Fold one block: ``raw`` scores and ``weights`` (H, bq, i1) of rows i0 … i1 − 1.

        ``raw`` is overwritten (its hidden cells become ±inf for the score preview).
        """
        if not self._gate.is_set():  # the view is drawing (hold): wait until it is done
            with self._lock:
                self._parked += 1
            self._gate.wait(HOLD_S)
            with self._lock:
                self._parked -= 1
        bq, i1 = raw.shape[-2:]
        r, n0 = self.block, i0 // self.block
        n1, c1 = n0 + -(-bq // r), -(-i1 // r)
        self.weights_preview[layer, :, n0:n1, :c1] = reduce_blocks(weights, r, np.maximum)
        adds: dict[str, np.ndarray] = {}  # this block's share of each (H,) sum
        rows = np.arange(bq)
        top = weights.max(axis=-1)  # (H, bq): exp(0) / ℓ, so −ln of it is ln ℓ
        # Σ_j w·raw per row, as (1, i1) @ (i1, 1) products: BLAS, 10× an einsum into float64
        mixed = np.matmul(weights[:, :, None, :], raw[:, :, :, None])[..., 0, 0].astype(np.float64)
        first, hidden = hidden_cells(i0, i1, keys.window)
        np.copyto(raw[..., first:], np.float32(-np.inf), where=hidden)
        high = reduce_blocks(raw, r, np.maximum)
        row_max = raw.max(axis=-1).astype(np.float64)  # (H, bq): the largest visible raw score
        if keys.cap:  # ln w = capped − m − ln ℓ: the entropy of the capped scores, directly
            safe = np.where(weights > 0, weights, np.float32(1))
            entropy = -(weights * np.log(safe)).sum(axis=-1, dtype=np.float64)
        else:  # −Σ w ln w = m − Σ w·s + ln ℓ, s = raw · scale
            entropy = keys.scale * (row_max - mixed) - np.log(top.astype(np.float64))
        adds["entropy"] = entropy.sum(axis=-1)
        np.copyto(raw[..., first:], np.float32(np.inf), where=hidden)
        low = reduce_blocks(raw, r, np.minimum)
        with np.errstate(invalid="ignore"):  # a block of hidden keys: −inf (its top), kept
            far = np.where(low + high < 0, low, high)
        self.scores_preview[layer, :, n0:n1, :c1] = far
        finite = np.isfinite(high)
        extremes = (float(low[finite].min()), float(high[finite].max())) if finite.any() else None
        adds["first"] = weights[..., 0].sum(axis=-1)
        if i0 == 0:
            rows = rows[1:]
        adds["previous"] = weights[:, rows, rows + i0 - 1].sum(axis=-1)
        for name, where in zip(("cls", "sep"), self.key_tokens, strict=True):
            seen = where[where < i1]
            adds[name] = weights[..., seen].sum(axis=(-1, -2), dtype=np.float64)
        for name in ("duplicate", "induction"):
            adds[name] = self._pattern_mass(name, i0, weights)
        if i0 + bq == self.tokens:
            self.last_row[layer, :, :i1] = weights[:, -1]
        with self._lock:  # blocks of one layer are folded by every core at once
            for name, add in adds.items():
                self.sums[name][layer] += add
            if extremes is not None:
                self.score_low = min(self.score_low, extremes[0])
                self.score_high = max(self.score_high, extremes[1])

    def _pattern_mass(self, name: str, i0: int, weights: np.ndarray) -> np.ndarray:
        """(H,) Σ of weights over the (i, j) pairs of a pattern whose row is in this block."""
        bq, i1 = weights.shape[-2:]
        pairs = self._pairs[name]
        if pairs is not None:
            rows, cols = pairs
            a, b = np.searchsorted(rows, [i0, i0 + bq])
            picked = weights[:, rows[a:b] - i0, cols[a:b]]  # (H, pairs in this block)
            mass: np.ndarray = picked.sum(axis=-1, dtype=np.float64)
            return mass
        mask = _pattern_rows(self.input_ids, i0, i0 + bq, 1 if name == "induction" else 0)
        dense: np.ndarray = np.einsum("hij,ij->h", weights, mask[:, :i1], dtype=np.float64)
        return dense

    @staticmethod
    def feed_forward(
        h: np.ndarray, w: Any, activation: Callable[[np.ndarray], np.ndarray], blocks: bool
    ) -> np.ndarray:
        """A decoder layer's feed-forward of (T, hidden) rows, (T, ff) -> (T, hidden): with
        ``blocks`` (a long pass: thousands of rows) by row blocks (``feed_forward_rows``), the
        same numbers as one product of all rows with temporaries under 32 MB each. ``w`` is
        the layer's weights (its ``gate``, ``up`` and ``down``)."""
        if not blocks:
            whole: np.ndarray = (activation(h @ w.gate.T) * (h @ w.up.T)) @ w.down.T  # (T, hidden)
            return whole
        from attn_explorer.models.decoder.long_pass import feed_forward_rows

        return feed_forward_rows(h, w.gate, w.up, w.down, activation)

    def means(self) -> dict[str, np.ndarray]:
        """(L, H) means over rows, as models.summaries and analysis.head_scores define them."""
        t, ids = self.tokens, self.input_ids
        if self._defined is None:  # rows with a pattern: counted once (0.1 s at 8 192 tokens)
            self._defined = {
                name: sum(
                    int(_pattern_rows(ids, i0, min(i0 + 512, t), shift).any(axis=1).sum())
                    for i0 in range(0, t, 512)
                )
                for name, shift in (("duplicate", 0), ("induction", 1))
            }
        defined = self._defined
        means = {
            "entropy": self.sums["entropy"] / t,
            "cls": self.sums["cls"] / t,
            "sep": self.sums["sep"] / t,
            "first": self.sums["first"] / t,
            "previous": self.sums["previous"] / (t - 1)
            if t > 1
            else np.zeros_like(self.sums["first"]),
        }
        for name, count in defined.items():
            means[name] = (
                self.sums[name] / count if count else np.full_like(self.sums[name], np.nan)
            )
        return means


def _pattern_rows(ids: np.ndarray, i0: int, i1: int, shift: int) -> np.ndarray:
    """(i1 − i0, T) boolean: shift 0 the duplicate set D_i, shift 1 the induction set S_i."""
    same = ids[i0:i1, None] == ids[None, :]  # (rows, T)
    t = ids.size
    earlier: np.ndarray = same & (np.arange(t)[None, :] < np.arange(i0, i1)[:, None])
    if not shift:
        return earlier
    mask: np.ndarray = np.zeros_like(earlier)
    mask[:, 1:] = earlier[:, :-1]  # key j + 1 after an earlier copy j of token i
    mask &= np.arange(t)[None, :] < np.arange(i0, i1)[:, None]
    return mask


def _pairs(ids: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The (row, key) pairs of a pattern sorted by row, or None when there are over MAX_PAIRS."""
    order = np.argsort(ids, kind="stable")
    _, starts, counts = np.unique(ids[order], return_index=True, return_counts=True)
    if int((counts.astype(np.int64) ** 2).sum()) // 2 > MAX_PAIRS:
        return None
    rows_list, cols_list = [], []
    for start, count in zip(starts, counts, strict=True):
        if count < 2:
            continue
        where = np.sort(order[start : start + count])  # positions of one id, ascending
        i, j = np.triu_indices(count, k=1)  # j-th earlier, i-th later: (where[i], where[j])
        rows_list.append(where[j])
        cols_list.append(where[i])
    if not rows_list:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows, cols = np.concatenate(rows_list), np.concatenate(cols_list)  # later i, earlier j
    if shift:  # induction: key j + 1, and only where j + 1 < i
        cols = cols + 1
        ok = cols < rows
        rows, cols = rows[ok], cols[ok]
    order = np.argsort(rows, kind="stable")
    return rows[order], cols[order]
