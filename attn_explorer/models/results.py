"""What a model's forward pass gives the explorer: the result types, encoder and decoder alike.

:class:`ModelAttention` (one sentence: tokens and every layer's Q, K, V, scores and
weights), :class:`ForwardResult` (a batched pass), :class:`TakenHead` (one head as
the explorer takes it) and :class:`DecoderForward` (a decoder's own pass, which the long
pass of ``models.long_context`` reads without importing the decoder). The BERT encoder
and the GGUF decoders both return them, so they live apart from either model;
``attn_explorer.models`` re-exports the first three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.summaries import HeadSummaries, head_summaries

#: A stage of every head: an (L, H, T, T) array, or a long text's heads recomputed on demand.
HeadValues = np.ndarray | HeadStack


class TakenHead(TypedDict):
    """One head as the explorer takes it (``ModelView.headTaken``'s payload).

    ``query``/``key``/``value`` are (T, d_head) float64; ``layer`` and ``head``
    count from 0.
    """

    tokens: list[str]
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    layer: int
    head: int
    model_name: str
    causal: bool


@dataclass(frozen=True)
class ModelAttention:
    """What one sentence does inside the model: tokens and every layer's attention.

    ``query``, ``key``, ``value`` are (L, H, T, d_head); ``scores`` (raw Q·Kᵀ, before
    the 1/√d_head scale) and ``weights`` (softmax rows) are (L, H, T, T), rows =
    query token i, columns = key token j. ``hidden_states`` is (L + 1, T, hidden):
    the embeddings, then each layer's output. All float32.

    A decoder (``causal`` True) adds ``logits`` (T, vocab) and ``kv_heads`` (H,): query
    head h reads key/value head ``kv_heads[h]``, and ``key``/``value`` are the shared
    (L, H_kv, T, d_head) heads, not repeated copies; ``weights`` are 0 above the diagonal.

    A text too long to record every head (a decoder's long pass) has ``long`` (what the
    pass folded in: block previews, summaries, head scores), ``scores`` and ``weights``
    that are :class:`~attn_explorer.models.decoder.long_pass.HeadStack` (one head or
    rows recomputed when read, never the whole stage) and ``logits`` of the last
    position only, (1, vocab).
    """

    tokens: list[str]
    input_ids: np.ndarray
    token_type_ids: np.ndarray
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    scores: HeadValues
    weights: HeadValues
    hidden_states: np.ndarray
    scale: float
    strategy: str
    model_name: str = ""
    truncated: bool = False
    full_length: int = 0
    causal: bool = False
    logits: np.ndarray | None = None
    kv_heads: np.ndarray | None = None
    #: Decoders: "local" or "global" per layer, the local layers' window (0: none), and
    #: what the weights are and how the file was read ("Q4_K_M: 168 × Q4_K, …").
    layer_kinds: tuple[str, ...] = ()
    window: int = 0
    notes: tuple[str, ...] = ()
    long: LongStats | None = None

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads (itself unless heads share keys)."""
        return int(head if self.kv_heads is None else self.kv_heads[head])

    @property
    def last_hidden_state(self) -> np.ndarray:
        """(T, hidden): the final layer's output for each token."""
        result: np.ndarray = self.hidden_states[-1]
        return result

    @property
    def notice(self) -> str:
        """A sentence for the user when the input was cut, else ''."""
        if not self.truncated:
            return ""
        return (
            f"The input has {self.full_length} tokens; the model takes at most "
            f"{len(self.tokens)}, so it was truncated."
        )

    def summaries(self) -> HeadSummaries:
        """Per-head entropy and [CLS] / [SEP] / previous-token attention, each (L, H).

        A long pass streamed them over its blocks of weights; they are read from there.
        """
        if self.long is not None:
            means = self.long.means()
            names = ("entropy", "cls", "sep", "previous")
            return HeadSummaries(*(means[name].astype(np.float32) for name in names))
        assert isinstance(self.weights, np.ndarray)
        return head_summaries(self.weights, self.tokens)

    def head(self, layer: int, head: int) -> TakenHead:
        """One head as the explorer takes it: tokens and (T, d_head) float64 Q, K, V.

        A query head that shares its key/value head takes that shared K and V.
        """
        return {
            "tokens": list(self.tokens),
            "query": self.query[layer, head].astype(np.float64),
            "key": self.key[layer, self.kv_head(head)].astype(np.float64),
            "value": self.value[layer, self.kv_head(head)].astype(np.float64),
            "layer": int(layer),
            "head": int(head),
            "model_name": self.model_name,
            "causal": self.causal,  # a decoder's head: the explorer hides later keys too
        }


@dataclass(frozen=True)
class ForwardResult:
    """Batched forward pass: (B, L, H, T, …) attention arrays and (B, L + 1, T, hidden) states."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    hidden_states: np.ndarray
    scale: float


@dataclass(frozen=True)
class DecoderForward:
    """One forward pass: per-layer (L, H or H_kv, T, …) arrays when recorded, and logits."""

    logits: np.ndarray
    hidden_states: np.ndarray | None
    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    scores: np.ndarray | None
    weights: np.ndarray | None
    scale: float
