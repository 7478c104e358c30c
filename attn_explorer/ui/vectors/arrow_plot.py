"""The Vectors dock's plot pieces: a view box a hand drags arrows in, and their decorations.

:class:`ArrowViewBox` turns a left-drag that starts on an arrow's tip into a move of
that tip (anywhere else it pans, as pyqtgraph's does), a left click into a pick and a
right click into the context menu; the dock says what each does. :class:`ArrowDecorations`
keeps the arrowheads and token labels of the drawn arrows, and the colours of queries,
keys and the projection are here so both read them from one place.
:func:`no_hover_while` spares a drag pyqtgraph's hover pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QFont

#: Above this many tokens, arrowheads are drawn only for the selection.
MAX_DECORATED = 24
#: Up to this many tokens every arrow is labelled; above, only the chosen and the hovered
#: ones (a real head's 16 queries and 16 keys would pile 32 labels up), unless asked.
MAX_LABELLED = 6
QUERY_COLOUR = QColor(31, 119, 180)
KEY_COLOUR = QColor(230, 110, 0)
PROJECTION_COLOUR = QColor(20, 150, 60)


class MouseClick(Protocol):
    """What the view box reads of pyqtgraph's ``MouseClickEvent`` (pyqtgraph ships no types)."""

    def button(self) -> Qt.MouseButton: ...

    def scenePos(self) -> QPointF: ...

    def screenPos(self) -> QPointF: ...

    def accept(self) -> None: ...


class MouseDrag(Protocol):
    """What the view box reads of pyqtgraph's ``MouseDragEvent``."""

    def button(self) -> Qt.MouseButton: ...

    def isStart(self) -> bool: ...

    def isFinish(self) -> bool: ...

    def buttonDownScenePos(self) -> QPointF: ...

    def scenePos(self) -> QPointF: ...

    def accept(self) -> None: ...


class ArrowViewBox(pg.ViewBox):
    """A ViewBox whose left-drag on an arrow's tip moves the tip instead of panning."""

    def __init__(self) -> None:
        super().__init__()
        self.grab: Callable[[QPointF], bool] = lambda scene_pos: False
        self.move: Callable[[QPointF], None] = lambda view_pos: None
        self.release: Callable[[], None] = lambda: None
        self.click: Callable[[QPointF], None] = lambda scene_pos: None
        self.context: Callable[[object], None] = lambda screen_pos: None
        self._dragging = False

    def mouseDragEvent(self, ev: MouseDrag, axis: int | None = None) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        if ev.isStart():
            self._dragging = self.grab(ev.buttonDownScenePos())
        if not self._dragging:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        self.move(self.mapSceneToView(ev.scenePos()))
        if ev.isFinish():
            self._dragging = False
            self.release()

    def mouseClickEvent(self, ev: MouseClick) -> None:
        button = ev.button()
        if button == Qt.MouseButton.RightButton:
            ev.accept()
            self.context(ev.screenPos())
        elif button == Qt.MouseButton.LeftButton:
            ev.accept()
            self.click(ev.scenePos())


def no_hover_while(scene: Any, dragging: Callable[[], bool]) -> None:
    """Let pyqtgraph's ``scene`` skip its hover pass while ``dragging()`` is true.

    On every mouse move, even mid-drag (when it lets no item take the hover), the scene
    looks for the items near the pointer: ~0.8 ms of each drag event in the Vectors dock,
    for nothing. The items it last hovered hear that the pointer left them on the first
    move after the drag.
    """
    plain = scene.sendHoverEvents

    def hover_unless_dragging(event: object, exitOnly: bool = False) -> None:
        if exitOnly or not dragging():
            plain(event, exitOnly)

    scene.sendHoverEvents = hover_unless_dragging


class ArrowDecorations:
    """The arrowheads and token labels on ``plot``, kept between draws and moved.

    The items are never built again: a drag redraws on every mouse move, and creating
    a few dozen graphics items each time took 10–25 ms.
    """

    def __init__(self, plot: pg.PlotWidget) -> None:
        self._plot = plot
        self.arrows: list[pg.ArrowItem] = []  # arrowheads, kept between redraws
        self.labels: list[pg.TextItem] = []  # token labels, likewise
        self._styles: dict[int, tuple[object, ...]] = {}  # item id → what it shows now

    def draw(
        self,
        tips: Callable[[str], np.ndarray],
        tokens: Sequence[str],
        chosen_query: int | None,
        chosen_key: int | None,
        hovered: tuple[str, int] | None = None,
        every_label: bool = False,
    ) -> None:
        """Arrowheads for a few tokens (else the chosen ones'); labels for the chosen and the
        ``hovered`` (matrix, token) arrows, and every arrow's with ``every_label`` or while
        there are at most ``MAX_LABELLED`` tokens.

        ``tips(matrix)`` gives the (T, 2) tips of ``"query"`` or ``"key"`` arrows as drawn.
        """
        few = len(tokens) <= MAX_DECORATED
        all_labels = every_label or len(tokens) <= MAX_LABELLED
        heads: list[tuple[float, float, float, bool, QColor]] = []
        labels: list[tuple[float, float, str, bool, QColor, bool]] = []
        for matrix, colour, letter, chosen in (
            ("query", QUERY_COLOUR, "q", chosen_query),
            ("key", KEY_COLOUR, "k", chosen_key),
        ):
            for n, (x, y) in enumerate(tips(matrix)):
                if (few or n == chosen) and x * x + y * y > 0:
                    angle = 180.0 + float(np.degrees(np.arctan2(y, x)))
                    heads.append((x, y, -angle, n == chosen, colour))
                if not (all_labels or n == chosen or hovered == (matrix, n)):
                    continue
                name = tokens[n] if n < len(tokens) else f"t{n + 1}"
                labels.append((x, y, f"{letter}{n + 1} {name}", n == chosen, colour, letter == "q"))
        while len(self.arrows) < len(heads):
            self.arrows.append(self._kept(pg.ArrowItem(tailLen=0)))
        for item, (x, y, angle, chosen, colour) in zip(self.arrows, heads, strict=False):
            style: tuple[object, ...] = (angle, chosen, colour.name())
            if self._styles.get(id(item)) != style:  # setStyle rebuilds the path: on change
                item.setStyle(
                    angle=angle, headLen=14 if chosen else 11, pen=pg.mkPen(colour),
                    brush=pg.mkBrush(colour),
                )  # fmt: skip
                self._styles[id(item)] = style
            item.setPos(x, y)
            item.setVisible(True)
        for item in self.arrows[len(heads) :]:
            item.setVisible(False)
        while len(self.labels) < len(labels):
            self.labels.append(self._kept(pg.TextItem()))
        bold, normal = QFont(), QFont()
        bold.setBold(True)
        for item, (x, y, text, chosen, colour, above) in zip(self.labels, labels, strict=False):
            style = (text, chosen, colour.name(), above)
            if self._styles.get(id(item)) != style:
                item.setText(text, color=colour)
                item.setFont(bold if chosen else normal)
                item.setAnchor((0, 1 if above else 0))
                self._styles[id(item)] = style
            item.setPos(x, y)
            item.setVisible(True)
        for item in self.labels[len(labels) :]:
            item.setVisible(False)

    def _kept(self, item: pg.GraphicsObject) -> pg.GraphicsObject:
        self._plot.addItem(item)
        return item
