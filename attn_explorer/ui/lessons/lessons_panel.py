"""The Lessons dock: the seed article as guided steps played in the real window.

A thin view over :class:`attn_explorer.lessons.engine.LessonRunner`: a list of
lessons, the current step's text (Markdown, selectable, links of the form
``control:NAME`` flash that control), Back / Next / Restart and a step counter.
The runner does every change through the window's public actions; this panel
only asks it to move and shows where it is. Progress lives in QSettings.

:class:`LessonsDock` holds the panel in the window, with the first-launch
"Start here" button for the menu bar's corner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QSignalBlocker, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QPushButton,
    QSplitter,
    QStyle,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.ui.common.settings import settings

if TYPE_CHECKING:
    from attn_explorer.lessons.engine import Lesson, LessonRunner
    from attn_explorer.lessons.window import LessonWindow

SHORTCUT = "F3"
DOCK_WIDTH = 340
#: Narrower than this and the dimension table in lesson 7 breaks words apart.
MIN_WIDTH = 280
WELCOME = (
    "**Guided lessons** walk through the article *Multi-Head Attention in Large Language "
    "Models* in the real window: each step sets up the tables, the stepper or the timing "
    "panel and points at what it talks about.\n\n"
    "Pick a lesson (click it, or select it and press Enter). Then use **Next** (→ or Space) "
    "and **Back** (←). Poke at anything in between; Next puts the lesson's example back "
    "if you changed it.\n\n"
    "Lessons load their own numbers; your edits stay in Edit ▸ Undo."
)


def _key(*parts: str) -> str:
    return "lessons/" + "/".join(parts)


class LessonsPanel(QWidget):
    """Lesson list, step text, Back / Next / Restart; plays lessons against ``window``.

    ``stepShown(lesson_id, index)`` is emitted after every step is set up.
    """

    stepShown = Signal(str, int)

    def __init__(
        self,
        window: LessonWindow,
        lessons: list[Lesson] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        from attn_explorer.lessons.engine import load_lessons

        super().__init__(parent)
        self.window_api = window
        self.lessons = lessons if lessons is not None else load_lessons()
        self.runner: LessonRunner | None = None
        self._markdown = ""  # the step text shown, rendered again when the palette changes
        self._build()
        self._fill_list()
        self.show_welcome()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.lesson_list = QListWidget()
        self.lesson_list.setToolTip("Click a lesson, or select it and press Enter, to start it")
        self.lesson_list.itemClicked.connect(self._on_item_chosen)
        self.lesson_list.itemActivated.connect(self._on_item_chosen)

        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-weight: bold; font-size: 12pt;")
        self.counter = QLabel()
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        self.text.setOpenExternalLinks(False)
        self.text.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.text.anchorClicked.connect(self._on_link)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setFrameShape(QFrame.Shape.StyledPanel)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.setStyleSheet("QLabel { font-style: italic; padding: 4px; }")
        self.note.hide()

        self.back_button = QPushButton("◀ Back")
        self.back_button.setToolTip("Previous step (←)")
        self.back_button.clicked.connect(self.back)
        self.next_button = QPushButton("Next ▶")
        self.next_button.setToolTip("Next step (→ or Space)")
        self.next_button.setDefault(True)
        self.next_button.clicked.connect(self.next)
        self.restart_button = QPushButton("↺ Restart")
        self.restart_button.setToolTip("Start this lesson again from its first step")
        self.restart_button.clicked.connect(self.restart)

        # Shortcuts for the whole panel while focus is anywhere inside it.
        self.next_action = self._shortcut(
            "Next step", [Qt.Key.Key_Right, Qt.Key.Key_Space], self.next
        )
        self.back_action = self._shortcut("Previous step", [Qt.Key.Key_Left], self.back)

        step_box = QWidget()
        step_layout = QVBoxLayout(step_box)
        step_layout.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.counter, 0, Qt.AlignmentFlag.AlignTop)
        step_layout.addLayout(head)
        step_layout.addWidget(self.text, 1)
        step_layout.addWidget(self.note)
        buttons = QHBoxLayout()
        buttons.addWidget(self.back_button)
        buttons.addWidget(self.next_button)
        buttons.addStretch(1)
        buttons.addWidget(self.restart_button)
        step_layout.addLayout(buttons)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.lesson_list)
        splitter.addWidget(step_box)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 3)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumWidth(MIN_WIDTH)

    def _shortcut(self, text: str, keys: list[Qt.Key], slot: Callable[[], None]) -> QAction:
        action = QAction(text, self)
        action.setShortcuts([QKeySequence(k) for k in keys])
        action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _fill_list(self) -> None:
        with QSignalBlocker(self.lesson_list):
            current = self.lesson_list.currentRow()
            self.lesson_list.clear()
            for n, lesson in enumerate(self.lessons):
                item = QListWidgetItem(self._item_text(n, lesson))
                item.setData(Qt.ItemDataRole.UserRole, lesson.id)
                item.setToolTip(lesson.summary)
                self.lesson_list.addItem(item)
            if current >= 0:
                self.lesson_list.setCurrentRow(current)

    def _item_text(self, n: int, lesson: Lesson) -> str:
        text = f"{n + 1}. {lesson.title}"
        if self.is_done(lesson.id):
            return text + "  ✓"
        step = self.saved_step(lesson.id)
        if step > 0:
            text += f"  (step {step + 1} of {len(lesson.steps)})"
        return text

    # -- progress (QSettings) -----------------------------------------------------------------
    def saved_step(self, lesson_id: str) -> int:
        value = settings().value(_key("step", lesson_id), 0, type=int)
        return value if isinstance(value, int) else 0

    def is_done(self, lesson_id: str) -> bool:
        return bool(settings().value(_key("done", lesson_id), False, type=bool))

    def current_lesson_id(self) -> str | None:
        """The lesson shown (or, before any is started, the last one the user was in)."""
        if self.runner is not None:
            return self.runner.lesson.id
        value = settings().value(_key("current"), "")
        return str(value) if value else None

    def _save_progress(self) -> None:
        runner = self.runner
        if runner is None:
            return
        s = settings()
        s.setValue(_key("current"), runner.lesson.id)
        s.setValue(_key("step", runner.lesson.id), runner.index)
        if runner.at_end:
            s.setValue(_key("done", runner.lesson.id), True)
        s.sync()

    # -- moving ---------------------------------------------------------------------------------
    def lesson(self, lesson_id: str) -> Lesson:
        for lesson in self.lessons:
            if lesson.id == lesson_id:
                return lesson
        raise KeyError(f"no lesson {lesson_id!r}")

    def start_lesson(self, lesson_id: str, step: int | None = None) -> None:
        """Open a lesson at ``step`` (default: where the user left it) and set the window up."""
        lesson = self.lesson(lesson_id)
        starting = self.runner is None or self.runner.lesson.id != lesson_id
        if starting:
            if not self.window_api.confirm_discard():
                return  # the user kept their unsaved work
            self.window_api.session.mark_saved()  # saved or discarded: the lesson replaces it
        if step is None:
            step = 0 if self.is_done(lesson_id) else self.saved_step(lesson_id)
        step = max(0, min(step, len(lesson.steps) - 1))
        from attn_explorer.lessons.engine import LessonRunner

        self.runner = LessonRunner(self.window_api, lesson)
        with QSignalBlocker(self.lesson_list):
            self.lesson_list.setCurrentRow(self.lessons.index(lesson))
        runner = self.runner
        self._move(lambda: runner.start(step))

    def next(self) -> None:
        """Next step; at a lesson's last step, the next lesson."""
        runner = self.runner
        if runner is None:
            if self.lessons:
                self.start_lesson(self.current_lesson_id() or self.lessons[0].id)
            return
        if runner.at_end:
            position = self.lessons.index(runner.lesson)
            if position + 1 < len(self.lessons):
                self.start_lesson(self.lessons[position + 1].id, 0)
            return
        self._move(runner.next)

    def back(self) -> None:
        if self.runner is not None and self.runner.index > 0:
            self._move(self.runner.back)

    def restart(self) -> None:
        if self.runner is not None:
            settings().setValue(_key("done", self.runner.lesson.id), False)
            self._move(self.runner.restart)

    def _may_replace(self) -> bool:
        """A step that puts the lesson's numbers back would replace the session: when that
        session is a file the user opened or saved and has changes, ask first (Save /
        Discard / Cancel). Pokes at the lesson's own untitled numbers stay in Undo."""
        session = self.window_api.session
        runner = self.runner
        if runner is None or self.window_api.state.document.path is None or not session.dirty:
            return True
        return not runner.user_changed() or self.window_api.confirm_discard()

    def _move(self, how: Callable[[], object]) -> None:
        from attn_explorer.lessons.engine import LessonError

        runner = self.runner
        assert runner is not None
        if not self._may_replace():
            return  # the user kept their file's changes; the lesson stays where it was
        problem = ""
        session = self.window_api.session
        try:
            how()
        except LessonError as exc:
            problem = f"This step could not be set up: {exc}"
        if self.window_api.state.document.path is None and session.dirty:
            # Untitled numbers the lesson just set up: nothing of the user's is unsaved
            # (anything they poked at before is in Edit ▸ Undo).
            session.mark_saved()
        self._save_progress()
        self.show_step(problem)
        self._fill_list()
        self.stepShown.emit(runner.lesson.id, runner.index)

    # -- showing ----------------------------------------------------------------------------------
    def show_welcome(self) -> None:
        self.title.setText("Lessons")
        self.counter.setText("")
        self.set_text(WELCOME)
        self.note.hide()
        self.back_button.setEnabled(False)
        self.restart_button.setEnabled(False)
        self.next_button.setText("Start ▶")

    def show_step(self, problem: str = "") -> None:
        """Show the runner's current step: title, counter, text, note and buttons."""
        runner = self.runner
        if runner is None or runner.step is None:
            self.show_welcome()
            return
        lesson, index = runner.lesson, runner.index
        self.title.setText(f"{self.lessons.index(lesson) + 1}. {lesson.title}")
        self.counter.setText(f"Step {index + 1} of {len(lesson.steps)}")
        self.set_text(runner.step.text)
        note = problem or runner.note
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.back_button.setEnabled(index > 0)
        self.restart_button.setEnabled(True)
        last_lesson = self.lessons.index(lesson) == len(self.lessons) - 1
        if not runner.at_end:
            self.next_button.setText("Next ▶")
            self.next_button.setEnabled(True)
        else:
            self.next_button.setText("All done" if last_lesson else "Next lesson ▶")
            self.next_button.setEnabled(not last_lesson)

    def set_text(self, markdown: str) -> None:
        """Show a step's Markdown in the text browser (re-rendered when the palette changes)."""
        self._markdown = markdown
        self.text.setMarkdown(markdown)

    def changeEvent(self, event: QEvent) -> None:
        # The Markdown import bakes the palette's link colour in: render again for the new one.
        if event.type() == QEvent.Type.PaletteChange and self._markdown:
            self.text.setMarkdown(self._markdown)
        super().changeEvent(event)

    def _on_item_chosen(self, item: QListWidgetItem) -> None:
        lesson_id = item.data(Qt.ItemDataRole.UserRole)
        if self.runner is not None and self.runner.lesson.id == lesson_id:
            return  # already on it: keep the user's place
        self.start_lesson(lesson_id)

    def _on_link(self, url: QUrl) -> None:
        if url.scheme() == "control":
            self.window_api.highlight(url.path() or url.toString().split(":", 1)[1], 0)


# -- the dock in the window ---------------------------------------------------------------
class LessonsDock(QDockWidget):
    """The Lessons dock on the right, and the first-launch "Start here" button.

    The window puts :attr:`start_button` in its menu bar's corner and calls
    :meth:`open` from Help ▸ Lessons (F3); lessons play against ``api``, the window's
    command layer. The panel (and the lessons, read and checked from
    their files) is made when the dock is first shown or :attr:`panel` is first asked for,
    not at start-up, where the dock is hidden.
    """

    def __init__(
        self, window: QMainWindow, api: LessonWindow, lessons: list[Lesson] | None = None
    ) -> None:
        super().__init__("Lessons", window)
        self.setObjectName("lessons-dock")
        self._api = api
        self._lessons = lessons
        self._panel: LessonsPanel | None = None
        self.setAllowedAreas(
            Qt.DockWidgetArea.RightDockWidgetArea | Qt.DockWidgetArea.LeftDockWidgetArea
        )
        self.visibilityChanged.connect(self._on_visibility_changed)
        self.start_button = QPushButton("Start here: guided lessons")
        self.start_button.setToolTip(f"Open the lessons (Help ▸ Lessons, {SHORTCUT})")
        # A raised button with the "play" icon, not flat text in the menu bar: it reads as
        # something to press. Bold, so it is the first thing a newcomer sees.
        self.start_button.setIcon(
            self.start_button.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay)
        )
        self.start_button.setAutoDefault(False)
        bold = self.start_button.font()
        bold.setBold(True)
        # a font, not a style sheet: the text follows light and dark palettes
        self.start_button.setFont(bold)
        self.start_button.clicked.connect(lambda: self.open(start_first=True))
        self.start_button.setVisible(not settings().value(_key("welcomed"), False, type=bool))

    @property
    def panel(self) -> LessonsPanel:
        """The lessons panel, made on first use."""
        return self._make_panel()

    def _make_panel(self) -> LessonsPanel:
        if self._panel is None:
            self._panel = LessonsPanel(self._api, self._lessons)
            self._panel.stepShown.connect(lambda *_: self._welcomed())
            self.setWidget(self._panel)
        return self._panel

    def setVisible(self, visible: bool) -> None:
        if visible:  # before the dock first shows (F3, the View menu, a restored layout)
            self._make_panel()
        super().setVisible(visible)

    def _on_visibility_changed(self, visible: bool) -> None:
        # Closed by the user (not merely tabbed away): take the lesson's frame down too.
        if not visible and self.isHidden() and self._panel is not None:
            with contextlib.suppress(RuntimeError):  # the window is being destroyed
                self._panel.window_api.highlight(None)

    def _welcomed(self) -> None:
        settings().setValue(_key("welcomed"), True)
        self.start_button.hide()

    def open(self, *, start_first: bool = False) -> None:
        """Show the dock (sized to read comfortably) and give it the keyboard focus."""
        window = self.parentWidget()
        self.show()
        self.raise_()
        if isinstance(window, QMainWindow):
            window.resizeDocks([self], [DOCK_WIDTH], Qt.Orientation.Horizontal)
        panel = self.panel
        if start_first and panel.runner is None and panel.lessons:
            panel.start_lesson(panel.current_lesson_id() or panel.lessons[0].id)
        self._welcomed()
        panel.lesson_list.setFocus()
