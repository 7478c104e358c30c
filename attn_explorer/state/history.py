"""Undo and redo: a stack of named commands, each a pair of functions that apply a change.

Qt-free. :class:`History` only orders the commands; what a command does is the
session's business. ``changed`` is called whenever what undo or redo would do changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Command:
    """One undoable change: its name in Edit ▸ Undo, and how to undo and redo it."""

    text: str
    undo: Callable[[], None]
    redo: Callable[[], None]
    merge_key: object = None


class History:
    """The undo and redo stacks of one session."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._undo: list[Command] = []
        self._redo: list[Command] = []
        self._changed = changed

    def push(
        self,
        text: str,
        undo: Callable[[], None],
        redo: Callable[[], None],
        *,
        merge_key: object = None,
    ) -> None:
        """Apply a change (``redo``) and remember it; anything undone before is forgotten.

        A ``merge_key`` equal to the last command's folds this change into it: one
        gesture (a drag) is one undo entry, whose undo goes back to before the
        gesture began and whose redo lands where it ended.
        """
        redo()
        last = self._undo[-1] if self._undo else None
        if merge_key is not None and last is not None and last.merge_key == merge_key:
            last.redo = redo
        else:
            self._undo.append(Command(text, undo, redo, merge_key))
        self._redo.clear()
        self._changed()

    def can_undo(self) -> bool:
        return bool(self._undo)

    def can_redo(self) -> bool:
        return bool(self._redo)

    def undo_text(self) -> str:
        return self._undo[-1].text if self._undo else ""

    def redo_text(self) -> str:
        return self._redo[-1].text if self._redo else ""

    def undo(self) -> bool:
        """Undo the last change; False if there is none."""
        if not self._undo:
            return False
        command = self._undo.pop()
        command.undo()
        self._redo.append(command)
        self._changed()
        return True

    def redo(self) -> bool:
        """Redo the last undone change; False if there is none."""
        if not self._redo:
            return False
        command = self._redo.pop()
        command.redo()
        self._undo.append(command)
        self._changed()
        return True

    def clear(self) -> None:
        self._undo.clear()
        self._redo.clear()
        self._changed()
