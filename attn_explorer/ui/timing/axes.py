"""The timing charts' log axes: ticks at whole decades, labelled 10⁻³ or 1 ms."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyqtgraph as pg

from attn_explorer.state.formatting import format_seconds

#: Room one decade label needs along its axis, in pixels: across for x, up for y.
LABEL_PX_ACROSS, LABEL_PX_UP = 48, 20
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def decade_text(power: float) -> str:
    """10 to a whole ``power``, written as the user reads it: ``10³``, ``10⁻⁶``."""
    return "10" + str(round(power)).translate(_SUPERSCRIPT)


def seconds_text(power: float) -> str:
    """10 to a whole ``power`` seconds, with its unit: ``1 µs``, ``100 ms``, ``10 s``."""
    return format_seconds(10.0 ** round(power))


class DecadeAxis(pg.AxisItem):
    """A log10 axis labelled only at whole decades; the 2 … 9 ticks between are unlabelled.

    Its values are log10 of the quantity: pyqtgraph's log mode (the sweep) or heights
    already in log10 (the bar chart). ``label`` writes one decade. When the decades
    are too close for their labels, only every 2nd (3rd, …) is labelled and the
    minor ticks go; a view narrower than a decade labels its minor ticks instead.
    """

    def __init__(self, orientation: str, label: Callable[[float], str] = decade_text) -> None:
        super().__init__(orientation)
        self._label = label
        self._label_minor = False

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[Any, list]]:
        low, high = sorted((minVal, maxVal))
        decades = max(high - low, 1e-9)
        room = LABEL_PX_UP if self.orientation in ("left", "right") else LABEL_PX_ACROSS
        step = max(1, math.ceil(room * decades / max(size, 1.0)))
        majors = [float(n) for n in range(math.ceil(low), math.floor(high) + 1) if n % step == 0]
        minors = [
            n + math.log10(m)
            for n in range(math.floor(low), math.ceil(high))
            for m in range(2, 10)
            if low <= n + math.log10(m) <= high
        ]
        self._label_minor = not majors
        if not majors:  # less than a decade in view: its 2 … 9 ticks carry the labels
            return [(1.0, minors)]
        return [(float(step), majors)] + ([(None, minors)] if step == 1 else [])

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if self._label_minor:
            return [f"{10.0**v:.2g}" for v in values]
        return [self._label(v) if abs(v - round(v)) < 1e-6 else "" for v in values]
