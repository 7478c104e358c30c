"""The next-token distribution at one position: softmax of the logits, top-k by probability."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def probabilities(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64 (a vocabulary's small tail adds up)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Candidate:
    """One possible next token: its id, readable text and probability."""

    id: int
    token: str
    prob: float


def top_ids(probs: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` ids of highest probability, descending (ties: the lower id first)."""
    k = min(k, probs.size)
    part = np.argpartition(-probs, k - 1)[:k]
    return part[np.lexsort((part, -probs[part]))]


def next_token(logits: np.ndarray, readable, k: int = 10) -> list[Candidate]:
    """Top-``k`` next tokens of one (vocab,) logit row; ``readable(id) -> str`` names them."""
    probs = probabilities(logits)
    return [Candidate(int(i), readable(int(i)), float(probs[i])) for i in top_ids(probs, k)]
