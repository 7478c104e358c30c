"""The token axis of the Model dock's plots: token names at cell centres, thinned as drawn.

Every token stays in the tick list; only every k-th label is drawn, k the smallest that
keeps neighbours apart at the current zoom, and long tokens are cut to
:data:`MAX_TOKEN_CHARS` (the hover read-out has them whole). The enlarged head, the
generation, analysis and two-prompt charts share it.
"""

from __future__ import annotations

import functools
import itertools
import math

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetrics, QPainter

#: Longer tokens are cut on the enlarged head's axes (the hover read-out has them whole).
MAX_TOKEN_CHARS = 14
#: Plot text on the white plot background.
TEXT_RGB = (40, 40, 40)


@functools.lru_cache(maxsize=4)  # one text's, for both axes of each view (8 192: 11 ms each)
def _ticks(tokens: tuple[str, ...]) -> tuple[list[tuple[float, str]], frozenset[str]]:
    cut = [t if len(t) <= MAX_TOKEN_CHARS else t[: MAX_TOKEN_CHARS - 1] + "…" for t in tokens]
    return [(i + 0.5, label) for i, label in enumerate(cut)], frozenset(cut)


TextSpec = tuple[QRectF, object, str]  # (rectangle, alignment flags, text), as pyqtgraph draws


class TokenAxis(pg.AxisItem):
    """Token names at cell centres, thinned at draw time so that no two labels overlap.

    Every token stays in the tick list; only every k-th label is drawn, k the smallest
    step at which neighbours clear each other. The bottom axis writes its labels upright
    (reading upwards), so a long token costs height rather than hiding its neighbours.
    """

    GAP_PX = 3
    _tickLevels: list[list[tuple[float, str]]] | None  # pyqtgraph's: set_tokens' ticks

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self._upright = orientation == "bottom"
        self.setTextPen(TEXT_RGB)
        self.setPen(TEXT_RGB)

    def set_tokens(self, tokens: list[str]) -> None:
        """Tick every token (cell centres i + 0.5); long tokens are cut to ``MAX_TOKEN_CHARS``."""
        ticks, labels = _ticks(tuple(tokens))
        self.setTicks([ticks])  # (shared, never changed in place)
        if self._upright:  # as tall as the longest label, plus tick and axis title
            metrics = QFontMetrics(self.style["tickFont"] or self.font())
            longest = max(map(metrics.horizontalAdvance, labels), default=0)
            title = self.label.boundingRect().height() * 0.8 if self.label.isVisible() else 0
            self.setHeight(int(longest + self._text_offset() + title + 2))

    def _text_offset(self) -> int:
        return max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1]

    def generateDrawSpecs(self, p: QPainter) -> tuple[object, list, list[TextSpec]] | None:
        # pyqtgraph measures each tick it is handed: only the few that can show (8 192
        # tokens' labels took most of a second to measure)
        every = self._tickLevels
        if every:
            self._tickLevels = [self._visible_ticks(every[0])]
        try:
            specs = super().generateDrawSpecs(p)
            if specs is None:
                return None
            axis_spec, tick_specs, text_specs = specs
            if self._upright:
                text_specs = self._upright_specs(p)
            return axis_spec, tick_specs, self._thin(text_specs)
        finally:
            self._tickLevels = every

    def _visible_ticks(self, ticks: list[tuple[float, str]]) -> list[tuple[float, str]]:
        """The ticks (cell centres i + 0.5) in the axis's range, every k-th from token 1: k
        the least step that keeps neighbours a label's height apart (no closer label fits)."""
        low, high = sorted(self.range)
        bounds = self.mapRectFromParent(self.geometry())
        length = bounds.width() if self.orientation in ("bottom", "top") else bounds.height()
        if not ticks or high <= low or length <= 0:
            return ticks
        label = 0.8 * QFontMetrics(self.style["tickFont"] or self.font()).height()
        step = max(1, math.ceil(label / (length / (high - low))))  # px per token: length / span
        first = max(0, math.ceil(low - 0.5))
        first = -(-first // step) * step  # on the same tokens however the view scrolls
        last = min(len(ticks) - 1, math.floor(high - 0.5))
        return ticks[first : last + 1 : step]

    def _upright_specs(self, p: QPainter) -> list[TextSpec]:
        # Where pyqtgraph puts a bottom tick: value v at x = v * scale - offset (its
        # generateDrawSpecs), but every label is kept, even one wider than its cell.
        if not self._tickLevels or self.range[1] == self.range[0]:
            return []
        bounds = self.mapRectFromParent(self.geometry())
        scale = bounds.width() / (self.range[1] - self.range[0])
        low, high = sorted(v * scale - self.range[0] * scale for v in self.range)
        top = bounds.top() + self._text_offset()
        metrics = p.fontMetrics()
        specs: list[TextSpec] = []
        for value, text in self._tickLevels[0]:
            x = value * scale - self.range[0] * scale
            if low <= x <= high:
                width, height = metrics.horizontalAdvance(text), metrics.height()
                specs.append((QRectF(x - height / 2, top, height, width), None, text))
        return specs

    def _thin(self, specs: list[TextSpec]) -> list[TextSpec]:
        if len(specs) < 2:
            return specs
        along_x = self.orientation in ("bottom", "top")
        centres = [r.center().x() if along_x else r.center().y() for r, _, _ in specs]
        extent = max(r.width() if along_x else r.height() for r, _, _ in specs)
        pitch = min(abs(b - a) for a, b in itertools.pairwise(centres)) or 1.0
        step = max(1, math.ceil((extent + self.GAP_PX) / pitch))
        return specs[::step]

    def drawPicture(
        self, p: QPainter, axisSpec: object, tickSpecs: list, textSpecs: list[TextSpec]
    ) -> None:
        if not self._upright:
            super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
            return
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setPen(self.textPen())
        flags = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        for rect, _, text in textSpecs:
            p.save()
            p.translate(rect.center().x(), rect.top())
            p.rotate(-90)  # local +x points up the screen: each label ends at the axis
            p.drawText(QRectF(-rect.height(), -rect.width() / 2, rect.height(), rect.width()),
                       flags, text)  # fmt: skip
            p.restore()
