"""The logit lens: what the model would predict if it stopped after each block.

As TransformerLens ``ActivationCache.accumulated_resid`` with ``apply_ln=True`` and
nostalgebraist's logit lens: the residual stream after l blocks (l = 0: the
embeddings, l = L: the last block's output) goes through the model's final RMSNorm
and unembedding, then a softmax. All L + 1 rows come from our own, pre-norm hidden
states, so row L equals the model's own output (transformers' ``hidden_states[L]``
already has the final norm applied; we never mix the two).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.analysis.next_token import probabilities
from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.ops import rms_norm


@dataclass(frozen=True)
class LogitLens:
    """(L + 1, T) tables: top id and its probability, and the probability each row gives
    to ``final_id`` (the token the full model ranks first at that position)."""

    top_id: np.ndarray
    top_prob: np.ndarray
    final_prob: np.ndarray
    final_id: np.ndarray


def logit_lens(
    model: DecoderModel,
    hidden_states: np.ndarray,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LogitLens:
    """The lens of (L + 1, T, hidden) pre-norm hidden states, one row of layers at a time."""
    c = model.config
    rows, t = hidden_states.shape[0], hidden_states.shape[1]
    top_id = np.zeros((rows, t), dtype=np.int64)
    top_prob = np.zeros((rows, t))
    final_prob = np.zeros((rows, t))
    normed = rms_norm(hidden_states[-1], model.weights.final_norm, c.rms_norm_eps)
    final_id = np.argmax(model.weights.logits(normed), axis=-1)  # (T,)
    for layer in range(rows - 1, -1, -1):  # the last row first: final_id comes from it
        if should_stop is not None and should_stop():
            raise Cancelled("logit lens cancelled")
        normed = rms_norm(hidden_states[layer], model.weights.final_norm, c.rms_norm_eps)
        probs = probabilities(model.weights.logits(normed))  # (T, vocab)
        top_id[layer] = np.argmax(probs, axis=-1)
        top_prob[layer] = probs[np.arange(t), top_id[layer]]
        final_prob[layer] = probs[np.arange(t), final_id]
        if progress is not None:
            progress((rows - layer) / rows, f"layer {layer} of {rows - 1}")
    return LogitLens(top_id, top_prob, final_prob, final_id)
