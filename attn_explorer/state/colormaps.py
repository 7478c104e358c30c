"""Colour maps as numpy lookup tables (256 × RGB, uint8), shared by the views and the exporters.

Raw and scaled scores use a *diverging* map centred at 0 (blue < 0 < red, white at 0);
softmax weights use a *sequential* map from 0 to 1 (viridis: dark purple → yellow).
Qt-free, so the headless exporter and the tests use exactly the colours the window shows.
Masked (−inf) cells are light grey; NaN and +inf, which the compute layer refuses to
produce, would be magenta rather than an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

# Anchor colours, evenly spaced; interpolated linearly to 256 entries.
_ANCHORS: dict[str, list[tuple[int, int, int]]] = {
    # ColorBrewer RdBu, reversed so negative = blue, positive = red
    "diverging": [
        (5, 48, 97),
        (33, 102, 172),
        (67, 147, 195),
        (146, 197, 222),
        (209, 229, 240),
        (247, 247, 247),
        (253, 219, 199),
        (244, 165, 130),
        (214, 96, 77),
        (178, 24, 43),
        (103, 0, 31),
    ],
    # viridis, sampled at 9 points
    "sequential": [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ],
    # greys, for print
    "greys": [(255, 255, 255), (0, 0, 0)],
}

COLORMAPS = tuple(_ANCHORS)


@cache
def lut(name: str) -> np.ndarray:
    """(256, 3) uint8 lookup table of colour map ``name`` (shared: do not modify)."""
    if name not in _ANCHORS:
        raise ValueError(f"colour map: unknown {name!r}; choose one of {', '.join(COLORMAPS)}.")
    anchors = np.array(_ANCHORS[name], dtype=np.float64)
    x = np.linspace(0.0, 1.0, len(anchors))
    grid = np.linspace(0.0, 1.0, 256)
    table = np.stack([np.interp(grid, x, anchors[:, c]) for c in range(3)], axis=1)
    table = np.round(table).astype(np.uint8)
    table.flags.writeable = False
    return table


def finite_extremes(values: np.ndarray) -> tuple[float, float]:
    """(smallest, largest) finite entry of ``values``; (+inf, −inf) when none is finite."""
    values = np.asarray(values)
    finite = np.isfinite(values)
    # Reductions over the finite entries, without copying them out.
    low = float(np.min(values, where=finite, initial=np.inf))
    high = float(np.max(values, where=finite, initial=-np.inf))
    return low, high


def range_from_extremes(low: float, high: float, diverging: bool) -> tuple[float, float]:
    """The colour scale's (low, high) from the finite extremes of the values (see value_range).

    ``low > high`` (the (+inf, −inf) of :func:`finite_extremes`) means no finite value.
    """
    if low > high:
        return (-1.0, 1.0) if diverging else (0.0, 1.0)
    if diverging:
        bound = max(abs(low), abs(high)) or 1.0
        return -bound, bound
    if high == low:
        return (low - 0.5, high + 0.5) if low != 0 else (0.0, 1.0)
    return low, high


def value_range(values: np.ndarray, diverging: bool) -> tuple[float, float]:
    """The colour scale's (low, high) for ``values``: symmetric about 0 when diverging.

    NaN and ±inf entries (−inf: masked scores) are ignored. A constant array still
    gets a non-empty range so the colour bar can be drawn. Both ends are finite,
    though ``high − low`` may overflow (:func:`to_rgb` copes).
    """
    return range_from_extremes(*finite_extremes(values), diverging=diverging)


def stage_range(
    values: np.ndarray | None,
    stage: str,
    colormap: str,
    extremes: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """The colour scale of a pipeline stage, the same on screen and in exports.

    Softmax weights are probabilities: always 0 to 1. Other stages span their
    values, symmetric about 0 when the colour map is diverging. ``extremes``
    (the values' :func:`finite_extremes`, when already known) spares a pass over
    ``values``.
    """
    if stage == "weights":
        return 0.0, 1.0
    if extremes is None:
        extremes = finite_extremes(np.asarray(values))
    return range_from_extremes(*extremes, diverging=colormap == "diverging")


def head_ranges(
    extremes: Sequence[tuple[float, float]], stage: str, colormap: str, shared: bool
) -> list[tuple[float, float]]:
    """The colour scale of every head, from each head's finite ``(low, high)`` extremes.

    The one statement of the shared-scale rule, for the window's heatmaps, its first
    picture and exports alike: with ``shared`` (``options.shared_scale``) every head
    gets the range of all heads together, so colours compare across heads; otherwise
    each head gets its own :func:`stage_range`.
    """
    if shared:
        low = min((e[0] for e in extremes), default=np.inf)
        high = max((e[1] for e in extremes), default=-np.inf)
        return [stage_range(None, stage, colormap, extremes=(low, high))] * len(extremes)
    return [stage_range(None, stage, colormap, extremes=e) for e in extremes]


def heads_extremes(values: np.ndarray) -> list[tuple[float, float]]:
    """:func:`finite_extremes` of each head of ``values`` (H, rows, columns)."""
    return [finite_extremes(head) for head in values]


#: −inf cells: a key hidden from the query (masked scores), light grey.
MASKED_RGB = (200, 200, 200)
#: NaN and +inf cells: not a number the map can place (an overflow), magenta.
INVALID_RGB = (255, 0, 255)


#: Entries of :func:`colour_index` past the colour map's 256: masked and invalid cells.
MASKED_INDEX = 256
INVALID_INDEX = 257


@cache
def colour_table(name: str) -> np.ndarray:
    """(258, 3) uint8: the colour map's 256 colours, then MASKED_RGB and INVALID_RGB."""
    table = np.vstack([lut(name), [MASKED_RGB, INVALID_RGB]]).astype(np.uint8)
    table.flags.writeable = False
    return table


def colour_index(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Each value's row of :func:`colour_table` (uint16): 0…255 over [low, high], clipped.

    −inf (masked) cells get :data:`MASKED_INDEX`, NaN and +inf :data:`INVALID_INDEX`.
    Any range is accepted: a non-finite or empty one falls back to a drawable one,
    and a range wider than the largest float is normalised before it is subtracted.
    """
    values = np.asarray(values)
    low, high = float(low), float(high)
    if not (np.isfinite(low) and np.isfinite(high)):
        low, high = value_range(values, diverging=False)
    low, high = min(low, high), max(low, high)
    # Divide by the larger end first: high - low may overflow, high/m - low/m ≤ 2 cannot.
    magnitude = max(abs(low), abs(high)) or 1.0
    low_n, high_n = low / magnitude, high / magnitude
    span = (high_n - low_n) or 1.0
    # In place on one temporary: a 4096 × 4096 panel costs 13 bytes a cell, not 40.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        position = np.divide(values, magnitude, dtype=np.result_type(values, np.float32))
        position -= low_n
        position *= 255.0 / span  # ±inf for values far outside the range: clipped next
        np.clip(position, 0, 255, out=position)
    finite = np.isfinite(values)
    everything_finite = bool(finite.all())
    if not everything_finite:
        position[~finite] = 0  # NaN would not cast; these cells get their own rows below
    np.rint(position, out=position)
    index: np.ndarray = position.astype(np.uint16)
    if not everything_finite:
        index[np.isneginf(values)] = MASKED_INDEX
        index[np.isnan(values) | np.isposinf(values)] = INVALID_INDEX
    return index


def to_rgb(values: np.ndarray, name: str, low: float, high: float) -> np.ndarray:
    """Map values to (…, 3) uint8 colours over [low, high], clipped at both ends.

    −inf (masked) cells come out :data:`MASKED_RGB`, NaN and +inf cells
    :data:`INVALID_RGB`. Ranges as :func:`colour_index` takes them.
    """
    return np.take(colour_table(name), colour_index(values, low, high), axis=0)
