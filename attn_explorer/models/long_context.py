"""A decoder's result at its full context: the long pass made into a :class:`ModelAttention`.

A text too long for one pass to record every head (``DecoderModel.records_everything``
false: L·H·T² scores and weights over 1 GiB) runs through
:mod:`attn_explorer.models.decoder.long_pass`: free memory is checked first (one
sentence when the text would not fit), the pass runs layer by layer with progress and
a stop check, and the result's ``scores`` and ``weights`` are
:class:`~attn_explorer.models.decoder.long_pass.HeadStack` — each head recomputed from
the kept query and key when it is read — with the block previews, summaries and head
scores the pass folded in (``ModelAttention.long``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol

import numpy as np

from attn_explorer.models.decoder.config import DecoderConfig
from attn_explorer.models.decoder.long_pass import HeadStack, LayerKeys, check_memory, pass_bytes
from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.decoder.ops import KVCache
from attn_explorer.models.results import DecoderForward, ModelAttention

#: Hears each long pass's LongStats on this thread as soon as it exists, before layer 1: a
#: view shows the previews of the layers already done while the rest run (the model
#: view's worker sets it around its job, ``ModelSession.run(..., watch=)``).
PASS_WATCH: ContextVar[Callable[[LongStats], None] | None] = ContextVar("PASS_WATCH", default=None)


class LongPassModel(Protocol):
    """What a long pass reads of a decoder: ``DecoderModel`` (``models.decoder.llama``) has
    all of it and hands a long text here.

    A protocol rather than that class, so the decoder and this module do not import each
    other: the decoder calls down into :func:`long_attention` and :func:`long_prompt`.
    """

    @property
    def config(self) -> DecoderConfig: ...

    @property
    def kv_heads(self) -> np.ndarray: ...

    @property
    def name(self) -> str: ...

    def readable(self, ids: list[int]) -> list[str]: ...

    def layer_keys(self, index: int) -> LayerKeys: ...

    def notes(self) -> tuple[str, ...]: ...

    def forward(
        self,
        input_ids: np.ndarray,
        cache: KVCache | None = None,
        record: bool = True,
        *,
        long: LongStats | None = None,
        progress: Callable[[float, str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> DecoderForward: ...


def long_pass_bytes(model: LongPassModel, tokens: int) -> int:
    """Bytes a long pass of ``tokens`` holds besides the model's weights."""
    c = model.config
    return pass_bytes(
        c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_size,
        c.intermediate_size, tokens,
    )  # fmt: skip


def long_attention(
    model: LongPassModel,
    ids: list[int],
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ModelAttention:
    """The long pass of ``ids`` as a result: heads on demand, previews and sums folded in.

    TextError (one sentence) when the free memory cannot hold the pass; ``Cancelled``
    when ``should_stop()`` turns true after a layer.
    """
    c, t = model.config, len(ids)
    check_memory(long_pass_bytes(model, t), t)
    tokens = model.readable(ids)
    marks = (
        np.flatnonzero([tok == "[CLS]" for tok in tokens]),
        np.flatnonzero([tok == "[SEP]" for tok in tokens]),
    )
    stats = LongStats(c.num_layers, c.num_heads, t, np.array(ids, dtype=np.int64), marks)
    stats.kv_heads, stats.layer_kinds = model.kv_heads.copy(), c.layer_kinds
    stats.window = c.sliding_window
    if (watch := PASS_WATCH.get()) is not None:
        watch(stats)

    def paced(fraction: float, text: str) -> None:  # after each layer: the view draws it
        stats.pause()
        try:
            if progress is not None:
                progress(fraction, text)
        finally:
            stats.rest()

    run = model.forward(np.array(ids), long=stats, progress=paced, should_stop=should_stop)
    assert run.query is not None and run.key is not None and run.value is not None
    assert run.hidden_states is not None
    keys = [model.layer_keys(index) for index in range(c.num_layers)]
    scores, weights = (
        HeadStack(stage, run.query, run.key, model.kv_heads, keys, preview, stats.block)
        for stage, preview in (("scores", stats.scores_preview), ("weights", stats.weights_preview))
    )
    return ModelAttention(
        tokens=tokens,
        input_ids=np.array(ids, dtype=np.int64),
        token_type_ids=np.zeros(t, dtype=np.int64),
        query=run.query,
        key=run.key,
        value=run.value,
        scores=scores,
        weights=weights,
        hidden_states=run.hidden_states,
        scale=run.scale,
        strategy="batched",
        model_name=model.name,
        full_length=t,
        causal=True,
        logits=run.logits,
        kv_heads=model.kv_heads.copy(),
        layer_kinds=c.layer_kinds,
        window=c.sliding_window,
        notes=model.notes(),
        long=stats,
    )


def long_prompt(
    model: LongPassModel, ids: list[int], cache: KVCache
) -> tuple[np.ndarray, np.ndarray]:
    """A long prompt into ``cache`` by query blocks: its last row's weights (L, H, 1, t)
    and the next token's logits (vocab,), nothing else of its attention kept."""
    c, t = model.config, len(ids)
    check_memory(long_pass_bytes(model, t), t)
    none = np.zeros(0, dtype=np.int64)
    stats = LongStats(c.num_layers, c.num_heads, t, np.array(ids, dtype=np.int64), (none, none))
    run = model.forward(np.array(ids), cache, record=False, long=stats)
    return stats.last_row[:, :, None, :], run.logits[-1]
