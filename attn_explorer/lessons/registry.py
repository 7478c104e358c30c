"""What a lesson may do and check: the action and expectation registries.

Qt-free. A lesson file names operations by these names; :mod:`.engine` validates
every name and argument against this module before a lesson is ever run, so a
typo fails a test, not a learner. Each action runs against the *window API*
typed by :class:`~attn_explorer.lessons.window.LessonWindow` (the window's public
actions) and nothing below it.

One job at ~500 lines: the vocabulary of lessons. It is a table of small
operations, each a few lines; splitting it would scatter that one table.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from attn_explorer.compute import GRANULARITIES, STAGES, STRATEGIES, strategy_source
from attn_explorer.lessons.window import Heatmaps, LessonWindow
from attn_explorer.state.presets import PRESETS
from attn_explorer.state.types import MATRICES, Options
from attn_explorer.state.views.frame import Frame

#: Controls a lesson may point at: the window gives each of them this name as its Qt
#: object name, and ``ui.highlight.Highlighter`` finds them by it.
HIGHLIGHT_TARGETS = (
    "query_table",
    "key_table",
    "value_table",
    "score_grid",
    "heatmaps",
    "strategy_toggle",
    "stage",
    "scale",
    "causal",
    "batch",
    "heads",
    "tokens",
    "dim",
    "code_panel",
    "timing",
    "shape_label",
    "stepper",
)

#: How long a lesson's highlight stays: 0 = until the next step clears it.
HIGHLIGHT_FOREVER = 0


class LessonError(ValueError):
    """A lesson file is malformed: says which file, step and field, and what is allowed."""


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_grid(value: object) -> bool:
    """A rectangular list of rows of numbers or None (None = an empty cell)."""
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        return False
    width = len(value[0])
    return all(len(row) == width and all(c is None or _is_number(c) for c in row) for row in value)


TYPES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "int": ("a whole number", _is_int),
    "number": ("a number", _is_number),
    "str": ("a string", lambda v: isinstance(v, str)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "any": ("any value", lambda v: True),
    "grid": ("a list of rows of numbers (null = empty cell)", _is_grid),
    "block": ("a list of rows of numbers", lambda v: _is_grid(v) and "None" not in repr(v)),
    "int_or_null": ("a whole number or null", lambda v: v is None or _is_int(v)),
}


def _one_of(allowed: tuple[str, ...] | list[str]) -> Callable[[object], str]:
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


# -- actions -----------------------------------------------------------------------------
def _load_preset(window: LessonWindow, name: str, **kwargs: Any) -> None:
    window.load_preset(name, **kwargs)


def _check_preset_kwargs(args: dict[str, Any]) -> str:
    name = args.get("name")
    extra = {k: v for k, v in args.items() if k not in ("do", "name")}
    if name not in PRESETS or not extra:
        return ""
    accepted = set(inspect.signature(PRESETS[name]).parameters)
    unknown = sorted(set(extra) - accepted)
    if unknown:
        return f"preset {name!r} takes no argument {', '.join(unknown)}" + (
            f" (it takes {', '.join(sorted(accepted))})" if accepted else " (it takes none)"
        )
    bad = [k for k, v in extra.items() if not _is_int(v)]
    return f"{', '.join(bad)} must be whole numbers" if bad else ""


def _check_option(args: dict[str, Any]) -> str:
    name, value = args.get("name"), args.get("value")
    types = {f.name: f.type for f in fields(Options)}
    if name not in types:
        return f"unknown option {name!r}; one of {', '.join(types)}"
    expected = types[name]
    ok = {"bool": isinstance(value, bool), "int": _is_int(value), "str": isinstance(value, str)}
    return "" if ok.get(str(expected), True) else f"option {name} needs a {expected}, got {value!r}"


def _set_choices(
    window: LessonWindow,
    strategy: str | None = None,
    granularity: str | None = None,
    predict: Any = None,
) -> None:
    # The stepper follows the session: its choices are session options.
    session = window.session
    if strategy is not None:
        window.set_strategy(strategy)
    if granularity is not None:
        session.set_option("granularity", granularity)
    if predict is not None:
        session.set_option("predict", bool(predict))


def _reveal(window: LessonWindow, batch: int, head: int, i: int, j: int) -> None:
    """Show score cell (batch, head, i, j) whatever the learner did in predict mode.

    An open question about it is skipped (its answer is shown); an answered one
    stays up; if the learner moved elsewhere, the loop goes back and fills it.
    """
    cell = (batch, head, i, j)
    asking = window.stepper.stepper.prediction
    if asking is not None and asking.status == "asking" and asking.cell == cell:
        window.stepper.step_forward()
        return
    frame = window.stepper.frame()
    if frame is None or not frame.filled[cell]:
        window.stepper.seek_cell(*cell)
        frame = window.stepper.frame()
        if frame is None or not frame.filled[cell]:
            window.stepper.step_forward()


def _show_vectors(window: LessonWindow, i: int | None = None, j: int | None = None) -> None:
    """Open the vectors view on query i (and key j): the arrows behind score cell (i, j)."""
    window.open_vectors_view()
    if i is not None and j is not None:
        window.state.vectors.select_cell(i, j)
    else:
        window.state.vectors.select_query(i)


def _heatmaps(window: LessonWindow) -> Heatmaps:
    if window.heatmaps is None:
        raise ValueError("the heatmaps are not built yet; point at them first (highlight)")
    return window.heatmaps


def _show(window: LessonWindow, target: str) -> None:
    # highlight() raises the panel's dock; clearing at once leaves it raised, unframed.
    window.highlight(target, HIGHLIGHT_FOREVER)
    window.highlight(None)


def _set_block(
    window: LessonWindow,
    matrix: str,
    token: int,
    dim: int,
    block: list[list[float]],
    head: int | None = None,
    batch: int | None = None,
) -> None:
    window.session.set_block(matrix, token, dim, block, batch=batch, head=head)


def _set_cell(
    window: LessonWindow,
    matrix: str,
    token: int,
    dim: int,
    value: float,
    head: int | None = None,
    batch: int | None = None,
) -> None:
    window.session.set_cell(matrix, token, dim, value, batch=batch, head=head)


def _resize(window: LessonWindow, **sizes: int) -> None:
    window.session.resize(**sizes)


_OPT = Param("int", required=False)
_STRATEGY = Param("str", check=_one_of(STRATEGIES))
_MATRIX = Param("str", check=_one_of(MATRICES))
_CELL = {"batch": Param("int"), "head": Param("int"), "i": Param("int"), "j": Param("int")}

ACTIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(
            "load_preset",
            {"name": Param("str", check=_one_of(list(PRESETS)))},
            _load_preset,
            extra_check=_check_preset_kwargs,
            accepts_extra=True,
            doc="Load a preset's numbers and options (random takes batch, heads, tokens, dim, "
            "seed).",
        ),
        Operation("set_strategy", {"name": _STRATEGY}, lambda w, name: w.set_strategy(name)),
        Operation(
            "set_stage",
            {"name": Param("str", check=_one_of(STAGES))},
            lambda w, name: w.set_stage(name),
        ),
        Operation(
            "set_option",
            {"name": Param("str"), "value": Param("any")},
            lambda w, name, value: w.session.set_option(name, value),
            extra_check=_check_option,
        ),
        Operation(
            "resize",
            {"batch": _OPT, "heads": _OPT, "tokens": _OPT, "dim": _OPT},
            _resize,
            extra_check=lambda a: "" if set(a) - {"do"} else "resize needs at least one size",
        ),
        Operation(
            "set_cell",
            {
                "matrix": _MATRIX,
                "token": Param("int"),
                "dim": Param("int"),
                "value": Param("number"),
                "head": _OPT,
                "batch": _OPT,
            },
            _set_cell,
        ),
        Operation(
            "set_block",
            {
                "matrix": _MATRIX,
                "token": Param("int"),
                "dim": Param("int"),
                "block": Param("block"),
                "head": _OPT,
                "batch": _OPT,
            },
            _set_block,
        ),
        Operation(
            "stepper.set_choices",
            {
                "strategy": Param("str", required=False, check=_one_of(STRATEGIES)),
                "granularity": Param("str", required=False, check=_one_of(GRANULARITIES)),
                "predict": Param("bool", required=False),
            },
            _set_choices,
        ),
        Operation(
            "stepper.seek",
            {"index": Param("int")},
            lambda w, index: w.stepper.seek(index),
            stepper_move="absolute",
        ),
        Operation(
            "stepper.seek_cell",
            _CELL,
            lambda w, batch, head, i, j: w.stepper.seek_cell(batch, head, i, j),
            stepper_move="absolute",
        ),
        Operation("stepper.to_start", {}, lambda w: w.stepper.to_start(), stepper_move="absolute"),
        Operation("stepper.to_end", {}, lambda w: w.stepper.to_end(), stepper_move="absolute"),
        Operation(
            "stepper.step_forward",
            {},
            lambda w: w.stepper.step_forward(),
            stepper_move="relative",
        ),
        Operation(
            "stepper.step_back", {}, lambda w: w.stepper.step_back(), stepper_move="relative"
        ),
        Operation("stepper.stop", {}, lambda w: w.stepper.stop(), stepper_move="absolute"),
        Operation(
            "stepper.reveal",
            _CELL,
            _reveal,
            stepper_move="absolute",
            doc="Fill one score cell, showing predict mode's verdict if there is one.",
        ),
        Operation(
            "stepper.play",
            {},
            lambda w: w.stepper.play(),
            replay=False,
            stepper_move="relative",
        ),
        Operation("stepper.pause", {}, lambda w: w.stepper.pause()),
        Operation(
            "highlight",
            {
                "target": Param("str", check=_one_of(HIGHLIGHT_TARGETS)),
                "for_ms": Param("int", required=False),
            },
            lambda w, target, for_ms=HIGHLIGHT_FOREVER: w.highlight(target, for_ms),
            replay=False,
        ),
        Operation(
            "show",
            {"target": Param("str", check=_one_of(("stepper", "timing")))},
            _show,
            replay=False,
            doc="Bring the stepper or timing panel to the front without framing it.",
        ),
        Operation(
            "vectors.show",
            {"i": _OPT, "j": _OPT},
            _show_vectors,
            doc="Show queries and keys as arrows, with q_i and k_j highlighted.",
        ),
        Operation(
            "enlarge_head",
            {"head": Param("int_or_null")},
            lambda w, head: _heatmaps(w).set_enlarged(head),
        ),
        Operation("run_timing", {}, lambda w: w.run_timing(), replay=False),
        Operation("run_sweep", {}, lambda w: w.run_sweep(), replay=False),
    )
}


# -- expectations ------------------------------------------------------------------------
def _grid_numbers(window: LessonWindow) -> list[list[float | None]]:
    """The score grid as the user reads it: numbers, None for empty cells."""
    out: list[list[float | None]] = []
    for row in window.score_grid.text_grid():
        cells: list[float | None] = []
        for text in row:
            text = text.replace("−", "-")
            try:
                cells.append(float(text) if text not in ("", "…") else None)
            except ValueError:
                cells.append(None)
        out.append(cells)
    return out


def _frame(window: LessonWindow) -> Frame | None:
    return window.stepper.frame()


def _frame_text(window: LessonWindow, attribute: str) -> str:
    frame = _frame(window)
    return "" if frame is None else str(getattr(frame, attribute))


def _prediction_text(window: LessonWindow) -> str:
    frame = _frame(window)
    return "" if frame is None or frame.prediction is None else frame.prediction.text


#: name → (how to read the value from the window, the type of its ``equals`` argument)
READERS: dict[str, tuple[Callable[[LessonWindow], object], str]] = {
    "grid": (_grid_numbers, "grid"),
    "strategy": (lambda w: w.session.options.strategy, "str"),
    "stage": (lambda w: w.session.options.stage, "str"),
    "granularity": (lambda w: w.session.options.granularity, "str"),
    "predict": (lambda w: w.session.options.predict, "bool"),
    "heads": (lambda w: w.session.shape[1], "int"),
    "batch": (lambda w: w.session.shape[0], "int"),
    "tokens": (lambda w: w.session.shape[2], "int"),
    "dim": (lambda w: w.session.shape[3], "int"),
    "shape_text": (lambda w: w.shape_label.text(), "str"),
    "counter": (lambda w: _frame_text(w, "counter"), "str"),
    "working": (lambda w: _frame_text(w, "working"), "str"),
    "step_count": (lambda w: getattr(_frame(w), "count", 0), "int"),
    "step_index": (lambda w: getattr(_frame(w), "index", -1), "int"),
    "summary": (lambda w: w.stepper.stepper.summary(), "str"),
    "prediction": (_prediction_text, "str"),
    "code": (lambda w: strategy_source(w.session.options.strategy), "str"),
    "enlarged": (lambda w: _heatmaps(w).enlarged, "int_or_null"),
    "vectors_text": (lambda w: "\n".join(w.state.vectors.dot_lines()), "str"),
}


def _make_check(name: str, read: Callable[[LessonWindow], object], kind: str) -> Operation:
    def run(window: LessonWindow, equals: Any = None, contains: Any = None) -> str:
        """Empty string if the expectation holds, else what was found instead."""
        actual = read(window)
        if equals is not None:
            if kind == "grid":
                ok = actual == [[None if c is None else float(c) for c in row] for row in equals]
            else:
                ok = actual == equals
            if not ok:
                return f"{name}: expected {equals!r}, found {actual!r}"
        if contains is not None:
            parts = contains if isinstance(contains, list) else [contains]
            missing = [p for p in parts if p not in str(actual)]
            if missing:
                return f"{name}: expected to contain {missing!r}, found {actual!r}"
        return ""

    params = {
        "equals": Param(kind, required=False),
        "contains": Param("any", required=False),
    }

    def exactly_one(args: dict[str, Any]) -> str:
        given = [k for k in ("equals", "contains") if k in args]
        if len(given) == 0:
            return "an expectation needs 'equals' or 'contains'"
        contains = args.get("contains")
        if contains is not None and not (
            isinstance(contains, str)
            or (isinstance(contains, list) and all(isinstance(c, str) for c in contains))
        ):
            return "'contains' takes a string or a list of strings"
        return ""

    return Operation(name, params, run, extra_check=exactly_one)


def _check_cell(window: LessonWindow, i: int, j: int, equals: float | None) -> str:
    grid = _grid_numbers(window)
    if not (0 <= i < len(grid) and 0 <= j < len(grid[i])):
        return f"cell ({i}, {j}): the grid is {len(grid)}×{len(grid[0]) if grid else 0}"
    actual = grid[i][j]
    if actual != (None if equals is None else float(equals)):
        return f"cell ({i}, {j}): expected {equals!r}, found {actual!r}"
    return ""


CHECKS: dict[str, Operation] = {
    name: _make_check(name, read, kind) for name, (read, kind) in READERS.items()
}
CHECKS["cell"] = Operation(
    "cell",
    {
        "i": Param("int"),
        "j": Param("int"),
        "equals": Param("any", check=lambda v: "" if v is None or _is_number(v) else "a number"),
    },
    _check_cell,
)


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
