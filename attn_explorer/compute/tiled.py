"""The fourth strategy: exact attention in tiles, with an online softmax.

FlashAttention's Algorithm 1 (Dao et al., 2022) in numpy. The queries are cut into
blocks of ``block`` rows and the keys into blocks of ``block`` columns. Each query
block keeps three running quantities per row while the key blocks arrive one by one:

* ``m``  — the largest scaled score seen so far (the softmax's shift);
* ``ℓ``  — the normaliser, Σ exp(score − m) over the keys seen so far;
* ``O``  — the accumulator, Σ exp(score − m) · value over the keys seen so far.

When a key block raises a row's max from ``m`` to ``m_new``, everything summed so far
was shifted by the old max, so ``ℓ`` and ``O`` are multiplied by exp(m − m_new) before
the block's own terms are added. After the last block, ``O / ℓ`` is exactly
softmax(scores) @ V: the same numbers as the other strategies, up to rounding, but
no (T_q × T_k) array is ever held — only one (block × block) tile per head.

Three rearrangements keep numpy's work close to the two products, the exp and the row
max each tile needs (bench/tiled.py, table 5), without changing the numbers beyond rounding:

* **The shift rides in the product.** With q̃ = [q · scale, −m] and K̃ = [K, 1], the
  product K̃ q̃ᵀ is already score − m: no pass over the tile subtracts it.
* **m moves only when it must.** While no row's max rises more than ``SHIFT_LAG`` past
  its m, each exp(score − m) stays below e^SHIFT_LAG, so nothing overflows and the old
  sums need no rescale; when one does (and at a query block's first key block), the
  paper's step above runs. The true max is kept beside m and ℓ is brought to it at the
  end, ℓ = norm · exp(m − max). Flash Attention 4 rescales as seldom (Modal, "We
  reverse-engineered Flash Attention 4", 2025).
* **Tiles are held transposed**, keys down and queries across: each query's max is a max
  down the columns, which numpy takes about 3× faster than along rows (71 against 227 µs
  for 16 heads' 128 × 128 tiles), and the sums and the product with V read them as they lie.

The text between the ``# [strategy tiled]`` markers is shown in the app's code panel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from attn_explorer.compute.softmax import WORKERS, executor
from attn_explorer.compute.validation import STAGES

if TYPE_CHECKING:  # imported when first used: ~5 ms of the window's start-up otherwise
    from threadpoolctl import ThreadpoolController

#: Query rows and key columns of one tile, unless told otherwise. At d = 64 a tile of
#: 16 heads is 16 · 128 · 128 · 4 B = 1 MB, and T = 4096 takes 32² Python turns, not 64².
#: bench/tiled.py's block sweep (H16 T2048, causal, on a loaded 2-core machine) had 64
#: fastest and 128 within 1.2× of it, 32 at 2.2×: small blocks pay Python per tile.
DEFAULT_BLOCK = 128

#: Smallest and largest block sizes the window offers and the API accepts.
MIN_BLOCK, MAX_BLOCK = 1, 4096

#: Score cells (B·H·T_q·T_k) up to which a tiled result derives the stages it never
#: held (scores, weights) when a view asks for them: the explorer's own score limit.
SHOW_CELLS = 256 * 1024 * 1024

#: Score cells (B·H·T_q·T_k) from which the query blocks are shared among the cores:
#: below, handing work over costs more than it saves.
THREADED_CELLS = 1 << 20

#: How far (in e-folds of the scaled score) a row's max may rise past the shift m its
#: exponentials use before m is moved up to it. Each term is then at most
#: e^SHIFT_LAG ≈ 3000, so a row of 2^24 keys sums below 2^36, far from float32's 2^128,
#: and since m never exceeds the max, no term is smaller than with the exact shift. Moving
#: m costs passes over the tile and the rescale of the sums; on random scores it is never
#: needed after a query block's first key block.
SHIFT_LAG = 8.0

_controller: ThreadpoolController | None = None
_controller_lock = threading.Lock()


def check_block(block: object) -> int:
    """``block`` as an int from MIN_BLOCK to MAX_BLOCK; ValueError otherwise."""
    if (
        isinstance(block, bool | np.bool_)
        or not isinstance(block, int | np.integer)
        or not MIN_BLOCK <= block <= MAX_BLOCK
    ):
        raise ValueError(
            f"block: expected a whole number of rows from {MIN_BLOCK} to {MAX_BLOCK}, "
            f"got {block!r}."
        )
    return int(block)


def hidden_in_tile(
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    offset: int,
    causal: bool,
    keep: np.ndarray | None,
    window: int | None = None,
) -> np.ndarray | None:
    """Boolean tile (…, i1 − i0, j1 − j0), True where a key is hidden; None if none is.

    Causal hides key j from query i when j > i + offset (offset = T_k − T_q: aligned at
    the last query); a sliding ``window`` w (causal only) also hides j ≤ i + offset − w;
    ``keep`` (broadcast to the whole grid, True = visible) hides more.
    """
    hidden = None
    right = causal and j1 - 1 > i0 + offset  # some key of the tile lies right of the diagonal
    left = window is not None and j0 <= i1 - 1 + offset - window  # some key left of the band
    if right or left:
        rows = np.arange(i0, i1)[:, None] + offset  # (bq, 1)
        keys = np.arange(j0, j1)[None, :]  # (1, bk)
        hidden = keys > rows  # (bq, bk)
        if window is not None:
            hidden |= keys <= rows - window
    if keep is not None:
        user = ~keep[..., i0:i1, j0:j1]  # a view of the broadcast mask, then one tile
        hidden = user if hidden is None else (hidden | user)
    return hidden


def band_bias(
    i0: int, i1: int, j0: int, j1: int, offset: int, causal: bool, window: int | None, dtype: type
) -> np.ndarray | None:
    """The causal (and window) mask of one tile as a bias to add, keys down: (j1 − j0, i1 − i0),
    0 where key j is visible to query i, −inf where it is hidden; None if no key is hidden.

    Tiles of one shape on the same diagonal share one read-only array, made once: adding
    it took a third of the time of a boolean ``np.copyto(..., where=)`` (33 against 96 µs
    on 16 heads' 128 × 128 tiles), and all the diagonal tiles of a causal grid are alike.
    """
    return _band_bias(i1 - i0, j1 - j0, i0 + offset - j0, causal, window, np.dtype(dtype).str)


@lru_cache(maxsize=64)
def _band_bias(
    rows: int, keys: int, diagonal: int, causal: bool, window: int | None, dtype: str
) -> np.ndarray | None:
    # the tile seen from its own corner: query 0 sits ``diagonal`` keys right of key 0
    hidden = hidden_in_tile(0, rows, 0, keys, diagonal, causal, None, window)  # (bq, bk)
    if hidden is None:
        return None
    bias = np.where(hidden.T, -np.inf, 0.0).astype(dtype)  # (bk, bq)
    bias.flags.writeable = False  # shared by every call and core
    return bias


def first_key_block(i0: int, offset: int, window: int | None, block: int) -> int:
    """The first key block a query block from row ``i0`` needs: 0, or with a sliding
    ``window`` w the block holding key i0 + offset − w + 1, the first its top row sees."""
    if window is None:
        return 0
    return max(0, i0 + offset - window + 1) // block * block


def on_every_core(work: Callable[[], None], blocks: int, cells: int) -> None:
    """Run ``work`` on every core at once when the grid is big, else once, here.

    Each call of ``work`` takes query blocks from one shared iterator until none is
    left; numpy lets go of the GIL inside matmul and exp, so the cores really share the
    blocks. Meanwhile BLAS runs one thread per call: its own pool on top of ours turned
    the small tile products into a fight for the 2 cores (the tiled strategy took 3.6×
    as long as with one BLAS thread, H16 T2048 d64).
    """
    if blocks < 2 or cells < THREADED_CELLS or WORKERS == 1:
        work()
        return
    with _blas().limit(limits=1, user_api="blas"):
        helpers = [executor().submit(work) for _ in range(min(WORKERS, blocks) - 1)]
        work()
        for helper in helpers:
            helper.result()  # an error in a helper thread is raised here


def _blas() -> ThreadpoolController:
    global _controller
    with _controller_lock:
        if _controller is None:  # it reads every loaded library once (~1 ms)
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        return _controller


def attention_tiled(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    factor: float,
    *,
    causal: bool = False,
    keep: np.ndarray | None = None,
    block: int = DEFAULT_BLOCK,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """softmax(Q Kᵀ · factor, hidden keys −inf) @ V, one (block × block) tile at a time.

    ``query`` is (B, H, T_q, d); ``key`` (B, H_kv, T_k, d) and ``value`` (B, H_kv, T_k, d_v)
    may have fewer heads (grouped-query attention: H a multiple of H_kv, query head h
    reads key/value head h // (H / H_kv)). ``keep``, if given, is boolean and
    broadcastable to (B, H, T_q, T_k), True = visible. A sliding ``window`` w (with
    ``causal``) lets query i see keys i − w + 1 … i only: key blocks left of the band are
    skipped as the causal mask skips those right of the diagonal. Returns ``(output, row_max,
    row_sum)``: the output (B, H, T_q, d_v) and, per query row (B, H, T_q), the max m of
    its scaled visible scores and the normaliser ℓ = Σ_j exp(score_j − m). A row with no
    visible key has m = −inf, ℓ = 0 and an output of zeros.
    """
    B, H, T_q, d = query.shape
    H_kv, T_k, d_v = key.shape[1], key.shape[2], value.shape[-1]
    G = H // H_kv  # query heads per key/value head
    dtype = query.dtype.type
    scale = dtype(factor)  # a float64 factor would upcast every float32 tile
    minus_inf, lag = dtype(-np.inf), dtype(SHIFT_LAG)
    offset = T_k - T_q
    if keep is not None:
        keep = np.broadcast_to(keep, (B, H, T_q, T_k)).reshape(B, H_kv, G, T_q, T_k)  # a view
    Q = query.reshape(B, H_kv, G, T_q, d)  # the G query heads sharing a key head side by side
    # K̃ = [K, 1]: with q̃ = [q · scale, −shift], one product K̃ q̃ᵀ gives the scaled scores
    # minus each query's shift, so no pass over the tile subtracts it.
    K_ones = np.empty((B, H_kv, 1, T_k, d + 1), dtype=query.dtype)  # broadcast over the group
    K_ones[:, :, 0, :, :d] = key
    K_ones[:, :, 0, :, d] = 1
    V = value[:, :, None]  # (B, H_kv, 1, T_k, d_v)
    V_t = np.swapaxes(V, -1, -2)  # (B, H_kv, 1, d_v, T_k): a view, BLAS reads it transposed
    ones = np.ones(min(block, T_k), dtype=query.dtype)  # (bk,): sums over keys as one product
    output = np.empty((B, H_kv, G, T_q, d_v), dtype=query.dtype)
    row_max = np.empty((B, H_kv, G, T_q), dtype=query.dtype)
    row_sum = np.empty((B, H_kv, G, T_q), dtype=query.dtype)
    starts = range(0, T_q, block)
    # causal: the longest query blocks (the last rows see every key) first, so the cores
    # finish together
    next_blocks = iter(reversed(starts) if causal else starts)  # shared by the cores

    def work() -> None:
        # [strategy tiled]
        # Tiles are held transposed, keys down and queries across (s_t = sᵀ): each query's
        # max is then a max down the columns, which numpy takes 3× faster than along rows.
        # This core's q̃ᵀ, Oᵀ, tile and product, written again by each block (out=): fresh
        # ones are faulted in page by page after glibc hands freed ones back, and two cores
        # faulting at once wait on each other (tiled/floor, causal T2048: 1.17 -> 1.04).
        q_buffer = np.empty((B, H_kv, G, d + 1, block), dtype=dtype)
        acc_buffer = np.empty((B, H_kv, G, d_v, block), dtype=dtype)
        tile_buffer = np.empty((B, H_kv, G, min(block, T_k), block), dtype=dtype)
        product_buffer = np.empty((B, H_kv, G, d_v, block), dtype=dtype)
        for i0 in next_blocks:  # one block of query rows at a time, on whichever core is free
            i1 = min(i0 + block, T_q)
            rows = (B, H_kv, G, i1 - i0)
            q_t = q_buffer[..., : i1 - i0]  # (…, d+1, bq): q̃ᵀ, scaled once
            np.multiply(np.swapaxes(Q[..., i0:i1, :], -1, -2), scale, out=q_t[..., :d, :])
            q_t[..., d, :] = 0  # −shift: no shift yet
            m = np.full(rows, minus_inf, dtype=dtype)  # (B, H_kv, G, bq): running max, lazily
            shift = np.zeros(rows, dtype=dtype)  # (…, bq): m, or 0 while m is −inf
            top = np.full(rows, minus_inf, dtype=dtype)  # (…, bq): the true max so far, ≥ m
            norm = np.zeros(rows, dtype=dtype)  # (…, bq): running normaliser Σ exp(score − m)
            acc_t = acc_buffer[..., : i1 - i0]  # (…, d_v, bq): accumulator Oᵀ
            acc_t.fill(0)
            acc = np.swapaxes(acc_t, -1, -2)  # (…, bq, d_v): O itself, a view of Oᵀ
            last = min(T_k, i1 + offset) if causal else T_k  # causal: no key right of row i1-1
            first = first_key_block(i0, offset, window, block)  # window: none left of the band
            for j0 in range(first, last, block):  # the key blocks arrive one by one
                j1 = min(j0 + block, T_k)
                s_t = tile_buffer[..., : j1 - j0, : i1 - i0]  # (…, 1, bk, d+1) @ (…, d+1, bq) ↓
                np.matmul(K_ones[..., j0:j1, :], q_t, out=s_t)  # -> (…, bk, bq)
                bias = band_bias(i0, i1, j0, j1, offset, causal, window, dtype)  # (bk, bq)
                if bias is not None:  # keys hidden by the causal mask or window: −inf, weight 0
                    s_t += bias
                if keep is not None:  # and those the user's mask hides
                    hidden = ~np.swapaxes(keep[..., i0:i1, j0:j1], -1, -2)  # (…, bk, bq)
                    np.copyto(s_t, minus_inf, where=hidden)
                np.maximum(top, s_t.max(axis=-2) + shift, out=top)  # (…, bq)
                if j0 == first:  # the first key block sets m to its max: no old sums to rescale
                    m = top.copy()
                    shift = np.where(m == minus_inf, dtype(0), m)  # no key seen yet: 0
                    s_t -= shift[..., None, :]
                    q_t[..., d, :] = -shift  # the next blocks' scores come shifted by m
                elif (top > m + lag).any():  # a max rose SHIFT_LAG past m, or met its first key
                    # The paper's step, on views the paper's way round: move m to the max, and
                    # shrink the old sums to match.
                    s = np.swapaxes(s_t, -1, -2)  # (…, bq, bk)
                    s += shift[..., None]  # the scaled scores themselves
                    m_new = np.maximum(m, s.max(axis=-1))  # (…, bq): the max so far, this block too
                    shift = np.where(m_new == minus_inf, dtype(0), m_new)  # no key seen yet: 0
                    s -= shift[..., None]
                    p = np.exp(s, out=s)  # (…, bq, bk): this block's terms exp(score − m_new)
                    rescale = np.exp(m - shift)  # (…, bq): exp(m − m_new), what old sums shrink by
                    norm = rescale * norm + p.sum(axis=-1)  # (…, bq)
                    acc *= rescale[..., None]
                    acc += p @ V[..., j0:j1, :]  # (…, bq, bk) @ (…, 1, bk, d_v) -> (…, bq, d_v)
                    m = m_new
                    q_t[..., d, :] = -shift
                    continue
                # m is within SHIFT_LAG of every row's max: the sums go on at the same shift
                p_t = np.exp(s_t, out=s_t)  # (…, bk, bq): this block's terms exp(score − m)
                norm += ones[: j1 - j0] @ p_t  # (bk,) @ (…, bk, bq) -> (…, bq): Σ over keys
                product = product_buffer[..., : i1 - i0]  # (…, 1, d_v, bk) @ (…, bk, bq) ↓
                acc_t += np.matmul(V_t[..., j0:j1], p_t, out=product)  # -> (…, d_v, bq)
            seen = norm > 0  # (…, bq): False where every key was hidden
            denominator = np.where(seen, norm, dtype(1))[..., None]  # unseen: O is 0, so is O / 1
            np.divide(acc, denominator, out=output[..., i0:i1, :])  # O / ℓ: (…, bq, d_v)
            # m may lag the true max: ℓ = Σ exp(score − top) = norm · exp(m − top)
            row_max[..., i0:i1] = top
            row_sum[..., i0:i1] = norm * np.exp(np.where(seen, shift - top, dtype(0)))
        # [end]

    with np.errstate(under="ignore"):  # exp of a far-below-max score is 0, as in softmax
        on_every_core(work, len(starts), B * H * T_q * T_k)
    return (
        output.reshape(B, H, T_q, d_v),
        row_max.reshape(B, H, T_q),
        row_sum.reshape(B, H, T_q),
    )


def scores_tiled(
    query: np.ndarray, key: np.ndarray, out: np.ndarray | None = None, block: int = DEFAULT_BLOCK
) -> np.ndarray:
    """The score grid assembled from the tiles the tiled strategy computes, one at a time.

    The tiled strategy itself never keeps this grid; the window shows it (and the
    agreement check compares it) only where it is small enough to hold.
    """
    B, H, T_q, _ = query.shape
    T_k = key.shape[2]
    scores = np.empty((B, H, T_q, T_k), dtype=query.dtype) if out is None else out
    for i0 in range(0, T_q, block):
        for j0 in range(0, T_k, block):
            q = query[:, :, i0 : i0 + block]  # (B, H, bq, d)
            k_t = np.swapaxes(key[:, :, j0 : j0 + block], -1, -2)  # (B, H, d, bk)
            np.matmul(q, k_t, out=scores[:, :, i0 : i0 + block, j0 : j0 + block])  # (B,H,bq,bk)
    return scores


@dataclass(frozen=True)
class TiledResult:
    """What the tiled strategy computes: the output, and each query row's max and normaliser.

    No (T_q × T_k) stage is stored: ``scores``, ``scaled``, ``masked`` and ``weights``
    are derived on first access from the query and key (the weights from the kept
    row max and normaliser, w = exp(score · scale − m) / ℓ), and only while the grid
    has at most :data:`SHOW_CELLS` cells (:attr:`stages_shown`); past that they raise
    ValueError. ``row_max`` and ``row_sum`` are shaped like the scores without the key
    axis, in the scaled units the softmax sees.
    """

    output: np.ndarray
    row_max: np.ndarray
    row_sum: np.ndarray
    scale: float
    keep: np.ndarray | None
    fully_masked_rows: np.ndarray
    block: int
    query: np.ndarray = field(repr=False)
    key: np.ndarray = field(repr=False)
    strategy: str = "tiled"

    @property
    def grid_cells(self) -> int:
        """Cells of the score grid this result never built (B·H·T_q·T_k)."""
        return int(self.row_max.size) * int(self.key.shape[-2])

    @property
    def stages_shown(self) -> bool:
        """True if the grid stages may be derived for display (at most SHOW_CELLS cells)."""
        return self.grid_cells <= SHOW_CELLS

    def _check_shown(self, name: str) -> None:
        if not self.stages_shown:
            raise ValueError(
                f"{name}: the tiled strategy never builds the {self.grid_cells:,}-cell grid, "
                f"and it is too big to derive for display (over {SHOW_CELLS:,} cells); "
                "read output, row_max and row_sum instead."
            )

    @cached_property
    def scores(self) -> np.ndarray:
        self._check_shown("scores")
        q = self.query.reshape((1,) * (4 - self.query.ndim) + self.query.shape)
        k = self.key.reshape((1,) * (4 - self.key.ndim) + self.key.shape)
        if k.shape[1] != q.shape[1]:  # grouped-query: each query head reads its key head
            k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)  # (B, H, T_k, d)
        grid = scores_tiled(q, k, block=self.block)  # (B, H, T_q, T_k)
        return grid.reshape(*self.row_max.shape, k.shape[-2])

    @cached_property
    def scaled(self) -> np.ndarray:
        result: np.ndarray = self.scores * self.scores.dtype.type(self.scale)
        return result

    @cached_property
    def masked(self) -> np.ndarray:
        if self.keep is None:
            return self.scaled
        return np.where(self.keep, self.scaled, self.scores.dtype.type(-np.inf))

    @cached_property
    def weights(self) -> np.ndarray:
        """exp(masked − m) / ℓ with the kept m and ℓ: wrong m or ℓ would show here."""
        dtype = self.scores.dtype.type
        shift = np.where(self.fully_masked_rows, dtype(0), self.row_max)[..., None]
        total = np.where(self.fully_masked_rows, dtype(1), self.row_sum)[..., None]
        with np.errstate(under="ignore"):
            answer: np.ndarray = np.exp(self.masked - shift) / total  # hidden: exp(−inf) = 0
            return answer

    def stage(self, name: str) -> np.ndarray | None:
        """The array of a pipeline stage by name (see ``STAGES``), derived if it is a grid."""
        if name not in STAGES:
            raise ValueError(f"stage: unknown stage {name!r}; choose one of {', '.join(STAGES)}.")
        answer: np.ndarray | None = getattr(self, name)
        return answer

    @property
    def nbytes_held(self) -> int:
        """Bytes of what the strategy keeps: output, row max and normaliser (no grid)."""
        return int(self.output.nbytes + self.row_max.nbytes + self.row_sum.nbytes)
