"""The lessons' pointer: an orange frame around a named control of the window.

A lesson names controls by the names in
:data:`attn_explorer.lessons.registry.HIGHLIGHT_TARGETS`; each of those widgets
carries its name as its Qt object name (the window sets them where it builds the
widgets), so the names are written in one list and found with ``findChild``.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QWidget

#: The frame: wide and orange, readable on the light and the dark palette.
FRAME_STYLE = "{cls} {{ border: 3px solid #ff8c00; }}"
#: How long a frame stays when a step does not say (ms).
DEFAULT_HIGHLIGHT_MS = 2500


class Highlighter:
    """Frames named controls of ``window`` (see the module docstring).

    ``before(name)`` runs first, so the window can build a control that is
    created late (the heatmaps) or bring its dock to the front.
    """

    def __init__(self, window: QWidget, before: Callable[[str], None]) -> None:
        self.window = window
        self.before = before
        self._serial = 0

    def targets(self) -> dict[str, QWidget]:
        """The controls a lesson may point at that exist now, by name."""
        from attn_explorer.lessons.registry import HIGHLIGHT_TARGETS  # not at start-up

        found = {name: self.window.findChild(QWidget, name) for name in HIGHLIGHT_TARGETS}
        return {name: widget for name, widget in found.items() if widget is not None}

    def highlight(self, name: str | None, duration_ms: int = DEFAULT_HIGHLIGHT_MS) -> None:
        """Frame the control ``name`` (None: take every frame down); 0 ms = until cleared."""
        for widget in self.targets().values():
            self._clear(widget)
        if name is None:
            return
        from attn_explorer.lessons.registry import HIGHLIGHT_TARGETS

        if name not in HIGHLIGHT_TARGETS:
            raise KeyError(
                f"unknown highlight target {name!r}; one of {', '.join(HIGHLIGHT_TARGETS)}"
            )
        self.before(name)
        target = self.targets().get(name)
        if target is None:
            raise KeyError(f"the control {name!r} is not in the window yet")
        self._frame(target, duration_ms)

    def _frame(self, widget: QWidget, duration_ms: int) -> None:
        widget.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)  # plain QWidgets too
        widget.setProperty("plainStyle", widget.styleSheet())
        self._serial += 1
        widget.setProperty("lessonHighlight", self._serial)  # which frame is up, for its timer
        widget.setStyleSheet(FRAME_STYLE.format(cls=type(widget).__name__))
        if duration_ms > 0:
            serial = self._serial
            # The widget as the timer's context: no call after it is gone, and only this
            # frame is taken down (a newer one on the same widget stays).
            QTimer.singleShot(duration_ms, widget, lambda: self._clear(widget, serial))

    @staticmethod
    def _clear(widget: QWidget, serial: int | None = None) -> None:
        """Take the frame down (only frame ``serial``, when given)."""
        shown = widget.property("lessonHighlight")
        if shown and (serial is None or shown == serial):
            widget.setProperty("lessonHighlight", 0)
            widget.setStyleSheet(widget.property("plainStyle") or "")
