"""The document: which file the session belongs to, and the rules that keep that file safe.

Qt-free. A session has a file path only when the user opened it from that path
or saved it there; anything else that replaces the numbers — New, a preset, an
example, a lesson, a model head — gives an *untitled* document, so Save asks
where instead of overwriting an unrelated file. Whether unsaved work may be
replaced is the caller's question to the user (:attr:`Document.has_unsaved_work`);
this class only does what was decided and reports failures through the session
(``session.report``), never raising for a bad file.
"""

from __future__ import annotations

import os
from pathlib import Path

from attn_explorer.state.session import Session
from attn_explorer.state.storage.session_file import SessionFileError, load_session, save_session
from attn_explorer.state.types import UNTITLED, Options, Snapshot


class Document:
    """Open / save / replace for one :class:`Session` (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def path(self) -> str | None:
        """The file the session was opened from or saved to; None while untitled."""
        return self.session.path

    @property
    def name(self) -> str:
        """What the title bar and the Save dialog call the document."""
        return self.session.name or UNTITLED

    @property
    def has_unsaved_work(self) -> bool:
        """True when replacing the numbers would lose changes that are on no disk."""
        return self.session.dirty

    def open(self, path: str | os.PathLike[str]) -> bool:
        """Replace the session with a session file; on any problem report it and change nothing."""
        try:
            loaded = load_session(path)
        except SessionFileError as exc:
            self.session.report(f"Could not open: {exc}")
            return False
        if not self.session.load(loaded.snapshot, loaded.options, f"open {Path(path).name}"):
            return False
        self.session.name = loaded.name or Path(path).stem
        # Absolute: recent files and the next start must find it from any folder.
        self.session.path = os.path.abspath(path)
        self.session.mark_saved()
        self.session.clear_history()  # the file is the new starting point
        self.session.events.document.emit()
        repaired = f" ({'; '.join(loaded.notes)})" if loaded.notes else ""
        self.session.report(f"Opened {path}{repaired}", "info")
        return True

    def save_to(self, path: str | os.PathLike[str]) -> bool:
        """Write the session to ``path`` (atomically) and make that the document's file."""
        previous = self.session.name
        self.session.name = Path(path).stem
        try:
            save_session(self.session, path)
        except SessionFileError as exc:
            self.session.name = previous
            self.session.report(f"Could not save: {exc}")
            return False
        self.session.path = os.path.abspath(path)
        self.session.mark_saved()
        self.session.events.document.emit()
        self.session.report(f"Saved {path}", "info")
        return True

    def save(self) -> bool | None:
        """Save to the document's own file; None when untitled (ask the user where)."""
        if self.session.path is None:
            return None
        return self.save_to(self.session.path)

    def replace(
        self, snapshot: Snapshot, options: Options | None, text: str, name: str = UNTITLED
    ) -> bool:
        """Load numbers that come from no file (a preset, an example, a lesson, a model head).

        The document becomes untitled and unmodified: nothing the user made is in
        it yet, and Save will ask where. Undoable (``text`` names it in Edit ▸ Undo).
        """
        if not self.session.load(snapshot, options, text):
            return False
        self.session.name = name
        self.session.path = None
        self.session.mark_saved()
        self.session.events.document.emit()
        return True
