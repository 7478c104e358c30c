"""What a lesson may check: the expectation registry, ``CHECKS``.

Qt-free. Each expectation reads one thing from the window the learner sees (the score
grid's numbers, an option, the stepper's counter, the code shown, ...) through
:class:`~attn_explorer.lessons.window.LessonWindow` and compares it with the lesson's
``equals`` or ``contains``; a failed check returns what was found instead, for the
lesson to show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attn_explorer.compute import strategy_source
from attn_explorer.lessons.operations import (
    SCORE_NAMES,
    Operation,
    Param,
    heatmaps_of,
    is_number,
    one_of,
)
from attn_explorer.lessons.window import LessonWindow
from attn_explorer.state.views.frame import Frame


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


def _keys_seen(window: LessonWindow) -> list[int]:
    """How many keys each query row of the shown head gives a weight above 0 (the mask's
    band, read from the result on screen); [] before the first result."""
    result = window.state.results.result
    if result is None:
        return []
    options = window.session.options
    weights = result.weights[options.batch_index, options.head]  # (T_q, T_k)
    return [int(n) for n in (weights > 0).sum(axis=-1)]


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
    "causal": (lambda w: w.session.options.causal, "bool"),
    "window": (lambda w: w.session.options.window, "int"),
    "keys_seen": (_keys_seen, "any"),
    "heads": (lambda w: w.session.shape[1], "int"),
    "batch": (lambda w: w.session.shape[0], "int"),
    "tokens": (lambda w: w.session.shape[2], "int"),
    "dim": (lambda w: w.session.shape[3], "int"),
    # the shapes whole: the read-out shows only Q, K, V's while a long message needs the room
    "shape_text": (lambda w: w.session.shape_text(), "str"),
    "counter": (lambda w: _frame_text(w, "counter"), "str"),
    "working": (lambda w: _frame_text(w, "working"), "str"),
    "step_count": (lambda w: getattr(_frame(w), "count", 0), "int"),
    "step_index": (lambda w: getattr(_frame(w), "index", -1), "int"),
    "summary": (lambda w: w.stepper.stepper.summary(), "str"),
    "prediction": (_prediction_text, "str"),
    "code": (lambda w: strategy_source(w.session.options.strategy), "str"),
    "enlarged": (lambda w: heatmaps_of(w).enlarged, "int_or_null"),
    "vectors_text": (lambda w: "\n".join(w.state.vectors.dot_lines()), "str"),
    "model_head": (lambda w: w.model_dock().selected_head(), "str"),
    "next_token": (lambda w: w.model_dock().next_token(), "str"),
    "ablated_next_token": (lambda w: w.model_dock().ablated_next_token(), "str"),
    "prediction_changed": (
        lambda w: w.model_dock().ablated_next_token() not in ("", w.model_dock().next_token()),
        "bool",
    ),
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


def _check_model_score(window: LessonWindow, score: str, at_least: float) -> str:
    """The selected head of the Model dock scores at least ``at_least`` on ``score``."""
    value = window.model_dock().head_score(score)
    if value is None or value < at_least:
        head = window.model_dock().selected_head() or "no head"
        return f"model_score: {head} has {score} {value!r}, expected at least {at_least}"
    return ""


def _check_patched(window: LessonWindow, at_least: float) -> str:
    """The selected head recovers at least ``at_least`` of the logit difference when patched."""
    value = window.model_dock().patched_recovery()
    if value is None or value < at_least:
        head = window.model_dock().selected_head() or "no head"
        return f"patched_recovery: {head} recovers {value!r}, expected at least {at_least}"
    return ""


def _check_ablated(window: LessonWindow, at_most: float) -> str:
    """Ablating drops the clean prediction's logit by at least ``-at_most``."""
    value = window.model_dock().ablated_logit_change()
    if value is None or value > at_most:
        return f"ablated_logit_change: {value!r}, expected at most {at_most}"
    return ""


CHECKS: dict[str, Operation] = {
    name: _make_check(name, read, kind) for name, (read, kind) in READERS.items()
}
CHECKS["cell"] = Operation(
    "cell",
    {
        "i": Param("int"),
        "j": Param("int"),
        "equals": Param("any", check=lambda v: "" if v is None or is_number(v) else "a number"),
    },
    _check_cell,
)
CHECKS["model_score"] = Operation(
    "model_score",
    {
        "score": Param("str", check=one_of(SCORE_NAMES)),
        "at_least": Param("number"),
    },
    _check_model_score,
)
CHECKS["patched_recovery"] = Operation(
    "patched_recovery", {"at_least": Param("number")}, _check_patched
)
CHECKS["ablated_logit_change"] = Operation(
    "ablated_logit_change", {"at_most": Param("number")}, _check_ablated
)
