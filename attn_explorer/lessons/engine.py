"""Lessons: load and validate the lesson files, and play them against the window.

Qt-free. A lesson is data (one JSON file per lesson next to this module): a
title and steps, each step some Markdown text, a list of *actions* and optional
*expectations*, named from :mod:`.registry` and :mod:`.checks`. :func:`load_lessons`
checks every name and argument before anything runs; :class:`LessonRunner` plays the
steps against a window API object and remembers the session as the lesson
left it, so Next can tell whether the user changed it in between and, if so,
put the lesson's state back first.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from attn_explorer.lessons.checks import CHECKS
from attn_explorer.lessons.operations import LessonError, check_arguments
from attn_explorer.lessons.registry import ACTIONS, HIGHLIGHT_TARGETS
from attn_explorer.lessons.window import LessonWindow
from attn_explorer.state.session import Session
from attn_explorer.state.types import Options

STEP_KEYS = {"text", "actions", "expect", "requires_module", "missing_module"}
LESSON_KEYS = {"title", "summary", "steps"}
#: Markdown links ``[heads](control:heads)`` in a step's text point at a control.
CONTROL_LINK = re.compile(r"\]\(control:([^)]*)\)")

RESTORED_NOTE = (
    "You changed the example since the last step, so the lesson put its own numbers and "
    "settings back before going on. Your edits are still in Edit ▸ Undo."
)


@dataclass(frozen=True)
class Step:
    """One screen of a lesson: what to read, what the window does, what must then hold."""

    text: str
    actions: tuple[dict[str, Any], ...]
    expect: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Lesson:
    """A lesson file, validated: ``id`` is the file name without ``.json``."""

    id: str
    title: str
    summary: str
    steps: tuple[Step, ...]


def module_available(name: str) -> bool:
    """True if module ``name`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _validate_ops(items: object, registry: dict[str, Any], key: str, where: str) -> tuple:
    if not isinstance(items, list):
        raise LessonError(f"{where}: '{key}' must be a list")
    out = []
    for n, item in enumerate(items):
        here = f"{where}, {key}[{n}]"
        if not isinstance(item, dict) or not isinstance(item.get(key_name(key)), str):
            raise LessonError(f"{here}: expected an object with a '{key_name(key)}' name")
        name = item[key_name(key)]
        if name not in registry:
            raise LessonError(
                f"{here}: unknown {'action' if key == 'actions' else 'expectation'} {name!r}; "
                f"one of {', '.join(sorted(registry))}"
            )
        check_arguments(registry[name], item, here)
        out.append(dict(item))
    return tuple(out)


def key_name(key: str) -> str:
    """The field naming the operation: ``"do"`` in actions, ``"check"`` in expectations."""
    return "do" if key == "actions" else "check"


def _check_stepper_moves(actions: tuple[dict[str, Any], ...], where: str) -> None:
    """A step that steps relative to where the stepper is must first put it somewhere.

    Otherwise Next would continue from wherever the learner left the stepper.
    """
    positioned = False
    for action in actions:
        move = ACTIONS[action["do"]].stepper_move
        if move == "absolute":
            positioned = True
        elif move == "relative" and not positioned:
            raise LessonError(
                f"{where}: {action['do']} moves from wherever the learner left the stepper; "
                "put it somewhere first (stepper.seek, seek_cell, to_start or to_end)"
            )


def parse_lesson(data: object, lesson_id: str, *, source: str = "") -> Lesson:
    """Validate one lesson's decoded JSON; LessonError says which step and field is wrong.

    Steps whose ``requires_module`` cannot be imported are left out (a lesson may
    mention an optional feature only when it is installed), and steps with a
    ``missing_module`` only appear when that module is absent (the note that says what
    to install and what was skipped).
    """
    where = source or lesson_id
    if not isinstance(data, dict):
        raise LessonError(f"{where}: a lesson is a JSON object with a title and steps")
    unknown = sorted(set(data) - LESSON_KEYS)
    if unknown:
        raise LessonError(f"{where}: unknown field {', '.join(unknown)}; allowed: title, steps")
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise LessonError(f"{where}: 'title' must be a non-empty string")
    summary = data.get("summary", "")
    if not isinstance(summary, str):
        raise LessonError(f"{where}: 'summary' must be a string")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise LessonError(f"{where}: 'steps' must be a non-empty list")
    steps = []
    for n, raw in enumerate(raw_steps):
        here = f"{where}, step {n + 1}"
        if not isinstance(raw, dict):
            raise LessonError(f"{here}: a step is an object with text and actions")
        unknown = sorted(set(raw) - STEP_KEYS)
        if unknown:
            allowed = ", ".join(sorted(STEP_KEYS))
            raise LessonError(f"{here}: unknown field {', '.join(unknown)}; allowed: {allowed}")
        text = raw.get("text")
        if not isinstance(text, str) or not text.strip():
            raise LessonError(f"{here}: 'text' must be a non-empty string")
        for target in CONTROL_LINK.findall(text):
            if target not in HIGHLIGHT_TARGETS:
                raise LessonError(
                    f"{here}: the link control:{target} names no control; "
                    f"one of {', '.join(HIGHLIGHT_TARGETS)}"
                )
        actions = _validate_ops(raw.get("actions", []), ACTIONS, "actions", here)
        expect = _validate_ops(raw.get("expect", []), CHECKS, "expect", here)
        required = raw.get("requires_module")
        if required is not None and not isinstance(required, str):
            raise LessonError(f"{here}: 'requires_module' must be a module name")
        if required and not module_available(required):
            continue
        missing = raw.get("missing_module")
        if missing is not None and not isinstance(missing, str):
            raise LessonError(f"{here}: 'missing_module' must be a module name")
        if missing and module_available(missing):
            continue
        _check_stepper_moves(actions, here)
        steps.append(Step(text.strip(), actions, expect))
    first = steps[0].actions[0] if steps and steps[0].actions else None
    if first is None or first["do"] != "load_preset":
        # Restoring replays from the first step, so it must set every number itself.
        raise LessonError(f"{where}, step 1: the first action must be load_preset")
    return Lesson(lesson_id, title.strip(), summary.strip(), tuple(steps))


def load_lesson(path: str | Path) -> Lesson:
    """Read and validate one lesson file (LessonError for bad JSON or a bad lesson)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LessonError(f"{path.name}: cannot read the lesson file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise LessonError(
            f"{path.name}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    return parse_lesson(data, path.stem, source=path.name)


def lesson_paths() -> list[Path]:
    """The shipped lesson files, in teaching order (their names start with a number)."""
    folder = resources.files("attn_explorer.lessons")
    return sorted(
        (Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".json")),
        key=lambda p: p.name,
    )


def load_lessons() -> list[Lesson]:
    """Every shipped lesson, validated."""
    return [load_lesson(path) for path in lesson_paths()]


# -- playing a lesson ----------------------------------------------------------------------
def run_action(window: LessonWindow, action: dict[str, Any]) -> None:
    """Run one validated action against the window API."""
    op = ACTIONS[action["do"]]
    op.run(window, **{k: v for k, v in action.items() if k != "do"})


def check_expectation(window: LessonWindow, expectation: dict[str, Any]) -> str:
    """Empty string if the expectation holds; otherwise what was found instead."""
    op = CHECKS[expectation["check"]]
    return str(op.run(window, **{k: v for k, v in expectation.items() if k != "check"}))


def session_fingerprint(session: Session) -> tuple[object, ...]:
    """What a lesson step sets up: numbers, names and options, minus where the user looks.

    The stepper's position and the selected head/batch entry are left out: moving
    through the loop or looking at another head is the poking a lesson invites.
    """
    snap = session.snapshot()
    options = replace(session.options, step=-1, head=0, batch_index=0)
    return (
        snap.tokens,
        snap.query.shape,
        snap.query.tobytes(),
        snap.key.tobytes(),
        snap.value.tobytes(),
        options,
    )


class LessonRunner:
    """Plays one lesson's steps against ``window`` and keeps the lesson's own state.

    ``index`` is the step on screen (-1 before the first). After each step the
    session's fingerprint is recorded; :meth:`next` compares it with the session
    now and, if the user changed something, replays the setup of every step so
    far (see ``Operation.replay``) before running the next one, and sets
    ``note`` to say so.
    """

    def __init__(self, window: LessonWindow, lesson: Lesson) -> None:
        self.window = window
        self.lesson = lesson
        self.index = -1
        self.note = ""
        self._recorded: tuple[int, tuple[object, ...]] | None = None
        self._recorded_options: Options | None = None

    @property
    def step(self) -> Step | None:
        return self.lesson.steps[self.index] if self.index >= 0 else None

    @property
    def at_end(self) -> bool:
        return self.index >= len(self.lesson.steps) - 1

    def user_changed(self) -> bool:
        """True if the session differs from what the current step left."""
        if self._recorded is None:
            return False
        revision, fingerprint = self._recorded
        session = self.window.session
        if session.revision == revision and session.options == self._recorded_options:
            return False
        return _differs(session_fingerprint(session), fingerprint)

    def _record(self) -> None:
        session = self.window.session
        self._recorded = (session.revision, session_fingerprint(session))
        self._recorded_options = session.options

    def _run(self, actions: tuple[dict[str, Any], ...], *, replay_only: bool = False) -> None:
        for action in actions:
            if replay_only and not ACTIONS[action["do"]].replay:
                continue
            try:
                run_action(self.window, action)
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise LessonError(
                    f"{self.lesson.id}, step {self.index + 1}: {action['do']} failed: {exc}"
                ) from exc

    def go_to(self, index: int, *, note: str = "") -> None:
        """Show step ``index`` from scratch: replay the setup of the steps before, then run it."""
        index = max(0, min(index, len(self.lesson.steps) - 1))
        self.window.highlight(None)
        for n in range(index):
            self.index = n
            self._run(self.lesson.steps[n].actions, replay_only=True)
        self.index = index
        self._run(self.lesson.steps[index].actions)
        self.note = note
        self._record()

    def start(self, index: int = 0) -> None:
        """Begin (or resume) the lesson at step ``index``."""
        self.go_to(index)

    def next(self) -> bool:
        """Go on to the next step, restoring the lesson's state first if the user changed it."""
        if self.at_end:
            return False
        if self.index < 0 or self.user_changed():
            self.go_to(self.index + 1, note=RESTORED_NOTE if self.index >= 0 else "")
            return True
        self.window.highlight(None)
        self.index += 1
        self._run(self.lesson.steps[self.index].actions)
        self.note = ""
        self._record()
        return True

    def back(self) -> bool:
        """Show the previous step as the lesson set it up (always replayed)."""
        if self.index <= 0:
            return False
        changed = self.user_changed()
        self.go_to(self.index - 1, note=RESTORED_NOTE if changed else "")
        return True

    def restart(self) -> None:
        self.go_to(0)

    def failures(self) -> list[str]:
        """The current step's expectations that do not hold (empty when all hold)."""
        step = self.step
        if step is None:
            return []
        found = [check_expectation(self.window, e) for e in step.expect]
        return [f"{self.lesson.id}, step {self.index + 1}: {f}" for f in found if f]


def _differs(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return any(x != y for x, y in zip(a, b, strict=True))
