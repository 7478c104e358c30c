"""An independent float64 reference for the compute tests, and hypothesis strategies.

Nothing here calls attn_explorer: the reference is written from the textbook
definitions with ``np.einsum`` in float64, so agreeing with it means something.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

EPS = {np.dtype(np.float32): float(np.finfo(np.float32).eps), np.dtype(np.float64): 2.2e-16}


def reference_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """S = Q Kᵀ in float64 by explicit index notation."""
    return np.einsum(
        "...id,...jd->...ij", query.astype(np.float64), key.astype(np.float64), optimize=False
    )


def score_error_bound(query: np.ndarray, key: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Worst-case rounding error of a length-d dot product: ~d·eps·Σ|q||k|.

    The floor covers products that underflow below the dtype's smallest normal number.
    """
    magnitude = np.einsum(
        "...id,...jd->...ij", np.abs(query.astype(np.float64)), np.abs(key.astype(np.float64))
    )
    d = query.shape[-1]
    tiny = float(np.finfo(dtype).tiny)
    return 2 * (d + 1) * (EPS[np.dtype(dtype)] * magnitude + tiny)


def reference_causal_keep(t_q: int, t_k: int, window: int | None = None) -> np.ndarray:
    """Query i (aligned at the last key) sees key j when j ≤ i + (T_k − T_q), written as loops;
    with a sliding window w only the w keys i' − w + 1 … i' (i' = i + T_k − T_q)."""
    keep = np.zeros((t_q, t_k), dtype=bool)
    for i in range(t_q):
        last = i + (t_k - t_q)
        for j in range(t_k):
            keep[i, j] = j <= last and (window is None or j >= last - window + 1)
    return keep


def reference_softmax(scaled: np.ndarray, keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Masked row softmax in float64, one row at a time; hidden rows give zeros."""
    scaled = np.asarray(scaled, dtype=np.float64)
    keep_full = (
        np.ones(scaled.shape, dtype=bool) if keep is None else np.broadcast_to(keep, scaled.shape)
    )
    rows = scaled.reshape(-1, scaled.shape[-1])
    keep_rows = keep_full.reshape(-1, scaled.shape[-1])
    weights = np.zeros_like(rows)
    fully = np.zeros(rows.shape[0], dtype=bool)
    for r in range(rows.shape[0]):
        visible = keep_rows[r]
        if not visible.any():
            fully[r] = True
            continue
        shifted = rows[r, visible] - rows[r, visible].max()
        e = np.exp(shifted)
        weights[r, visible] = e / e.sum()
    return weights.reshape(scaled.shape), fully.reshape(scaled.shape[:-1])


# -- hypothesis strategies ---------------------------------------------------------

dtypes = st.sampled_from([np.float32, np.float64])

#: leading dimensions: none, (H,), or (B, H)
leads = st.one_of(
    st.just(()),
    st.tuples(st.integers(1, 3)),
    st.tuples(st.integers(1, 2), st.integers(1, 3)),
)


@st.composite
def qk_shapes(draw, max_t: int = 5, max_d: int = 4):
    """(lead, T_q, T_k, d) with every extent ≥ 1."""
    lead = draw(leads)
    return (
        lead,
        draw(st.integers(1, max_t)),
        draw(st.integers(1, max_t)),
        draw(st.integers(1, max_d)),
    )


def values(dtype, shape, bound: float):
    """Finite arrays of ``dtype`` with entries in [−bound, bound], including the bounds."""
    elements = st.one_of(
        st.floats(-bound, bound, allow_nan=False, width=32),
        st.sampled_from([-bound, bound, 0.0, 1.0, -1.0]),
    )
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def qkv(draw, bound: float | None = None, max_t: int = 5, max_d: int = 4):
    """A (query, key, value) triple sharing leading dims, and the dtype."""
    lead, t_q, t_k, d = draw(qk_shapes(max_t=max_t, max_d=max_d))
    dtype = draw(dtypes)
    bound = draw(st.sampled_from([1.0, 10.0, 1e4])) if bound is None else bound
    d_v = draw(st.integers(1, 3))
    query = draw(values(dtype, (*lead, t_q, d), bound))
    key = draw(values(dtype, (*lead, t_k, d), bound))
    value = draw(values(dtype, (*lead, t_k, d_v), 10.0))
    return query, key, value
