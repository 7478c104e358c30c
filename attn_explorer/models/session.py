"""The model view's state, without Qt: which model and sentence, the newest result, the head.

A :class:`ModelSession` holds what the user asked for (model folder or ``.gguf`` file,
sentence, optional second sentence, strategy), the newest
:class:`~attn_explorer.models.ModelAttention`, the selected (layer, head), whether raw
scores or softmax weights are shown, and the newest :class:`GenerationState` of a
decoder writing a continuation. Views subscribe to :class:`ModelSessionEvents` and read
everything else from the session.

The work itself is plain functions, :func:`compute_attention` and
:func:`generate_tokens`, safe to call from a worker thread: they read only their
request and the thread-safe :class:`ModelCache`, never the session. Layers and heads
count from 0 here, as Python does; every sentence meant for a person counts them from
1 ("layer 2 · head 3").

One job at ~450 lines: the model view's state; the generation's part is its state too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attn_explorer.compute import LOOP_BUDGET, STRATEGIES, Cancelled, estimate_loop_seconds
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.encoder.bert import ModelAttention, TakenHead
from attn_explorer.models.loading import AnyModel, load_model
from attn_explorer.state.colormaps import value_range
from attn_explorer.state.events import Event

#: (layer, head), counted from 0.
Head = tuple[int, int]
#: Why a generation ended, as the status line says it.
STOP_REASONS = {
    "end of turn": "the model ended its turn",
    "max_new_tokens": "that was the most new tokens asked for",
    "context": "the context is full",
    "your stop": "stopped by you",
}


@dataclass(frozen=True)
class AttentionRequest:
    """One sentence (and an optional second one) for the model in ``folder`` (or .gguf file)."""

    folder: str
    text: str
    pair: str | None = None
    strategy: str = "batched"


@dataclass(frozen=True)
class RequestFailed:
    """The answer to a request that could not be run: one sentence for the status line."""

    message: str


class ModelCache:
    """Loaded models by folder, shared between the GUI thread and the worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, AnyModel] = {}

    def get(self, folder: str) -> AnyModel:
        """The model in ``folder`` (or a .gguf file), loaded on first use (``ModelError``)."""
        with self._lock:
            if folder not in self._models:
                self._models[folder] = load_model(folder)
            return self._models[folder]

    def loaded(self, folder: str) -> AnyModel | None:
        """The model in ``folder`` if it is loaded already, else None (never loads)."""
        with self._lock:
            return self._models.get(folder)


def _never_stop() -> bool:
    return False


def compute_attention(
    cache: ModelCache,
    request: AttentionRequest,
    should_stop: Callable[[], bool] = _never_stop,
) -> ModelAttention:
    """Load (or reuse) the model and run the sentence; the loop strategy is guarded by its ETA.

    The loop is refused with a ``ValueError`` when its estimate for all layers is over
    ``LOOP_BUDGET.result``. Raises ``Cancelled`` when ``should_stop()`` turns true
    after the model is loaded (a newer request superseded this one).
    """
    model = cache.get(request.folder)
    if should_stop():
        raise Cancelled()
    if isinstance(model, DecoderModel):  # one batched causal pass; a second text is refused
        return model.attention(request.text, request.pair)
    if request.strategy == "loop":
        config = model.config
        length = len(model.encode(request.text, request.pair).tokens)
        shape = (1, config.num_attention_heads, length, config.head_size)  # (B, H, T, d_head)
        eta = estimate_loop_seconds(shape, shape) * config.num_hidden_layers
        if eta > LOOP_BUDGET.result:
            raise ValueError(
                f"The loop strategy would take about {eta:.0f} s for {length} tokens; "
                "use matmul or batched, or a shorter sentence."
            )
    return model.attention(request.text, request.pair, strategy=request.strategy)


def answer(
    cache: ModelCache, request: AttentionRequest, should_stop: Callable[[], bool] = _never_stop
) -> ModelAttention | RequestFailed:
    """:func:`compute_attention`, with every failure turned into a message (never raised).

    Only ``Cancelled`` passes through, so the worker can drop a superseded request.
    """
    try:
        return compute_attention(cache, request, should_stop)
    except Cancelled:
        raise
    except Exception as exc:  # a bad folder, bad text, the loop budget, a broken file...
        return RequestFailed(str(exc) or type(exc).__name__)


@dataclass(frozen=True)
class GenerationRequest:
    """Continue ``prompt`` with the decoder in ``folder``: greedy, up to ``max_new_tokens``."""

    folder: str
    prompt: str
    max_new_tokens: int = 20
    chat: bool = False


@dataclass(frozen=True)
class GenerationState:
    """A continuation so far: the tokens, the text and each step's attention row.

    ``rows[s]`` is (L, H, 1, t_s): the weights of the query row that chose new token s
    against every cached key (t_s = prompt + s tokens). ``done`` is False while tokens
    still come; ``stopped`` then says why ('end of turn', 'max_new_tokens', 'context',
    'stopped by you').
    """

    prompt_tokens: list[str]
    tokens: list[str]
    text: str
    rows: list[np.ndarray]
    max_new_tokens: int
    done: bool = False
    stopped: str = ""

    def matrix(self, layer: int, head: int) -> np.ndarray:
        """(S, t_max) weights of one head: row s is step s's query row, NaN past its keys.

        The staircase grows by one row per token: the sequence dimension remains, each
        new query row is scored against every cached key.
        """
        steps = len(self.rows)
        width = self.rows[-1].shape[-1] if steps else 0
        out = np.full((steps, width), np.nan, dtype=np.float32)  # (S, t_max)
        for s, row in enumerate(self.rows):
            out[s, : row.shape[-1]] = row[layer, head, 0]  # (t_s,)
        return out

    def query_tokens(self) -> list[str]:
        """The token whose query row chose each new token: the prompt's last, then each new."""
        if not self.rows:
            return []
        return [self.prompt_tokens[-1], *self.tokens[: len(self.rows) - 1]]

    def key_tokens(self) -> list[str]:
        """Every key the newest row reads: the prompt and the new tokens before the last."""
        return [*self.prompt_tokens, *self.tokens[: max(0, len(self.rows) - 1)]]


def generate_tokens(
    cache: ModelCache,
    request: GenerationRequest,
    report: Callable[[GenerationState], None],
    should_stop: Callable[[], bool] = _never_stop,
) -> GenerationState:
    """Load the decoder and write the continuation, reporting after every token.

    ``report`` hears a :class:`GenerationState` per new token (any thread: the caller
    carries it to the GUI). Raises ``Cancelled`` when ``should_stop()`` turns true, and
    ``ValueError`` (with the next step) when the model is an encoder.
    """
    model = cache.get(request.folder)
    if not isinstance(model, DecoderModel):
        raise ValueError(
            f"{model.name or 'This model'} is an encoder (BERT): it reads, it does not "
            "write. Choose a .gguf decoder such as SmolLM2 to generate."
        )
    prompt = request.prompt
    if request.chat:
        prompt = model.chat_prompt(prompt)
    prompt_tokens = model.readable(model.tokenizer.encode(prompt))
    ids: list[int] = []
    rows: list[np.ndarray] = []

    def on_token(token_id: int, row: np.ndarray) -> None:
        ids.append(token_id)
        rows.append(row)
        report(
            GenerationState(
                prompt_tokens,
                model.readable(ids),
                model.tokenizer.decode(ids),
                list(rows),
                request.max_new_tokens,
            )
        )
        if should_stop():
            raise Cancelled()

    result = model.generate(request.prompt, request.max_new_tokens, request.chat, on_token)
    return GenerationState(
        result.prompt_tokens, result.tokens, result.text, result.steps,
        request.max_new_tokens, done=True, stopped=result.stopped,
    )  # fmt: skip


@dataclass(frozen=True)
class ShownValues:
    """What the heatmaps colour: (L, H, T, T) values, their colour scale and its label.

    ``colormap`` names an entry of :data:`attn_explorer.state.colormaps.COLORMAPS`.
    """

    values: np.ndarray
    levels: tuple[float, float]
    colormap: str
    label: str


def shown_values(result: ModelAttention, scores: bool) -> ShownValues:
    """Softmax weights (sequential, 0 → 1) or raw Q·Kᵀ scores (diverging, symmetric about 0).

    The scores' range is shared by every head, so colours compare across the grid.
    """
    if scores:
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
    """

    def __init__(self) -> None:
        self.request = Event()
        self.result = Event()
        self.selection = Event()
        self.values = Event()
        self.message = Event()
        self.generation = Event()


class ModelSession:
    """The model view's single source of truth: the request, the newest result, the head."""

    def __init__(self, cache: ModelCache | None = None) -> None:
        self.events = ModelSessionEvents()
        self.cache = cache if cache is not None else ModelCache()
        self._folder: str | None = None
        self._text = ""
        self._pair = ""
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
        self, request: AttentionRequest, should_stop: Callable[[], bool] = _never_stop
    ) -> ModelAttention | RequestFailed:
        """Answer ``request`` (any thread): the attention, or why there is none."""
        return answer(self.cache, request, should_stop)

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
        return (
            f"{result.model_name}: {len(result.tokens)} tokens, {n_layers} layers "
            f"× {n_heads} heads ({result.strategy}). {result.notice}"
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
            return f"{n_heads} query heads, each with its own key/value head."
        return (
            f"{n_heads} query heads share {n_kv} key/value heads "
            f"({n_heads // n_kv} read each one); causal: no query sees a later key."
        )

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
