"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

With A_l the mean over heads of layer l's weights, the residual connection is
accounted for as B_l = ½ A_l + ½ I with rows renormalised to 1, and the rollout is
the product B_{L−1} ⋯ B_0: row i says how much of position i's last-layer state can
be traced back to each input token j. Computed in float64.
"""

from __future__ import annotations

import numpy as np


def rollout(weights: np.ndarray) -> np.ndarray:
    """(L, H, T, T) weights -> (T, T) rollout, rows = query i, columns = input token j."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
        raise ValueError("rollout: expected weights (L, H, T, T).")
    t = w.shape[-1]
    identity = np.eye(t)
    result = identity
    for layer in w:
        mixed = 0.5 * layer.mean(axis=0) + 0.5 * identity  # (T, T)
        mixed /= mixed.sum(axis=-1, keepdims=True)
        result = mixed @ result  # B_l · (B_{l−1} ⋯ B_0)
    return result
