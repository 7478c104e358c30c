"""The two-prompt comparison's results, without Qt (issue 35): what the Compare view shows.

:class:`CompareState` holds the newest :class:`CompareOutcome` (the comparison of the
sentence with the corrupted prompt, the corrupted run's attention for the side-by-side
head, the direct logit attribution, both runs' next tokens) and what the patching scans
found for it: the layers × heads map, the layers × positions map and the last set of heads
patched together. A new outcome clears the scans (they belonged to the old pair); a bad
pair or a stopped scan changes nothing, so the previous results stay on screen.

The work is apart, in plain functions safe on a worker thread (:func:`compare_job`,
:func:`heads_job`, :func:`residual_job`, :func:`head_set_job`): each reads only the model
and its arguments, never the state. The state lives here, in the window's layer, rather
than in :mod:`attn_explorer.models.session`, because it holds :mod:`attn_explorer.analysis`
results and the layers contract keeps ``models`` below ``analysis``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.analysis.attribution import LogitAttribution, logit_attribution
from attn_explorer.analysis.compare import Comparison, compare
from attn_explorer.analysis.next_token import Candidate, next_token
from attn_explorer.analysis.patching import (
    estimate_seconds,
    patch_head_set,
    patch_heads,
    patch_residual,
)
from attn_explorer.analysis.report import plain
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.results import ModelAttention
from attn_explorer.state.events import Event

#: Next tokens listed per run in the bars (the answer and the wrong token are always added).
TOP_K = 8
#: A patching scan predicted to take longer than this asks before it starts (SmolLM2's
#: name prompts, 14 tokens, are estimated at 10-40 s for both maps, by the machine's load).
LONG_SCAN_S = 30.0

Progress = Callable[[float, str], None]
ShouldStop = Callable[[], bool]
Head = tuple[int, int]


@dataclass(frozen=True)
class CompareOutcome:
    """One comparison as the Compare view shows it (made by :func:`compare_job`)."""

    comparison: Comparison
    corrupt: ModelAttention  # the corrupted run's heads (L, H, T, T), for the side by side
    attribution: LogitAttribution
    clean_top: list[Candidate]
    corrupt_top: list[Candidate]
    answer: str  # the answer and wrong tokens as the model writes them
    wrong: str
    seconds: float  # estimated time of both patching maps (every head, the residual stream)


@dataclass(frozen=True)
class HeadSet:
    """Heads patched together from the clean run, and the logit difference they recover."""

    heads: tuple[Head, ...]
    recovered: float  # normalised: 0 = the corrupted run, 1 = the clean run


def compare_job(
    model: DecoderModel,
    clean: str,
    corrupt: str,
    answer: str | int | None,
    wrong: str | int | None,
) -> Callable[[Progress, ShouldStop], CompareOutcome]:
    """The worker's job: compare the two prompts, attribute, and run the corrupted prompt's
    attention; ``PairError`` for a bad pair (the caller words it)."""

    def job(progress: Progress, should_stop: ShouldStop) -> CompareOutcome:
        comparison = compare(model, clean, corrupt, answer, wrong, progress, should_stop)
        corrupt_run = model.attention(corrupt, should_stop=should_stop)
        readable = model.tokenizer.readable
        return CompareOutcome(
            comparison=comparison,
            corrupt=corrupt_run,
            attribution=logit_attribution(model, comparison),
            clean_top=next_token(comparison.clean_logits, readable, TOP_K),
            corrupt_top=next_token(comparison.corrupt_logits, readable, TOP_K),
            answer=readable(comparison.answer_id),
            wrong=readable(comparison.wrong_id),
            seconds=float(
                estimate_seconds(model, len(comparison.clean_tokens), comparison.first_diff)
            ),
        )

    return job


def heads_job(
    model: DecoderModel, comparison: Comparison
) -> Callable[[Progress, ShouldStop], tuple[str, np.ndarray]]:
    """The worker's job: patch every head alone, ("heads", (L, H) recovered)."""

    def job(progress: Progress, should_stop: ShouldStop) -> tuple[str, np.ndarray]:
        return "heads", patch_heads(model, comparison, progress, should_stop)

    return job


def residual_job(
    model: DecoderModel, comparison: Comparison
) -> Callable[[Progress, ShouldStop], tuple[str, np.ndarray]]:
    """The worker's job: patch the residual stream at each (layer, position), ("residual",
    (L, T) recovered)."""

    def job(progress: Progress, should_stop: ShouldStop) -> tuple[str, np.ndarray]:
        return "residual", patch_residual(model, comparison, progress, should_stop)

    return job


def head_set_job(
    model: DecoderModel, comparison: Comparison, heads: tuple[Head, ...]
) -> Callable[[Progress, ShouldStop], tuple[str, HeadSet]]:
    """The worker's job: patch ``heads`` together, ("set", :class:`HeadSet`)."""

    def job(progress: Progress, should_stop: ShouldStop) -> tuple[str, HeadSet]:
        return "set", HeadSet(heads, float(patch_head_set(model, comparison, heads)))

    return job


def parse_heads(text: str, layers: int, heads: int) -> tuple[Head, ...]:
    """Heads typed as ``layer.head`` from 1, separated by commas or spaces ("10.3, 9.6"),
    counted from 0; ``ValueError`` naming the first that is not a head of this model."""
    chosen: list[Head] = []
    for word in text.replace(",", " ").split():
        layer_text, dot, head_text = word.partition(".")
        if not dot or not layer_text.isdigit() or not head_text.isdigit():
            raise ValueError(f"{word!r} is not a head: write layer.head, e.g. 10.3")
        layer, head = int(layer_text), int(head_text)
        if not (1 <= layer <= layers and 1 <= head <= heads):
            raise ValueError(
                f"{word!r} is not a head of this model: layers 1 … {layers}, heads 1 … {heads}"
            )
        if (layer - 1, head - 1) not in chosen:
            chosen.append((layer - 1, head - 1))
    if not chosen:
        raise ValueError("no heads typed: write layer.head, e.g. 10.3, 9.6")
    return tuple(chosen)


def head_text(heads: tuple[Head, ...]) -> str:
    """``10.3, 9.6`` for ((9, 2), (8, 5)): the form :func:`parse_heads` reads."""
    return ", ".join(f"{layer + 1}.{head + 1}" for layer, head in heads)


class CompareStateEvents:
    """``outcome()``: a new comparison; ``maps()``: a patching map or a head set arrived."""

    def __init__(self) -> None:
        self.outcome = Event()
        self.maps = Event()


class CompareState:
    """The Compare view's single source of truth (see the module docstring)."""

    def __init__(self) -> None:
        self.events = CompareStateEvents()
        self.outcome: CompareOutcome | None = None
        self.heads: np.ndarray | None = None  # (L, H) normalised recovery, or None
        self.residual: np.ndarray | None = None  # (L, T)
        self.head_set: HeadSet | None = None

    def accept(self, outcome: CompareOutcome) -> None:
        """A new comparison: the scans of the old pair no longer apply."""
        self.outcome = outcome
        self.heads, self.residual, self.head_set = None, None, None
        self.events.outcome.emit()

    def accept_scan(self, outcome: tuple[str, object]) -> None:
        """A finished scan's result ("heads", "residual" or "set") for the current pair."""
        kind, value = outcome
        if kind == "set":
            assert isinstance(value, HeadSet)
            self.head_set = value
        else:
            assert isinstance(value, np.ndarray)
            setattr(self, kind, value)
        self.events.maps.emit()

    def clear(self) -> None:
        """No comparison (the corrupted prompt emptied, another model)."""
        if self.outcome is not None:
            self.outcome, self.heads, self.residual, self.head_set = None, None, None, None
            self.events.outcome.emit()


def circuit_heads(patched: np.ndarray, attributed: np.ndarray, count: int) -> list[Head]:
    """The ``count`` heads high in both maps, best first: each head's smaller share of the
    two maps' largest values (a head that recovers much of the difference when patched
    *and* writes much of it straight to the answer, as Wang et al. 2022 find name movers);
    heads low or negative in either are left out."""
    peak_patched, peak_attributed = float(np.max(patched)), float(np.max(attributed))
    if peak_patched <= 0 or peak_attributed <= 0:
        return []
    both = np.minimum(patched / peak_patched, attributed / peak_attributed)  # (L, H)
    order = np.argsort(-both, axis=None, kind="stable")[:count]
    heads = [divmod(int(i), patched.shape[1]) for i in order if both.flat[int(i)] > 0]
    return [(int(layer), int(head)) for layer, head in heads]


def comparison_json(state: CompareState) -> dict[str, object]:
    """The comparison as ``attn-explorer analyze --corrupt`` writes it (issue 35's keys):
    the clean ``input_ids`` and ``tokens``, then ``compare``, ``patching`` and
    ``logit_attribution``; ``ValueError`` until both patching maps are in."""
    outcome = state.outcome
    if outcome is None:
        raise ValueError("nothing compared yet: type a corrupted prompt first")
    if state.heads is None or state.residual is None:
        raise ValueError("patch every head and the residual stream first: the file holds both")
    c, a = outcome.comparison, outcome.attribution
    return {
        "input_ids": [int(i) for i in c.clean_ids],
        "tokens": list(c.clean_tokens),
        "compare": {
            "input_ids_corrupt": [int(i) for i in c.corrupt_ids],
            "tokens_corrupt": list(c.corrupt_tokens),
            "answer_id": int(c.answer_id),
            "wrong_id": int(c.wrong_id),
            "logit_diff_clean": float(c.logit_diff_clean),
            "logit_diff_corrupt": float(c.logit_diff_corrupt),
        },
        "patching": {"heads": plain(state.heads), "residual": plain(state.residual)},
        "logit_attribution": {
            "embed": float(a.embed),
            "attn": plain(np.asarray(a.attn)),
            "mlp": plain(np.asarray(a.mlp)),
            "heads": None if a.heads is None else plain(np.asarray(a.heads)),
            "total": float(a.total),
        },
    }
