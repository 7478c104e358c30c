"""The model view's state, without Qt: which model and sentence, the newest result, the head.

A :class:`ModelSession` holds what the user asked for (model folder or ``.gguf`` file,
sentence, optional second sentence, strategy), the newest
:class:`~attn_explorer.models.ModelAttention`, the selected (layer, head), whether raw
scores or softmax weights are shown, and the newest :class:`GenerationState` of a
decoder writing a continuation. Views subscribe to :class:`ModelSessionEvents` and read
everything else from the session.

One job: the model view's state. The work is apart, in plain functions safe on a
worker thread that read only their request and the thread-safe model cache, never the
session: the attention in :mod:`attn_explorer.models.requests`
(:func:`~attn_explorer.models.requests.compute_attention`), the generation in
:mod:`attn_explorer.models.generation`
(:func:`~attn_explorer.models.generation.generate_tokens`). Layers and heads count from
0 here, as Python does; every sentence meant for a person counts them from 1
("layer 2 · head 3").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attn_explorer.compute import STRATEGIES
from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.generation import STOP_REASONS, GenerationRequest, GenerationState
from attn_explorer.models.long_context import PASS_WATCH
from attn_explorer.models.requests import (
    AttentionRequest,
    ModelCache,
    RequestFailed,
    answer,
    never_stop,
)
from attn_explorer.models.results import HeadValues, ModelAttention, TakenHead
from attn_explorer.state.colormaps import range_from_extremes, value_range
from attn_explorer.state.events import Event

#: (layer, head), counted from 0.
Head = tuple[int, int]


#: Most values per axis the enlarged head is drawn with; a longer head is shown in blocks.
DETAIL_PIXELS = 1024


@dataclass(frozen=True)
class ShownValues:
    """What the heatmaps colour: (L, H, T, T) values, their colour scale and its label.

    ``colormap`` names an entry of :data:`attn_explorer.state.colormaps.COLORMAPS`.
    A long text's ``values`` are a :class:`HeadStack` (each head recomputed when read)
    and ``thumbnails`` its (L, H, n, n) block previews, NaN where a block has no
    visible key; otherwise the thumbnails are the values themselves.
    """

    values: HeadValues
    levels: tuple[float, float]
    colormap: str
    label: str
    thumbnails: np.ndarray | None = None

    @property
    def grid(self) -> np.ndarray:
        """What the layers × heads thumbnails draw: (L, H, T, T) or (L, H, n, n) values."""
        if self.thumbnails is not None:
            return self.thumbnails
        assert isinstance(self.values, np.ndarray)
        return self.values

    def head(
        self, layer: int, head: int, should_stop: Callable[[], bool] | None = None
    ) -> np.ndarray:
        """One head as the enlarged view draws it: (T, T), or at most DETAIL_PIXELS a side
        in blocks (each its largest weight, or its raw score farthest from 0) when longer.

        A long text's head is recomputed (a second or so at 8 192 tokens: call it on a
        worker, with ``should_stop``, which raises ``Cancelled`` between row chunks)."""
        if isinstance(self.values, HeadStack):
            return self.values.reduced(layer, head, DETAIL_PIXELS, should_stop)
        values: np.ndarray = self.values[layer, head]
        return values

    def preview(self, layer: int, head: int) -> np.ndarray | None:
        """A long text's block preview of one head (n, n), already in memory; else None."""
        if self.thumbnails is None:
            return None
        preview: np.ndarray = self.thumbnails[layer, head]
        return preview


class PassWatch:
    """A long pass's :class:`LongStats`, handed from the worker to the view as it starts.

    The worker's job assigns :attr:`stats` once, before layer 1 (``ModelSession.run(...,
    watch=)``); the view reads only the layers the pass's progress has reported done,
    whose previews the pass never writes again.
    """

    def __init__(self, paced: bool = False) -> None:
        self.stats: LongStats | None = None
        self.paced = paced  # the pass waits at each layer's end for the view's redraw

    def see(self, stats: LongStats) -> None:
        stats.paced = self.paced
        self.stats = stats

    def layers_done(self, fraction: float) -> int:
        """How many layers are finished when the pass reports ``fraction`` (after a layer)."""
        if self.stats is None:
            return 0
        return min(self.stats.layers, math.floor(fraction * self.stats.layers + 1e-6))


def layer_previews(stats: LongStats, layer: int, scores: bool) -> np.ndarray:
    """One finished layer's (H, n, n) block previews as the grid draws them mid-pass: the
    weights, or the raw scores with NaN where a block has no visible key."""
    if scores:
        block = stats.scores_preview[layer]
        return np.where(np.isneginf(block), np.float32(np.nan), block)
    weights: np.ndarray = stats.weights_preview[layer]
    return weights


def shown_values(result: ModelAttention, scores: bool) -> ShownValues:
    """Softmax weights (sequential, 0 → 1) or raw Q·Kᵀ scores (diverging, symmetric about 0).

    The scores' range is shared by every head, so colours compare across the grid (a
    long text's: over the visible keys its pass saw).
    """
    long = result.long
    if long is not None:
        if scores:
            bound = range_from_extremes(long.score_low, long.score_high, diverging=True)
            blocks = np.where(
                np.isneginf(long.scores_preview), np.float32(np.nan), long.scores_preview
            )
            return ShownValues(result.scores, bound, "diverging", "raw score Q·Kᵀ", blocks)
        preview = long.weights_preview
        return ShownValues(result.weights, (0.0, 1.0), "sequential", "softmax weight", preview)
    if scores:
        assert isinstance(result.scores, np.ndarray)
        bound = value_range(result.scores, diverging=True)
        return ShownValues(result.scores, bound, "diverging", "raw score Q·Kᵀ")
    return ShownValues(result.weights, (0.0, 1.0), "sequential", "softmax weight")


def head_name(layer: int, head: int) -> str:
    """``layer 2 · head 3`` for (1, 2): layers and heads are shown from 1."""
    return f"layer {layer + 1} · head {head + 1}"


class ModelSessionEvents:
    """The model session's events, one per kind of change.

    - ``request()``: the folder, sentence, second sentence or strategy changed
    - ``result()``: a new result replaced the old one
    - ``selection(layer, head)``: another head is selected
    - ``values()``: raw scores ↔ softmax weights
    - ``message(text, level)``: a line for the status, ``level`` ``"info"`` or ``"error"``
    - ``generation()``: a generation started, wrote a token, ended or was cleared
    - ``compare()``: the corrupted prompt, the answer or the wrong token changed
    """

    def __init__(self) -> None:
        self.request = Event()
        self.result = Event()
        self.selection = Event()
        self.values = Event()
        self.message = Event()
        self.generation = Event()
        self.compare = Event()


class ModelSession:
    """The model view's single source of truth: the request, the newest result, the head."""

    def __init__(self, cache: ModelCache | None = None) -> None:
        self.events = ModelSessionEvents()
        self.cache = cache if cache is not None else ModelCache()
        self._folder: str | None = None
        self._text = ""
        self._pair = ""
        self._corrupt = ""  # the corrupted prompt a decoder's run is compared with
        self._answer: str | int = ""  # '' = the default; text typed, or a token id picked
        self._wrong: str | int = ""
        self._strategy = "batched"
        self._result: ModelAttention | None = None
        self._selected: Head = (0, 0)
        self._show_scores = False
        self._shown: ShownValues | None = None  # shown_values() of the result, computed once
        self._generation: GenerationState | None = None

    # -- the request ---------------------------------------------------------------------

    @property
    def folder(self) -> str | None:
        """The chosen model's folder, or None."""
        return self._folder

    @property
    def text(self) -> str:
        return self._text

    @property
    def pair(self) -> str:
        """The optional second sentence ('' for none)."""
        return self._pair

    @property
    def strategy(self) -> str:
        return self._strategy

    def set_folder(self, folder: str | None) -> None:
        self._set_request_field("_folder", folder or None)

    def set_text(self, text: str) -> None:
        self._set_request_field("_text", text)

    def set_pair(self, pair: str) -> None:
        self._set_request_field("_pair", pair)

    def set_strategy(self, strategy: str) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}.")
        self._set_request_field("_strategy", strategy)

    # -- the comparison's request (issue 35): its own event, not a new forward pass --------

    @property
    def corrupt(self) -> str:
        """The corrupted prompt compared with the sentence ('' for none)."""
        return self._corrupt

    @property
    def answer(self) -> str | int:
        """The answer token: '' for the default, its text as typed, or a picked token id."""
        return self._answer

    @property
    def wrong(self) -> str | int:
        """The wrong token: '' for the default, its text as typed, or a picked token id."""
        return self._wrong

    def set_corrupt(self, text: str) -> None:
        self._set_compare_field("_corrupt", text)

    def set_answer(self, answer: str | int) -> None:
        self._set_compare_field("_answer", answer)

    def set_wrong(self, wrong: str | int) -> None:
        self._set_compare_field("_wrong", wrong)

    def _set_compare_field(self, name: str, value: str | int) -> None:
        if getattr(self, name) != value or type(getattr(self, name)) is not type(value):
            setattr(self, name, value)
            self.events.compare.emit()

    def _set_request_field(self, name: str, value: str | None) -> None:
        if getattr(self, name) != value:
            setattr(self, name, value)
            self.events.request.emit()

    def request(self) -> AttentionRequest:
        """The current request; ``ValueError`` with the user's next step when it is incomplete."""
        if self._folder is None:
            raise ValueError("Choose a model first (or open a model folder).")
        if not self._text.strip():
            raise ValueError("The sentence is empty: type some words.")
        return AttentionRequest(self._folder, self._text, self._pair or None, self._strategy)

    def start(self) -> AttentionRequest | None:
        """The request to run now, announced as "Computing…"; None (and why) when incomplete."""
        try:
            request = self.request()
        except ValueError as exc:
            self.events.message.emit(str(exc), "error")
            return None
        self.events.message.emit("Computing…", "info")
        return request

    def run(
        self,
        request: AttentionRequest,
        should_stop: Callable[[], bool] = never_stop,
        progress: Callable[[float, str], None] | None = None,
        watch: PassWatch | None = None,
    ) -> ModelAttention | RequestFailed:
        """Answer ``request`` (any thread): the attention, or why there is none.

        ``progress(fraction, text)`` hears a decoder's pass layer by layer; a long pass
        hands its LongStats to ``watch`` before layer 1 (its previews fill as layers end).
        """
        token = PASS_WATCH.set(watch.see if watch is not None else None)
        try:
            outcome = answer(self.cache, request, should_stop, progress)
        finally:
            PASS_WATCH.reset(token)
        if isinstance(outcome, ModelAttention) and outcome.long is not None:
            outcome.long.means()  # its pattern counts, here rather than on the GUI thread
        return outcome

    def accept(self, outcome: ModelAttention | RequestFailed) -> None:
        """Take a request's outcome: a new result, or its failure for the status line.

        A failure keeps the previous result on screen.
        """
        if isinstance(outcome, RequestFailed):
            self.events.message.emit(outcome.message, "error")
            return
        self._result = outcome
        self._shown = None
        n_layers, n_heads = outcome.weights.shape[:2]
        layer, head = self._selected
        self._selected = (min(layer, n_layers - 1), min(head, n_heads - 1))
        self.events.result.emit()
        self.events.message.emit(self.status(), "info")

    # -- the result ----------------------------------------------------------------------

    @property
    def result(self) -> ModelAttention | None:
        """The newest computed attention, or None."""
        return self._result

    @property
    def selected_head(self) -> Head:
        """(layer, head) shown enlarged and taken into the explorer."""
        return self._selected

    def select_head(self, layer: int, head: int) -> bool:
        """Select (layer, head) of the result; False (and nothing changes) when there is none."""
        if self._result is None:
            return False
        n_layers, n_heads = self._result.weights.shape[:2]
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            return False
        self._selected = (layer, head)
        self.events.selection.emit(layer, head)
        return True

    @property
    def show_scores(self) -> bool:
        """True: raw Q·Kᵀ scores are shown; False: softmax weights."""
        return self._show_scores

    def set_show_scores(self, show: bool) -> None:
        if show != self._show_scores:
            self._show_scores = show
            self._shown = None
            self.events.values.emit()

    def shown(self) -> ShownValues:
        """The values the heatmaps show now, with their colour scale (needs a result)."""
        if self._result is None:
            raise ValueError("No result yet: type a sentence first.")
        if self._shown is None:
            self._shown = shown_values(self._result, self._show_scores)
        return self._shown

    def status(self) -> str:
        """One line about the result: model, tokens, layers × heads, strategy, truncation."""
        result = self._result
        if result is None:
            return ""
        n_layers, n_heads = result.weights.shape[:2]
        how = result.strategy
        if result.long is not None:
            block = result.long.block
            how = f"by query blocks; thumbnails {block} × {block} tokens a pixel"
        return (
            f"{result.model_name}: {len(result.tokens):,} tokens, {n_layers} layers "
            f"× {n_heads} heads ({how}). {result.notice}"
        ).strip()

    def describe(self, layer: int, head: int, i: int, j: int) -> str:
        """The hover read-out of query i, key j in (layer, head); '' outside the result."""
        if self._result is None:
            return ""
        shown = self.shown()
        n_layers, n_heads, length = shown.values.shape[:3]
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            return ""
        if not (0 <= i < length and 0 <= j < length):
            return ""
        tokens = self._result.tokens
        shares = ""
        if self._result.kv_heads is not None:
            shares = f" (key/value head {self._result.kv_head(head) + 1})"
        return (
            f"{head_name(layer, head)}{shares}: query {tokens[i]!r} (i={i + 1}) → "
            f"key {tokens[j]!r} (j={j + 1}): {shown.label} {shown.values[layer, head, i, j]:.4f}"
        )

    def sharing(self) -> str:
        """Which query heads share a key/value head, in one sentence; '' when none share.

        "9 query heads share 3 key/value heads: 3 query heads read each one."
        """
        result = self._result
        if result is None or result.kv_heads is None:
            return ""
        n_heads, n_kv = len(result.kv_heads), int(result.kv_heads.max()) + 1
        if n_kv == n_heads:
            text = f"{n_heads} query heads, each with its own key/value head."
        else:
            text = (
                f"{n_heads} query heads share {n_kv} key/value heads "
                f"({n_heads // n_kv} read each one); causal: no query sees a later key."
            )
        return "\n".join([text, *result.notes])

    # -- generation ----------------------------------------------------------------------

    @property
    def generation(self) -> GenerationState | None:
        """The newest continuation (growing while it is written), or None."""
        return self._generation

    def start_generation(self, max_new_tokens: int, chat: bool) -> GenerationRequest | None:
        """The generation to run now, announced; None (and why) without a model or prompt."""
        if self._folder is None:
            self.events.message.emit("Choose a model first (a .gguf decoder writes).", "error")
            return None
        if not self._text.strip() and not chat:
            self.events.message.emit("The prompt is empty: type some words.", "error")
            return None
        self._generation = None
        self.events.generation.emit()
        self.events.message.emit("Generating…", "info")
        return GenerationRequest(self._folder, self._text, max_new_tokens, chat)

    def accept_generation(self, state: GenerationState) -> None:
        """Show a continuation: one more token, or the finished one (then say why it ended)."""
        self._generation = state
        self.events.generation.emit()
        if state.done:
            n = len(state.tokens)
            why = STOP_REASONS.get(state.stopped, state.stopped)
            self.events.message.emit(f"Wrote {n} token{'s' * (n != 1)}; {why}.", "info")

    def stop_generation(self) -> None:
        """The user stopped it: keep what was written, marked as stopped."""
        state = self._generation
        if state is not None and not state.done:
            self.accept_generation(replace(state, done=True, stopped="your stop"))

    def take_head(self) -> TakenHead | None:
        """The selected head as the explorer takes it (see ``ModelAttention.head``), or None.

        None comes with a message saying there is nothing to take yet.
        """
        if self._result is None:
            self.events.message.emit("Nothing to take yet: type a sentence first.", "error")
            return None
        return self._result.head(*self._selected)
