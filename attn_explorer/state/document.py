"""The document: which file the session belongs to, and the rules that keep that file safe.

Qt-free. A session has a file path only when the user opened it from that path
or saved it there; anything else that replaces the numbers — New, a preset, an
example, a lesson, a model head — gives an *untitled* document, so Save asks
where instead of overwriting an unrelated file. Whether unsaved work may be
replaced is the caller's question to the user (:attr:`Document.has_unsaved_work`);
this class only does what was decided and reports failures through the session
(``session.report``), never raising for a bad file.

The document is the one owner of the name and the path: only its own methods
change them, and each says so with ``session.events.document``.
"""

from __future__ import annotations

import os
from pathlib import Path

from attn_explorer.state.session import Session
from attn_explorer.state.storage.prompts import Prompts
from attn_explorer.state.storage.session_file import (
    LoadedSession,
    SessionFileError,
    load_session,
    save_session,
)
from attn_explorer.state.types import UNTITLED, HeadSource, Options, Snapshot


class Document:
    """Open / save / replace for one :class:`Session` (see the module docstring)."""

    def __init__(self, session: Session, *, name: str = UNTITLED, path: str | None = None) -> None:
        self.session = session
        self._name = name
        self._path = os.path.abspath(path) if path is not None else None
        self._source: HeadSource | None = None
        #: The model dock's prompts, saved with the numbers and set by the file opened
        #: (the window keeps it up to date; a file without prompts leaves it as it was).
        self.prompts: Prompts | None = None
        #: The prompts as the document's file holds them (set by open and save).
        self._saved_prompts = Prompts()

    @property
    def path(self) -> str | None:
        """The file the session was opened from or saved to; None while untitled."""
        return self._path

    @property
    def name(self) -> str:
        """What the title bar, the Save dialog, session files and exports call the document."""
        return self._name or UNTITLED

    @property
    def source(self) -> HeadSource | None:
        """The real model head the numbers were taken from, while they still are its
        (same tokens and shape: an undo past the take hides it, a redo brings it back)."""
        source, session = self._source, self.session
        return (
            source
            if source is not None and source.describes(session.tokens, session.shape)
            else None
        )

    @property
    def has_unsaved_work(self) -> bool:
        """True when replacing the numbers would lose changes that are on no disk."""
        return self.session.dirty

    @property
    def prompts_modified(self) -> bool:
        """True when the document's file holds other prompts than the model dock now does.

        Only a document with a file counts: its prompts are part of what Save writes there.
        An untitled document's prompts are the model dock's typing, which replacing the
        numbers never touches (the dock keeps them), so exploring a model asks nothing.
        """
        prompts = self.prompts if self.prompts is not None else Prompts()
        return self._path is not None and prompts != self._saved_prompts

    def set_prompts(self, prompts: Prompts) -> None:
        """The model dock's prompts now (what Save writes); says so with ``events.prompts``."""
        if prompts != self.prompts:
            self.prompts = prompts
            self.session.events.prompts.emit()

    @property
    def modified(self) -> bool:
        """What the title's mark and closing the window ask about: numbers or prompts."""
        return self.session.dirty or self.prompts_modified

    def open(self, path: str | os.PathLike[str]) -> bool:
        """Replace the session with a session file; on any problem report it and change nothing."""
        try:
            loaded = load_session(path)
        except SessionFileError as exc:
            self.session.report(f"Could not open: {exc}")
            return False
        if not self.session.load(loaded.snapshot, loaded.options, f"open {Path(path).name}"):
            return False
        self._name = loaded.name or Path(path).stem
        self._source = None
        if loaded.prompts is not None:
            self.prompts = loaded.prompts
        self._saved_prompts = self.prompts if self.prompts is not None else Prompts()
        # Absolute: recent files and the next start must find it from any folder.
        self._path = os.path.abspath(path)
        self.session.mark_saved()
        self.session.clear_history()  # the file is the new starting point
        self.session.events.document.emit()
        repaired = f" ({'; '.join(loaded.notes)})" if loaded.notes else ""
        self.session.report(f"Opened {path}{repaired}", "info")
        return True

    def save_to(self, path: str | os.PathLike[str]) -> bool:
        """Write the session to ``path`` (atomically) and make that the document's file."""
        name = Path(path).stem
        try:
            save_session(self.session, path, name, self.prompts)
        except SessionFileError as exc:
            self.session.report(f"Could not save: {exc}")
            return False
        self._name = name
        self._path = os.path.abspath(path)
        self._saved_prompts = self.prompts if self.prompts is not None else Prompts()
        self.session.mark_saved()
        self.session.events.document.emit()
        self.session.report(f"Saved {path}", "info")
        return True

    def save(self) -> bool | None:
        """Save to the document's own file; None when untitled (ask the user where)."""
        if self._path is None:
            return None
        return self.save_to(self._path)

    def replace(
        self,
        snapshot: Snapshot,
        options: Options | None,
        text: str,
        name: str = UNTITLED,
        source: HeadSource | None = None,
    ) -> bool:
        """Load numbers that come from no file (a preset, an example, a lesson, a model head).

        The document becomes untitled and unmodified: nothing the user made is in
        it yet, and Save will ask where. Undoable (``text`` names it in Edit ▸ Undo).
        """
        if not self.session.load(snapshot, options, text):
            return False
        self._name = name
        self._source = source  # a model head's provenance; None for anything else
        self._path = None
        self.session.mark_saved()
        self.session.events.document.emit()
        return True

    def recover(self, loaded: LoadedSession, original: str | None) -> bool:
        """Take back unsaved work an autosave kept: its numbers, still unsaved, and its name.

        ``original`` is the file that work was opened from, kept as the document's
        file only while it still exists (else Save asks where). Not undoable: the
        recovered numbers are the starting point.
        """
        if not self.session.load(loaded.snapshot, loaded.options, "recover unsaved changes"):
            return False
        self._name = loaded.name
        self._source = None
        self._path = original if original and Path(original).is_file() else None
        if loaded.prompts is not None:  # the model dock's, as the autosave kept them
            self.prompts = loaded.prompts
        self.session.clear_history()
        self.session.events.document.emit()
        return True
