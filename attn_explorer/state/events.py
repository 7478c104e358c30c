"""A tiny Qt-free signal: views subscribe to the fields they show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Event:
    """Callbacks run in connection order when the event is emitted."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., Any]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        for callback in list(self._callbacks):
            callback(*args)


class SessionEvents:
    """The session's events, one per kind of change.

    - ``values(matrix)``: numbers of ``"query"``, ``"key"`` or ``"value"`` changed, shape not
    - ``shape()``: B, H, T or d changed (tables need a reset)
    - ``tokens()``: token names changed
    - ``options(name)``: an option changed (strategy, stage, scale, ...); ``name`` is
      ``"all"`` when a load, or its undo, replaced several options at once
    - ``step()``: the stepper's position (option ``step``) changed: up to 60 times a
      second while it plays, so it has its own event and views that do not show it
      never hear of it
    - ``dirty(bool)``: unsaved-changes flag changed
    - ``document()``: the document's name or file changed (opened, saved, replaced)
    - ``prompts()``: the model dock's prompts changed (:meth:`Document.set_prompts`)
    - ``message(text, level)``: something to tell the user (status bar)
    - ``undo_changed()``: what undo / redo would do changed
    """

    def __init__(self) -> None:
        self.values = Event()
        self.shape = Event()
        self.tokens = Event()
        self.options = Event()
        self.step = Event()
        self.dirty = Event()
        self.document = Event()
        self.prompts = Event()
        self.message = Event()
        self.undo_changed = Event()
