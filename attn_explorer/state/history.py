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
        #: True while an undo or redo runs (the stepper keeps its place then, see Session).
        self.replaying = False
        #: Length of the undo stack when the session was last saved; None once that
        #: state can no longer be reached (a new change made after undoing past it).
        self._saved: int | None = 0

    def push(
        self,
        text: str,
        undo: Callable[[], None],
        redo: Callable[[], None],
        *,
        merge_key: object = None,
        apply: Callable[[], None] | None = None,
    ) -> None:
        """Apply a change (``apply``, else ``redo``) and remember it; anything undone before is
        forgotten.

        ``apply`` is the change as the user made it, when that does more than its redo:
        an edit also ends a step-through and a preset also sets its options, while undo
        and redo put back only the numbers (the session's rule: view settings are not
        edits). A ``merge_key`` equal to the last command's folds this change into it:
        one gesture (a drag) is one undo entry, whose undo goes back to before the
        gesture began and whose redo lands where it ended.
        """
        last = self._undo[-1] if self._undo else None
        merging = merge_key is not None and last is not None and last.merge_key == merge_key
        # The saved state lies in the redo stack, which this change forgets, or was the
        # top of the stack, which a merge changes: no undo or redo reaches it now.
        saved = self._saved
        if saved is not None and (
            saved > len(self._undo) or (merging and saved == len(self._undo))
        ):
            self._saved = None
        if merging and last is not None:
            last.redo = redo
        else:
            self._undo.append(Command(text, undo, redo, merge_key))
        self._redo.clear()
        # The stacks move first, so the change sees where it lands (whether it is saved).
        (apply or redo)()
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
        self._redo.append(command)
        self._replay(command.undo)
        self._changed()
        return True

    def redo(self) -> bool:
        """Redo the last undone change; False if there is none."""
        if not self._redo:
            return False
        command = self._redo.pop()
        self._undo.append(command)
        self._replay(command.redo)
        self._changed()
        return True

    def _replay(self, change: Callable[[], None]) -> None:
        self.replaying = True
        try:
            change()
        finally:
            self.replaying = False

    # -- the saved state ------------------------------------------------------------------
    @property
    def at_saved(self) -> bool:
        """True when undo and redo have brought the numbers back to where they were saved."""
        return self._saved == len(self._undo)

    def mark_saved(self) -> None:
        """The numbers as they are now are on disk."""
        self._saved = len(self._undo)

    def clear(self, *, saved: bool = True) -> None:
        """Forget every change; ``saved`` says whether the numbers now are on disk."""
        self._undo.clear()
        self._redo.clear()
        self._saved = 0 if saved else None
        self._changed()
