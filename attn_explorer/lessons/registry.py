"""What a lesson may do: the action registry, ``ACTIONS``, and the controls it may point at.

Qt-free. A lesson file names actions by these names; :mod:`.engine` validates every
name and argument against this table (with :func:`.operations.check_arguments`) before
a lesson is ever run, so a typo fails a test, not a learner. Each action runs against
the *window API* typed by :class:`~attn_explorer.lessons.window.LessonWindow` (the
window's public actions) and nothing below it. What a lesson may check is in
:mod:`.checks`; the grammar both share (``Param``, ``Operation``) in :mod:`.operations`.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import Any

from attn_explorer.compute import GRANULARITIES, STAGES, STRATEGIES
from attn_explorer.lessons.operations import (
    SCORE_NAMES,
    Operation,
    Param,
    heatmaps_of,
    is_int,
    one_of,
)
from attn_explorer.lessons.window import LessonWindow
from attn_explorer.state.presets import PRESETS
from attn_explorer.state.types import MATRICES, Options

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
    "window",
    "batch",
    "heads",
    "tokens",
    "dim",
    "code_panel",
    "timing",
    "shape_label",
    "stepper",
    "model_sentences",
    "model_heads",
    "model_tokens",
)

#: How long a lesson's highlight stays: 0 = until the next step clears it.
HIGHLIGHT_FOREVER = 0


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
    bad = [k for k, v in extra.items() if not is_int(v)]
    return f"{', '.join(bad)} must be whole numbers" if bad else ""


def _check_option(args: dict[str, Any]) -> str:
    name, value = args.get("name"), args.get("value")
    types = {f.name: f.type for f in fields(Options)}
    if name not in types:
        return f"unknown option {name!r}; one of {', '.join(types)}"
    expected = types[name]
    ok = {"bool": isinstance(value, bool), "int": is_int(value), "str": isinstance(value, str)}
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


#: Models a lesson may open by name (ui.lessons.model_steps.INSTALLED_MODELS finds them).
LESSON_MODELS = ("smollm2",)


def _head_count(count: object) -> str:
    """A count of heads to ablate together: 1 … 16."""
    return "" if isinstance(count, int) and 1 <= count <= 16 else "1 … 16 heads"


_SCORE = Param("str", check=one_of(SCORE_NAMES))

_OPT = Param("int", required=False)
_STRATEGY = Param("str", check=one_of(STRATEGIES))
_MATRIX = Param("str", check=one_of(MATRICES))
_CELL = {"batch": Param("int"), "head": Param("int"), "i": Param("int"), "j": Param("int")}

ACTIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(
            "load_preset",
            {"name": Param("str", check=one_of(list(PRESETS)))},
            _load_preset,
            extra_check=_check_preset_kwargs,
            accepts_extra=True,
            doc="Load a preset's numbers and options (random takes batch, heads, tokens, dim, "
            "seed).",
        ),
        Operation("set_strategy", {"name": _STRATEGY}, lambda w, name: w.set_strategy(name)),
        Operation(
            "set_stage",
            {"name": Param("str", check=one_of(STAGES))},
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
                "strategy": Param("str", required=False, check=one_of(STRATEGIES)),
                "granularity": Param("str", required=False, check=one_of(GRANULARITIES)),
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
                "target": Param("str", check=one_of(HIGHLIGHT_TARGETS)),
                "for_ms": Param("int", required=False),
            },
            lambda w, target, for_ms=HIGHLIGHT_FOREVER: w.highlight(target, for_ms),
            replay=False,
        ),
        Operation(
            "show",
            {"target": Param("str", check=one_of(("stepper", "timing")))},
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
            lambda w, head: heatmaps_of(w).set_enlarged(head),
        ),
        Operation(
            "model.open",
            {"model": Param("str", check=one_of(LESSON_MODELS)), "text": Param("str")},
            lambda w, model, text: w.model_dock().open_model(model, text),
            doc="Open an installed model in the Model dock and read a text (waits for it).",
        ),
        Operation(
            "model.probe",
            {},
            lambda w: w.model_dock().read_probe(),
            doc="Press 'Repeated tokens': a seeded random word sequence, twice (waits for it).",
        ),
        Operation(
            "model.show_score",
            {"score": _SCORE},
            lambda w, score: w.model_dock().show_score(score),
            doc="Show the layers × heads heatmap of one head score.",
        ),
        Operation(
            "model.select_top_head",
            {"score": _SCORE},
            lambda w, score: w.model_dock().select_top_head(score),
            doc="Click the brightest cell of a head score's heatmap: that head opens.",
        ),
        Operation(
            "model.ablate_selected",
            {},
            lambda w: w.model_dock().ablate_selected(),
            doc="Press 'Ablate selected head': the next-token bars show both runs.",
        ),
        Operation(
            "model.compare",
            {"corrupt": Param("str")},
            lambda w, corrupt: w.model_dock().compare(corrupt),
            doc="Type a corrupted prompt beside the sentence; waits for the comparison.",
        ),
        Operation(
            "model.patch_heads",
            {},
            lambda w: w.model_dock().patch_heads(),
            doc="Press 'every head' on the Compare page's Patching tab (waits for the map).",
        ),
        Operation(
            "model.select_top_patched",
            {},
            lambda w: w.model_dock().select_top_patched(),
            doc="Click the head high in both the patching map and the attribution.",
        ),
        Operation(
            "model.ablate_top_patched",
            {"count": Param("int", check=_head_count)},
            lambda w, count: w.model_dock().ablate_top_patched(count),
            doc="Ablate the heads high in both maps together: the next-token bars show it.",
        ),
        Operation("run_timing", {}, lambda w: w.run_timing(), replay=False),
        Operation("run_sweep", {}, lambda w: w.run_sweep(), replay=False),
    )
}
