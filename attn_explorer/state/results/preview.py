"""What a heatmap thumbnail shows of a big stage: blocks of cells, one value per pixel.

Qt-free. A screen cannot show more pixels than it has: sixteen heads of 2048 × 2048
cells in a 1000-pixel dock get about 200 pixels each. :func:`make_preview` reduces
each head to at most :data:`MAX_PIXELS` values per axis, block by block, *before*
anything is coloured, and keeps every block's largest and smallest value, so
nothing is dropped: a block shows its largest value on a sequential map (a single
strong weight stays visible) and its value farthest from 0 on a diverging one. It
also keeps each head's exact extremes, so the colour scale is the one an export of
the full values gets. The enlarged head and the exports use the full values.

A big result's preview is made in the worker with the result
(:class:`~attn_explorer.state.results.results.Results` owns it), so the GUI thread only
colours about 256 × 256 values a head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Most values per axis a thumbnail head is drawn with; larger heads are reduced in blocks.
MAX_PIXELS = 256
#: Bytes of values reduced at a time: within the shared L3 cache, so the largest and the
#: smallest of a chunk are both taken while it is there (memory is read once), and big
#: enough that a worker making a preview makes few, long numpy calls: between calls it
#: holds the GIL, which the GUI thread then waits for on every Qt call (512 KB chunks,
#: ~18k calls for 16 × 2048², made a 16-head relayout take 580 ms instead of 140).
CHUNK_BYTES = 8 * 1024 * 1024


def block_size(cells: int, limit: int = MAX_PIXELS) -> int:
    """Cells per block along an axis of ``cells`` so at most ``limit`` blocks remain."""
    return max(1, math.ceil(cells / limit))


def _reduce(values: np.ndarray, rows: int, cols: int, combine: np.ufunc) -> np.ndarray:
    """``combine`` (np.maximum, np.minimum, np.logical_and) over blocks of rows × cols cells.

    ``values`` is (…, T_q, T_k); the last block along an axis may be short. Row by row
    and then column by column over strided views: each pass is one vectorised ufunc
    call, several times faster than a reduction over a reshaped small axis.
    """
    out = values[..., ::rows, :].copy()  # (…, n_q, T_k): the first row of each block
    for a in range(1, rows):
        part = values[..., a::rows, :]
        n = part.shape[-2]
        combine(out[..., :n, :], part, out=out[..., :n, :])
    result = out[..., ::cols].copy()  # (…, n_q, n_k)
    for b in range(1, cols):
        part = out[..., b::cols]
        n = part.shape[-1]
        combine(result[..., :n], part, out=result[..., :n])
    return result


def block_all(mask: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """True for a block of ``mask`` (…, T_q, T_k) only where all its cells are True."""
    if rows == cols == 1:
        return mask
    return _reduce(mask, rows, cols, np.logical_and)


@dataclass(frozen=True)
class Preview:
    """One stage's heads reduced for thumbnails (see the module docstring).

    ``highest[h]`` is head h's (n_q, n_k) blocks' largest values (−inf where every
    cell is masked); ``farthest[h]`` each block's value farthest from 0 (its largest
    or its smallest visible one). ``low`` and ``high`` are (H,): each head's smallest
    and largest finite value, (+inf, −inf) when it has none. ``rows`` × ``cols``
    cells make one block; 1 × 1 means the preview holds the values themselves.

    One array per head, so a preview with a few heads recomputed shares the others'
    arrays with the one before (nothing is copied, and a view can tell which heads
    are new by identity).
    """

    highest: tuple[np.ndarray, ...]
    farthest: tuple[np.ndarray, ...]
    low: np.ndarray
    high: np.ndarray
    rows: int
    cols: int

    @property
    def reduced(self) -> bool:
        return self.rows > 1 or self.cols > 1

    def shown(self, diverging: bool) -> tuple[np.ndarray, ...]:
        """Per head, the value each block is coloured by: its largest, or its farthest from 0."""
        return self.farthest if diverging else self.highest

    def extremes(self, heads: list[int] | None = None) -> tuple[float, float]:
        """The smallest and largest finite value over ``heads`` (all when None)."""
        low = self.low if heads is None else self.low[heads]
        high = self.high if heads is None else self.high[heads]
        return float(np.min(low, initial=np.inf)), float(np.max(high, initial=-np.inf))

    def folded(self, rows: int, cols: int, reuse: tuple[Preview, Preview] | None = None) -> Preview:
        """Blocks of ``rows`` × ``cols`` of this preview's blocks: what fits a smaller view.

        The largest of the largest values is the largest, and the farthest from 0 of
        the farthest is the farthest, so folding a preview equals reducing the values
        in the bigger blocks. ``reuse`` is an earlier (preview, its fold by the same
        factors): heads whose arrays are unchanged take their fold from there.
        """
        if rows == cols == 1:
            return self
        highest, farthest = [], []
        for h, (top, far) in enumerate(zip(self.highest, self.farthest, strict=True)):
            if reuse is not None and reuse[0].highest[h] is top and reuse[0].farthest[h] is far:
                highest.append(reuse[1].highest[h])
                farthest.append(reuse[1].farthest[h])
                continue
            highest.append(_reduce(top, rows, cols, np.maximum))
            most = _reduce(far, rows, cols, np.maximum)
            least = _reduce(np.where(np.isneginf(far), np.inf, far), rows, cols, np.minimum)
            with np.errstate(invalid="ignore"):  # see make_preview
                farthest.append(np.where(least + most < 0, least, most))
        return Preview(
            tuple(highest), tuple(farthest), self.low, self.high, self.rows * rows, self.cols * cols
        )

    def with_heads(self, heads: list[int], part: Preview) -> Preview:
        """This preview with ``heads`` replaced by ``part``'s (a few heads recomputed)."""
        if (part.rows, part.cols) != (self.rows, self.cols):
            raise ValueError("preview: the heads to splice in are reduced differently")
        highest, farthest = list(self.highest), list(self.farthest)
        low, high = self.low.copy(), self.high.copy()
        for n, h in enumerate(heads):
            highest[h], farthest[h] = part.highest[n], part.farthest[n]
            low[h], high[h] = part.low[n], part.high[n]
        return Preview(tuple(highest), tuple(farthest), low, high, self.rows, self.cols)


def _extremes_of_blocks(values: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Each block's largest value and smallest visible (not −inf) one, (n_q, n_k), of one
    head's (T_q, T_k) ``values``.

    Chunk by chunk of whole blocks' rows, so both come from one read of memory: a
    16 × 2048² stage is 256 MB, and memory, not arithmetic, is the cost.
    """
    t_q, t_k = values.shape
    n_q, n_k = -(-t_q // rows), -(-t_k // cols)
    highest = np.empty((n_q, n_k), dtype=values.dtype)
    lowest = np.empty((n_q, n_k), dtype=values.dtype)
    per_chunk = max(1, CHUNK_BYTES // (rows * t_k * values.itemsize))  # blocks' rows
    for r0 in range(0, n_q, per_chunk):
        r1 = min(r0 + per_chunk, n_q)
        chunk = values[r0 * rows : r1 * rows]  # (≤ rows·per_chunk, T_k)
        highest[r0:r1] = _reduce(chunk, rows, cols, np.maximum)
        low = _reduce(chunk, rows, cols, np.minimum)
        if np.isneginf(low).any():  # hidden keys: the smallest *visible* value
            low = _reduce(np.where(np.isneginf(chunk), np.inf, chunk), rows, cols, np.minimum)
        lowest[r0:r1] = low
    return highest, lowest


def _finite_extremes(highest: np.ndarray, lowest: np.ndarray) -> tuple[float, float]:
    with np.errstate(invalid="ignore"):
        low = np.min(lowest, where=np.isfinite(lowest), initial=np.inf)
        high = np.max(highest, where=np.isfinite(highest), initial=-np.inf)
    return float(low), float(high)


def make_preview(values: np.ndarray, limit: int = MAX_PIXELS) -> Preview:
    """The :class:`Preview` of one stage's heads ``values`` (H, T_q, T_k)."""
    values = np.asarray(values)
    heads, t_q, t_k = values.shape
    rows, cols = block_size(t_q, limit), block_size(t_k, limit)
    low, high = np.empty(heads), np.empty(heads)
    if rows == cols == 1:  # views of the values themselves: the result owns them
        split = tuple(values[h] for h in range(heads))
        for h in range(heads):
            low[h], high[h] = _finite_extremes(split[h], split[h])
        return Preview(split, split, low, high, rows, cols)
    highest, farthest = [], []
    for h in range(heads):  # one array per head (see Preview)
        top, bottom = _extremes_of_blocks(values[h], rows, cols)
        low[h], high[h] = _finite_extremes(top, bottom)
        # bottom ≤ top, so |bottom| > |top| exactly when bottom + top < 0; a fully
        # masked block (+inf + −inf = NaN) keeps its top, −inf: drawn as masked.
        with np.errstate(invalid="ignore"):
            farthest.append(np.where(bottom + top < 0, bottom, top))
        highest.append(top)
    return Preview(tuple(highest), tuple(farthest), low, high, rows, cols)
