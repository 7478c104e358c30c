"""The file side of the window: new, open, save, recent files, examples, presets and autosave.

Dialogs pick a path or ask a question; :class:`~attn_explorer.state.document.Document`
does the work and reports through the session (the status bar shows it). The
rules users rely on:

- Save writes only to the file the session was opened from or saved to; anything
  else (New, a preset, an example, a lesson, a model head) is untitled and Save asks.
- Replacing unsaved work asks first (Save / Discard / Cancel), whatever replaces it.
- The autosave is crash recovery only: it exists while there are unsaved changes.
  After Save or Discard at quit it is removed, and the next start opens the
  document from disk. An unreadable autosave is set aside, never fatal.
- Recovered work is announced by a bar across the window (:class:`RecoveryNotice`):
  what was recovered, from when, and a button that discards it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from importlib.resources.abc import Traversable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QToolBar,
    QWidget,
)

from attn_explorer.state.app_state import AppState
from attn_explorer.state.presets import PRESETS
from attn_explorer.state.storage.examples import load_example
from attn_explorer.state.storage.session_file import (
    SessionFileError,
    load_session,
    session_json,
    snapshot_to_dict,
    write_atomic,
)
from attn_explorer.state.types import UNTITLED, HeadSource, Options, Snapshot
from attn_explorer.ui.common.settings import data_dir, last_dir, settings
from attn_explorer.ui.common.text import message_box

MAX_RECENT = 8
SESSION_FILTER = "Attention Explorer sessions (*.json);;All files (*)"
AUTOSAVE_NAME = "autosave.json"
#: Edits are autosaved after this pause (ms), so typing never waits for the disk.
AUTOSAVE_DELAY_MS = 2000
#: Sessions with more numbers than this are not autosaved (the JSON would be huge and slow).
AUTOSAVE_MAX_VALUES = 1_000_000
_autosave_lock = threading.Lock()


def autosave_path() -> Path:
    return data_dir() / AUTOSAVE_NAME


def when_text(stamp: float, now: float | None = None) -> str:
    """When a file was written, as a user says it: ``today at 14:02``, else with its date
    (``on 30 Nov 2026 at 09:15``)."""
    then, today = time.localtime(stamp), time.localtime(now)
    at = time.strftime("%H:%M", then)
    if then[:3] == today[:3]:
        return f"today at {at}"
    return f"on {time.strftime('%d %b %Y', then).lstrip('0')} at {at}"


class RecoveryNotice(QToolBar):
    """A bar across the top of the window after a crash recovery: what was recovered, from
    when, and Keep / Discard. It goes once the user answers, saves or opens something else."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Recovered changes", parent)
        self.setObjectName("recovery_notice")
        self.setMovable(False)
        self.setFloatable(False)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.label.setAccessibleName("Recovered changes")
        self.addWidget(self.label)
        self.keep_button = QPushButton("&Keep them")
        self.keep_button.setToolTip("Go on with the recovered changes (still unsaved: Ctrl+S)")
        self.discard_button = QPushButton("&Discard recovered changes")
        self.discard_button.setToolTip("Throw them away and open the file as it is on disk")
        self.addWidget(self.keep_button)
        self.addWidget(self.discard_button)
        self.keep_button.clicked.connect(self.hide)


def recent_files() -> list[str]:
    """The recently opened or saved session files, newest first."""
    value = settings().value("recent", [])
    if isinstance(value, str):  # QSettings gives a one-item list back as a string
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def remember_recent(path: str | os.PathLike[str]) -> None:
    s = settings()
    path = os.path.abspath(path)
    recent = [p for p in recent_files() if p != path]
    s.setValue("recent", [path, *recent][:MAX_RECENT])
    s.setValue("last_dir", str(Path(path).parent))


class FileCommands(QObject):
    """Every command that opens, saves or replaces the document, and the autosave."""

    def __init__(self, window: QWidget, state: AppState) -> None:
        super().__init__(window)
        self.window = window
        self.state = state
        self.session = state.session
        self.document = state.document
        #: Ask Save / Discard / Cancel before unsaved work is replaced (tests switch it off).
        self.ask_before_discard = True
        #: Shows the Vectors dock for a preset about one query (the main window sets it).
        self.open_vectors_view: Callable[[], object] | None = None
        self._last_error = ""
        #: Bumped whenever the recovery copy is discarded; a pending autosave checks it.
        self._recovery_generation = 0
        #: Shown after a crash recovery (created then, so a normal start builds nothing).
        self.notice: RecoveryNotice | None = None
        self.session.events.message.connect(self._remember_error)
        self._autosave_timer = QTimer(self)
        self._autosave_timer.setSingleShot(True)
        self._autosave_timer.setInterval(AUTOSAVE_DELAY_MS)
        self._autosave_timer.timeout.connect(self.write_autosave)
        events = self.session.events
        events.dirty.connect(self._on_dirty_changed)
        events.values.connect(lambda matrix: self._schedule_autosave())
        events.shape.connect(self._schedule_autosave)
        events.tokens.connect(self._schedule_autosave)
        events.options.connect(lambda name: self._schedule_autosave())

    def _remember_error(self, text: str, level: str) -> None:
        if level == "error":
            self._last_error = text

    def _warn(self, title: str) -> None:
        message_box(self.window, QMessageBox.Icon.Warning, title, self._last_error or title)

    # -- asking --------------------------------------------------------------------------
    def confirm_discard(self, *, prompts: bool = False) -> bool:
        """True if the numbers may be replaced: nothing unsaved, or saved, or discarded.

        ``prompts``: also ask when only the model dock's prompts differ from the document's
        file (closing the window, or opening a file, whose prompts replace the dock's).
        """
        unsaved = self.document.modified if prompts else self.document.has_unsaved_work
        if not unsaved or not self.ask_before_discard:
            return True
        answer = message_box(
            self.window,
            QMessageBox.Icon.Question,
            "Unsaved changes",
            f"Save the changes to {self.document.name}?",
            QMessageBox.StandardButton.Save
            | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Save:
            return self.save()
        return answer == QMessageBox.StandardButton.Discard

    # -- replacing the numbers -------------------------------------------------------------
    def replace(
        self,
        snapshot: Snapshot,
        options: Options | None,
        text: str,
        name: str,
        *,
        confirm: bool = True,
        source: HeadSource | None = None,
    ) -> bool:
        """Load numbers that come from no file (untitled); asks first about unsaved work.
        ``source``: the model head they were taken from."""
        if confirm and not self.confirm_discard():
            return False
        return self.document.replace(snapshot, options, text, name, source)

    def load_preset(self, name: str, *, confirm: bool = True, **kwargs: int) -> bool:
        """A preset's numbers and options, as an untitled document (undoable)."""
        preset = PRESETS[name](**kwargs) if kwargs else PRESETS[name]()
        ok = self.replace(
            preset.snapshot, preset.options, f"load {preset.title}", preset.title, confirm=confirm
        )
        if ok:
            self.session.report(f"Loaded preset: {preset.title} — {preset.description}", "info")
            if preset.vectors_query is not None:  # a preset about one query shows it as an arrow
                if self.open_vectors_view is not None:  # the main window's; a bare parent has none
                    self.open_vectors_view()
                self.state.vectors.select_query(preset.vectors_query)
        return ok

    def new_session(self) -> bool:
        """Start again from the worked example (untitled)."""
        if not self.confirm_discard():
            return False
        preset = PRESETS["worked"]()
        return self.document.replace(preset.snapshot, preset.options, "new session", UNTITLED)

    def open_example(self, entry: Traversable) -> bool:
        if not self.confirm_discard():
            return False
        try:
            loaded = load_example(entry)
        except SessionFileError as exc:
            self.session.report(f"Could not open the example: {exc}")
            return False
        if not self.document.replace(
            loaded.snapshot, loaded.options, f"open example {entry.name}", loaded.name
        ):
            return False
        self.session.report(f"Opened the example {entry.name}", "info")
        return True

    # -- files ---------------------------------------------------------------------------------
    def open_path(self, path: str | os.PathLike[str]) -> bool:
        """Open a session file (no question asked: callers ask first)."""
        if not self.document.open(path):
            return False
        remember_recent(path)
        return True

    def open_dialog(self) -> bool:
        if not self.confirm_discard(prompts=True):
            return False
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Open session", last_dir(), SESSION_FILTER
        )
        if not path:
            return False
        if not self.open_path(path):
            self._warn("Could not open the session")
            return False
        return True

    def open_recent(self, path: str) -> bool:
        """Open a recent file; one that cannot be opened any more is said so and forgotten."""
        if not self.confirm_discard(prompts=True):
            return False
        if self.open_path(path):
            return True
        settings().setValue("recent", [p for p in recent_files() if p != path])
        self._warn("Could not open the session")
        return False

    def fill_recent_menu(self, menu: QMenu) -> None:
        menu.clear()
        files = recent_files()
        if not files:
            menu.addAction("(no recent sessions)").setEnabled(False)
        for n, path in enumerate(files):
            label = path.replace("&", "&&")  # a & in a path is text, not an accelerator
            menu.addAction(f"&{n + 1} {label}", partial(self.open_recent, path))

    def save_to(self, path: str | os.PathLike[str]) -> bool:
        if not self.document.save_to(path):
            return False
        remember_recent(path)
        return True

    def save(self) -> bool:
        """Save to the document's own file, or ask where when it has none."""
        saved = self.document.save()
        if saved is None:
            return self.save_as()
        if not saved:
            self._warn("Could not save")
        return saved

    def save_as(self) -> bool:
        start = str(Path(last_dir()) / f"{self.document.name}.json")
        path, _ = QFileDialog.getSaveFileName(self.window, "Save session", start, SESSION_FILTER)
        if not path:
            return False
        if not path.endswith(".json"):
            path += ".json"
        if not self.save_to(path):
            self._warn("Could not save")
            return False
        return True

    # -- autosave: crash recovery ----------------------------------------------------------------
    def _schedule_autosave(self) -> None:
        if self.session.dirty:
            self._autosave_timer.start()

    def _on_dirty_changed(self, dirty: bool) -> None:
        if dirty:
            self._autosave_timer.start()
        else:
            self._autosave_timer.stop()
            self.discard_recovery()  # saved, opened or replaced: nothing to recover

    def write_autosave(self, final: bool = False) -> threading.Thread | None:
        """Keep a copy of unsaved work in the app-data folder, for recovery after a crash.

        The numbers are copied here; the JSON is built and written in a background
        thread so typing never waits for it (``final`` writes before returning).
        Very large sessions are skipped with a note.
        """
        session = self.session
        if not session.dirty:
            return None
        if session.value_count > AUTOSAVE_MAX_VALUES:
            if not final:
                session.report(
                    "Autosave is off for sessions this large; save with Ctrl+S to keep your work.",
                    "info",
                )
            return None
        snapshot, options, name = session.snapshot(), session.options, self.document.name
        prompts = self.document.prompts  # the model dock's, recovered with the numbers
        path = autosave_path()
        settings().setValue("recovery/path", self.document.path or "")

        generation = self._recovery_generation

        def work() -> None:
            with _autosave_lock:
                if generation != self._recovery_generation:
                    return  # saved or discarded since: nothing to recover any more
                try:
                    text = session_json(snapshot_to_dict(snapshot, options, name, prompts))
                    write_atomic(path, text.encode("utf-8"))
                except Exception:  # best effort: an explicit save reports its own errors
                    pass

        if final:
            work()
            return None
        thread = threading.Thread(target=work, name="autosave", daemon=True)
        thread.start()
        return thread

    def discard_recovery(self) -> None:
        """Remove the autosave: there is nothing unsaved to recover.

        An autosave still on its way (its thread not yet writing) is called off too.
        """
        with _autosave_lock:
            self._recovery_generation += 1
            with contextlib.suppress(OSError):
                autosave_path().unlink(missing_ok=True)

    def close(self) -> bool:
        """The window is closing: ask about unsaved work; False keeps the window open."""
        if self.ask_before_discard:
            if not self.confirm_discard(prompts=True):
                return False
            self._autosave_timer.stop()
            self.discard_recovery()  # saved or discarded: the next start opens the disk's copy
        else:
            self._autosave_timer.stop()
            self.write_autosave(final=True)  # nobody was asked: keep the work for recovery
        settings().setValue("last_document", self.document.path or "")
        return True

    # -- start-up ---------------------------------------------------------------------------------
    def start(self, session_path: str | os.PathLike[str] | None = None) -> str:
        """Open what the user had: unsaved work recovered after a crash, else the last
        document from disk, else the worked example. Nothing read here can stop the start.

        With ``session_path`` (``attn-explorer FILE``, a double-click) that file is
        opened instead, and unsaved work from a crash is kept beside it, never lost.
        Returns ``"recovered"``, ``"set aside"`` (an unreadable autosave), ``"reopened"``,
        ``"default"``, ``"opened"`` or ``"not opened"``.
        """
        path = autosave_path()
        if session_path is not None:
            kept = self._keep_recovery(path) if path.exists() or path.is_symlink() else None
            if not self.open_path(session_path):
                return "not opened"
            if kept is not None:  # said after "Opened …", so it is the message that stays
                self.session.report(
                    "Unsaved changes from the last time the app did not close cleanly were "
                    f"kept in {kept}; open that file to get them back.",
                    "info",
                )
            return "opened"
        if path.exists() or path.is_symlink():
            return self._recover(path)
        last = str(settings().value("last_document", "") or "")
        if last:
            if Path(last).is_file() and self.document.open(last):
                self.session.report(f"Reopened {last}", "info")
                return "reopened"
            self.session.report(f"Could not reopen {last}; started on the worked example.")
        return "default"

    def _recover(self, path: Path) -> str:
        try:
            if not path.is_file():  # a folder, a FIFO, a device: never open it
                raise SessionFileError("not a regular file")
            loaded = load_session(path)
            original = str(settings().value("recovery/path", "") or "")
            if not self.document.recover(loaded, original or None):
                raise SessionFileError("its numbers were refused")
        except Exception as exc:  # anything at all: set it aside and start clean
            self._set_aside(path, str(exc) or type(exc).__name__)
            return "set aside"
        try:
            when = when_text(path.stat().st_mtime)
        except OSError:
            when = "the last session"
        self.session.report(
            f"Recovered unsaved changes from {when}; save them with Ctrl+S or discard them.",
            "info",
        )
        self._show_notice(when)
        return "recovered"

    def _show_notice(self, when: str) -> None:
        """The bar that says what was recovered (the document, its shape) and from when."""
        if not isinstance(self.window, QMainWindow):
            return
        if self.notice is None:
            self.notice = RecoveryNotice(self.window)
            top = Qt.ToolBarArea.TopToolBarArea
            bars = [b for b in self.window.findChildren(QToolBar) if b is not self.notice]
            first = next((b for b in bars if self.window.toolBarArea(b) == top), None)
            if first is None:
                self.window.addToolBar(top, self.notice)
            else:  # a row of its own, above the window's toolbars
                self.window.insertToolBar(first, self.notice)
                self.window.insertToolBarBreak(first)
            self.notice.discard_button.clicked.connect(self.discard_recovered)
            gone = self.notice.hide
            self.session.events.dirty.connect(lambda dirty: None if dirty else gone())
        b, h, t, d = self.session.shape
        path = self.document.path
        kept = f"They are not in {path} yet." if path else "Save them (Ctrl+S) to keep them."
        self.notice.label.setText(
            f"Recovered unsaved changes to {self.document.name} (T = {t} tokens, H = {h}, "
            f"d = {d}{f', B = {b}' if b > 1 else ''}), autosaved {when} when the app did not "
            f"close cleanly. {kept}"
        )
        self.notice.show()

    def discard_recovered(self) -> None:
        """Throw the recovered changes away: the document's file as it is on disk, else
        the worked example (undoable, so a mistaken click can be taken back)."""
        if self.notice is not None:
            self.notice.hide()
        original = self.document.path
        if original and Path(original).is_file() and self.open_path(original):
            self.session.report(f"Discarded the recovered changes; reopened {original}.", "info")
            return
        preset = PRESETS["worked"]()
        if self.document.replace(
            preset.snapshot, preset.options, "discard recovered changes", UNTITLED
        ):
            self.session.report(
                "Discarded the recovered changes (Ctrl+Z brings them back); started on the "
                "worked example.",
                "info",
            )

    def _keep_recovery(self, path: Path) -> Path | None:
        """Move a crash's unsaved work to a file of its own (None if it cannot be moved)."""
        kept = path.with_name(f"recovered-unsaved-{time.strftime('%Y%m%d-%H%M%S')}.json")
        try:
            os.replace(path, kept)
        except OSError as exc:
            self.session.report(f"Unsaved changes from last time could not be kept: {exc}")
            return None
        return kept

    def _set_aside(self, path: Path, reason: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = path.with_name(f"autosave-unreadable-{stamp}.json")
        try:
            os.replace(path, aside)
            where = f"set aside as {aside}"
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            where = "removed"
        self.session.report(
            f"The autosaved session could not be read ({reason}); it was {where}. "
            "Started on the worked example."
        )
