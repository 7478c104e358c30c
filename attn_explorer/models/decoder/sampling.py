"""Choosing the next token: greedy, or sampled with temperature, top-k and top-p (nucleus).

The order is transformers' (``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
``TopPLogitsWarper``): the logits are divided by the temperature, only the ``top_k``
most likely tokens are kept, then only the smallest set of the most likely whose
probability reaches ``top_p`` (Holtzman et al. 2019), and one token is drawn from
what is left, renormalised, by a seeded ``numpy.random.Generator``: the same seed
gives the same tokens. Temperature 0 or top-k 1 is greedy: the argmax, exactly as
without sampling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampling:
    """How to choose each token. The default (temperature 0) is greedy decoding.

    ``top_k`` 0 keeps every token; ``top_p`` 1 keeps every token; ``seed`` None draws
    from fresh entropy (a different text each time).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (np.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature: {self.temperature!r}; use a number ≥ 0 (0 = greedy).")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k: {self.top_k!r}; use a whole number ≥ 0 (0 = all tokens).")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p: {self.top_p!r}; use a number in (0, 1] (1 = all tokens).")

    @property
    def greedy(self) -> bool:
        """True when the choice is always the argmax."""
        return self.temperature == 0 or self.top_k == 1


GREEDY = Sampling()


def filtered_distribution(logits: np.ndarray, sampling: Sampling) -> np.ndarray:
    """The (vocab,) float64 distribution a token is drawn from: temperature, top-k, top-p.

    Tokens outside the kept set have probability 0; the rest sum to 1. Greedy settings
    give 1 on the argmax.
    """
    z = np.asarray(logits, dtype=np.float64)
    if sampling.greedy:
        out = np.zeros_like(z)
        out[int(np.argmax(logits))] = 1.0
        return out
    z = z / sampling.temperature
    order = np.argsort(-z, kind="stable")  # most likely first (ties: the lower id)
    keep = order.size if sampling.top_k == 0 else min(sampling.top_k, order.size)
    kept = order[:keep]
    p = np.exp(z[kept] - z[kept[0]])
    p /= p.sum()
    if sampling.top_p < 1:
        # the smallest prefix whose mass reaches p: the first index where the sum ≥ p
        # (less 1e-12, so a set whose mass is p exactly is not lost to rounding)
        reach = int(np.searchsorted(np.cumsum(p), sampling.top_p - 1e-12, side="left")) + 1
        reach = min(reach, kept.size)
        kept, p = kept[:reach], p[:reach] / p[:reach].sum()
    out = np.zeros_like(z)
    out[kept] = p
    return out


class Sampler:
    """Draws each next token under one :class:`Sampling`, from its own seeded generator."""

    def __init__(self, sampling: Sampling = GREEDY) -> None:
        self.sampling = sampling
        self.rng = np.random.default_rng(sampling.seed)

    def choose(self, logits: np.ndarray) -> int:
        """The next token id for one (vocab,) logit row."""
        if self.sampling.greedy:
            return int(np.argmax(logits))
        probs = filtered_distribution(logits, self.sampling)
        kept = np.flatnonzero(probs)
        return int(kept[self.rng.choice(kept.size, p=probs[kept])])


def top_choices(logits: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
    """The ``k`` most likely (id, probability) of the model's own softmax, descending."""
    z = np.asarray(logits, dtype=np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    k = min(k, p.size)
    part = np.argpartition(-p, k - 1)[:k]
    part = part[np.lexsort((part, -p[part]))]
    return [(int(i), float(p[i])) for i in part]
