"""Per-head summaries across a model: how spread out each head's attention is, and where it goes.

For weights ``(L, H, T, T)`` (rows = query i, columns = key j), each summary is
an ``(L, H)`` array, averaged over the query rows:

* ``entropy``  — mean over rows of −Σ_j w_ij ln w_ij, in nats (0 = one key takes
  everything; ln T = uniform);
* ``cls``      — mean attention mass on ``[CLS]`` keys;
* ``sep``      — mean attention mass on ``[SEP]`` keys;
* ``previous`` — mean of w_i,i−1 over rows i ≥ 1 (attention to the previous token).

These are the statistics of Clark et al., "What does BERT look at?" (2019).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SUMMARY_NAMES = {
    "entropy": "entropy (nats)",
    "cls": "→ [CLS]",
    "sep": "→ [SEP]",
    "previous": "→ previous",
}


@dataclass(frozen=True)
class HeadSummaries:
    """(L, H) float32 arrays: row entropy and [CLS] / [SEP] / previous-token attention."""

    entropy: np.ndarray
    cls: np.ndarray
    sep: np.ndarray
    previous: np.ndarray

    def get(self, name: str) -> np.ndarray:
        """A summary by name (see ``SUMMARY_NAMES``)."""
        if name not in SUMMARY_NAMES:
            choices = ", ".join(SUMMARY_NAMES)
            raise ValueError(f"summary: unknown {name!r}; choose one of {choices}.")
        summary: np.ndarray = getattr(self, name)
        return summary


def head_summaries(weights: np.ndarray, tokens: list[str]) -> HeadSummaries:
    """Summaries of attention ``weights`` (L, H, T, T) for a sentence of ``tokens``."""
    w = np.asarray(weights)
    length = w.shape[-1]
    if len(tokens) != length:
        raise ValueError(f"tokens: {len(tokens)} tokens for weights over {length} keys.")
    t = w.dtype.type
    safe = np.where(w > 0, w, t(1))  # 0 · ln 0 counts as 0
    entropy = -(w * np.log(safe)).sum(axis=-1).mean(axis=-1)  # (L, H, T) -> (L, H)
    is_cls = np.array([tok == "[CLS]" for tok in tokens])
    is_sep = np.array([tok == "[SEP]" for tok in tokens])
    cls = w[..., is_cls].sum(axis=-1).mean(axis=-1)  # mass on [CLS] keys, per row, then mean
    sep = w[..., is_sep].sum(axis=-1).mean(axis=-1)
    if length > 1:
        rows = np.arange(1, length)
        previous = w[..., rows, rows - 1].mean(axis=-1)  # (L, H)
    else:
        previous = np.zeros(w.shape[:-2], dtype=w.dtype)
    return HeadSummaries(entropy, cls, sep, previous)
