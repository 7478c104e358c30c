"""The model dock's attention work, apart from its state: a request, the model cache, the answer.

An :class:`AttentionRequest` names a model folder (or ``.gguf`` file), a sentence (or
several, one a line: a batch, :mod:`attn_explorer.models.batch`), an optional second
sentence and a strategy; :func:`compute_attention` runs it against the
thread-safe :class:`ModelCache`, and :func:`answer` turns every failure into a
:class:`RequestFailed` message. These are plain functions, safe on a worker thread:
they read only their request and the cache, never the
:class:`~attn_explorer.models.session.ModelSession`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from attn_explorer.compute import LOOP_BUDGET, Cancelled, estimate_loop_seconds
from attn_explorer.models.batch import batch_lines, run_batch
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.errors import phrase
from attn_explorer.models.loading import AnyModel, load_model
from attn_explorer.models.results import ModelAttention


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


def never_stop() -> bool:
    """The stop check of work nobody can stop: always False."""
    return False


def compute_attention(
    cache: ModelCache,
    request: AttentionRequest,
    should_stop: Callable[[], bool] = never_stop,
    progress: Callable[[float, str], None] | None = None,
) -> ModelAttention:
    """Load (or reuse) the model and run the sentence; the loop strategy is guarded by its ETA.

    The loop is refused with a ``ValueError`` when its estimate for all layers is over
    ``LOOP_BUDGET.result``. Raises ``Cancelled`` when ``should_stop()`` turns true
    after the model is loaded (a newer request superseded this one).
    """
    model = cache.get(request.folder)
    if should_stop():
        raise Cancelled()
    texts = batch_lines(request.text)
    if len(texts) > 1:  # one sentence a line: one padded, masked batch; sentence 1 shown
        if request.strategy == "loop":
            _check_loop_budget(model, texts)
        strategy = "batched" if isinstance(model, DecoderModel) else request.strategy
        return run_batch(model, texts, request.pair, strategy).sentence(0)
    if isinstance(model, DecoderModel):  # one causal pass, layer by layer; a second text is refused
        return model.attention(
            request.text, request.pair, progress=progress, should_stop=should_stop
        )
    if request.strategy == "loop":
        _check_loop_budget(model, [request.text], request.pair)
    return model.attention(request.text, request.pair, strategy=request.strategy)


def _check_loop_budget(model: AnyModel, texts: list[str], pair: str | None = None) -> None:
    """ValueError when the loop strategy's estimate for every layer (and sentence, padded to
    the longest) is over ``LOOP_BUDGET.result``."""
    if isinstance(model, DecoderModel):
        return  # a decoder refuses the loop itself
    config = model.config
    length = max(len(model.encode(text, pair).tokens) for text in texts)
    shape = (len(texts), config.num_attention_heads, length, config.head_size)  # (B, H, T, d)
    eta = estimate_loop_seconds(shape, shape) * config.num_hidden_layers
    if eta > LOOP_BUDGET.result:
        raise ValueError(
            f"The loop strategy would take about {eta:.0f} s for {length} tokens; "
            "use matmul or batched, or a shorter sentence."
        )


def answer(
    cache: ModelCache,
    request: AttentionRequest,
    should_stop: Callable[[], bool] = never_stop,
    progress: Callable[[float, str], None] | None = None,
) -> ModelAttention | RequestFailed:
    """:func:`compute_attention`, with every failure turned into a message (never raised).

    Only ``Cancelled`` passes through, so the worker can drop a superseded request.
    """
    try:
        return compute_attention(cache, request, should_stop, progress)
    except Cancelled:
        raise
    except Exception as exc:  # a bad folder, bad text, the loop budget, a broken file...
        return RequestFailed(phrase(exc, "window"))  # the field's name: "Sentence: …"
