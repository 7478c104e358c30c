"""The grammar every lesson operation shares: argument types, ``Param``, ``Operation``.

Qt-free. An action (:mod:`.registry`) or an expectation (:mod:`.checks`) is an
:class:`Operation`: a name, its arguments as :class:`Param` (a type from :data:`TYPES`,
required or not, an extra check) and the function that runs it.
:func:`check_arguments` holds one step's arguments to that, raising a
:class:`LessonError` that names the file, step and field, so a typo fails a test, not
a learner.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attn_explorer.lessons.window import Heatmaps, LessonWindow

#: The head scores a lesson may name: ``analysis.head_scores.SCORE_NAMES``, written out so
#: validating a lesson never imports the models (tests/test_lesson_files.py pins them equal).
SCORE_NAMES = ("previous_token", "first_token", "duplicate_token", "induction")


class LessonError(ValueError):
    """A lesson file is malformed: says which file, step and field, and what is allowed."""


def is_int(value: object) -> bool:
    """A whole number, and not a bool (JSON's true is not the count 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A real number, and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_grid(value: object) -> bool:
    """A rectangular list of rows of numbers or None (None = an empty cell)."""
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        return False
    width = len(value[0])
    return all(len(row) == width and all(c is None or is_number(c) for c in row) for row in value)


TYPES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "int": ("a whole number", is_int),
    "number": ("a number", is_number),
    "str": ("a string", lambda v: isinstance(v, str)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "any": ("any value", lambda v: True),
    "grid": ("a list of rows of numbers (null = empty cell)", _is_grid),
    "block": ("a list of rows of numbers", lambda v: _is_grid(v) and "None" not in repr(v)),
    "int_or_null": ("a whole number or null", lambda v: v is None or is_int(v)),
}


def one_of(allowed: tuple[str, ...] | list[str]) -> Callable[[object], str]:
    """A ``Param.check`` that allows only the names in ``allowed``."""

    def check(value: object) -> str:
        return "" if value in allowed else f"{value!r} is not one of {', '.join(allowed)}"

    return check


@dataclass(frozen=True)
class Param:
    """One argument: its type name (see ``TYPES``), whether it is required, extra checks."""

    type: str
    required: bool = True
    check: Callable[[object], str] | None = None  # returns "" or why the value is wrong


@dataclass(frozen=True)
class Operation:
    """A named action or expectation: its arguments and the function that runs it.

    ``replay`` marks actions that set up state (loaded numbers, options, the
    stepper's position): restoring a step replays them. Highlights, timing runs
    and play are shown once and not replayed.
    """

    name: str
    params: dict[str, Param]
    run: Callable[..., Any]
    replay: bool = True
    extra_check: Callable[[dict[str, Any]], str] | None = None
    doc: str = ""
    accepts_extra: bool = False
    #: "relative": moves the stepper from wherever it is; "absolute": puts it somewhere.
    stepper_move: str = ""


def check_arguments(op: Operation, args: dict[str, Any], where: str) -> None:
    """Raise LessonError if ``args`` do not fit ``op`` (unknown, missing or mistyped)."""
    given = {k: v for k, v in args.items() if k not in ("do", "check")}
    if not op.accepts_extra:
        unknown = sorted(set(given) - set(op.params))
        if unknown:
            allowed = ", ".join(op.params) or "no arguments"
            raise LessonError(
                f"{where}: {op.name} takes no argument {', '.join(unknown)} (it takes {allowed})"
            )
    for name, param in op.params.items():
        if name not in given:
            if param.required:
                raise LessonError(f"{where}: {op.name} needs the argument {name!r}")
            continue
        value = given[name]
        label, test = TYPES[param.type]
        if not test(value):
            raise LessonError(f"{where}: {op.name}.{name} must be {label}, got {value!r}")
        if param.check is not None:
            problem = param.check(value)
            if problem:
                raise LessonError(f"{where}: {op.name}.{name}: {problem}")
    if op.extra_check is not None:
        problem = op.extra_check(args)
        if problem:
            raise LessonError(f"{where}: {op.name}: {problem}")


def heatmaps_of(window: LessonWindow) -> Heatmaps:
    """The window's heatmaps, or a ``ValueError`` the lesson reports when they are not built."""
    if window.heatmaps is None:
        raise ValueError("the heatmaps are not built yet; point at them first (highlight)")
    return window.heatmaps
