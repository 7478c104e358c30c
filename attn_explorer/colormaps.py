"""Colour maps as numpy lookup tables (256 × RGB, uint8), shared by the views and the exporters.

Raw and scaled scores use a *diverging* map centred at 0 (blue < 0 < red, white at 0);
softmax weights use a *sequential* map from 0 to 1 (viridis: dark purple → yellow).
Qt-free, so the headless exporter and the tests use exactly the colours the window shows.
"""

from __future__ import annotations

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


def value_range(values: np.ndarray, diverging: bool) -> tuple[float, float]:
    """The colour scale's (low, high) for ``values``: symmetric about 0 when diverging.

    -inf entries (masked scores) are ignored. A constant array still gets a
    non-empty range so the colour bar can be drawn.
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (-1.0, 1.0) if diverging else (0.0, 1.0)
    low, high = float(finite.min()), float(finite.max())
    if diverging:
        bound = max(abs(low), abs(high)) or 1.0
        return -bound, bound
    if high == low:
        return (low - 0.5, high + 0.5) if low != 0 else (0.0, 1.0)
    return low, high


def stage_range(values: np.ndarray, stage: str, colormap: str) -> tuple[float, float]:
    """The colour scale of a pipeline stage, the same on screen and in exports.

    Softmax weights are probabilities: always 0 to 1. Other stages span their
    values, symmetric about 0 when the colour map is diverging.
    """
    if stage == "weights":
        return 0.0, 1.0
    return value_range(values, diverging=colormap == "diverging")


def to_rgb(values: np.ndarray, name: str, low: float, high: float) -> np.ndarray:
    """Map values to (…, 3) uint8 colours; NaN/−inf (masked) cells come out light grey."""
    table = lut(name)
    span = (high - low) or 1.0
    with np.errstate(invalid="ignore"):
        index = np.clip((values - low) / span * 255.0, 0, 255)
    finite = np.isfinite(values)
    index = np.where(finite, index, 0).round().astype(np.intp)
    rgb = table[index]
    rgb[~finite] = (200, 200, 200)
    return rgb
