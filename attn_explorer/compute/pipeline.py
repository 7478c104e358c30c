"""The full attention pipeline, built on the score strategies.

    scores = Q Kᵀ                    (any strategy)
    scaled = scores · 1/√d           (or a given factor, or skipped)
    masked = scaled with −inf where a key is hidden (causal and/or a boolean mask)
    weights = softmax(masked) row by row
    output = weights @ V

``scaled`` and ``masked`` are derived on access, so a big input holds only the
scores and the weights at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attn_explorer.compute.strategies import STRATEGY_FUNCTIONS
from attn_explorer.compute.validation import as_float_array, check_finite, check_pair, to_4d

STRATEGIES = ("loop", "matmul", "batched")
STAGES = ("scores", "scaled", "masked", "weights", "output")

#: Bytes of one softmax block of rows: small enough to stay in L2 while it is
#: scaled, masked, shifted, exponentiated and normalised.
_SOFTMAX_BLOCK_BYTES = 256 * 1024


def attention_scores(query: object, key: object, strategy: str = "batched") -> np.ndarray:
    """S[..., i, j] = Σ_d query[..., i, d] · key[..., j, d], computed by ``strategy``.

    ``query`` is ``(..., T_q, d)`` and ``key`` ``(..., T_k, d)`` with the same
    leading dimensions (none, ``(H,)`` or ``(B, H)``); the result is
    ``(..., T_q, T_k)`` in the inputs' dtype (float32 stays float32).
    """
    if strategy not in STRATEGY_FUNCTIONS:
        raise ValueError(
            f"strategy: unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}."
        )
    q, k = check_pair(query, key)
    lead = q.shape[:-2]
    scores = STRATEGY_FUNCTIONS[strategy](to_4d(q), to_4d(k))
    return scores.reshape(*lead, q.shape[-2], k.shape[-2])


def causal_keep(t_q: int, t_k: int) -> np.ndarray:
    """Boolean (T_q, T_k): True where query i may see key j (j ≤ i, aligned at the last query)."""
    offset = t_k - t_q
    return np.arange(t_k)[None, :] <= (np.arange(t_q)[:, None] + offset)


@dataclass(frozen=True)
class AttentionResult:
    """Every stage of one attention computation.

    ``scores`` and ``weights`` are stored; ``scaled`` and ``masked`` are derived
    from ``scores`` on first access. ``fully_masked_rows`` is a boolean array
    shaped like the scores without the key axis: True where a query row had no
    visible key (its weights are all zero, never NaN).
    """

    scores: np.ndarray
    weights: np.ndarray
    output: np.ndarray | None
    scale: float
    keep: np.ndarray | None
    fully_masked_rows: np.ndarray
    strategy: str

    @cached_property
    def scaled(self) -> np.ndarray:
        return self.scores * self.scores.dtype.type(self.scale)

    @cached_property
    def masked(self) -> np.ndarray:
        if self.keep is None:
            return self.scaled
        return np.where(self.keep, self.scaled, self.scores.dtype.type(-np.inf))

    def stage(self, name: str) -> np.ndarray | None:
        """The array of a pipeline stage by name (see ``STAGES``)."""
        if name not in STAGES:
            raise ValueError(f"stage: unknown stage {name!r}; choose one of {', '.join(STAGES)}.")
        return getattr(self, name)


def _scale_factor(scale: bool | float, d: int) -> float:
    if scale is True:
        return 1.0 / float(np.sqrt(float(d)))
    if scale is False:
        return 1.0
    factor = float(scale)
    if not np.isfinite(factor):
        raise ValueError(f"scale: expected True, False or a finite number; got {scale!r}.")
    return factor


def _combine_keep(
    t_q: int, t_k: int, causal: bool, mask: object, scores_shape: tuple[int, ...]
) -> np.ndarray | None:
    keep: np.ndarray | None = causal_keep(t_q, t_k) if causal else None
    if mask is not None:
        user = np.asarray(mask)
        if user.dtype != np.bool_:
            raise ValueError(
                f"mask: expected a boolean array (True = keep), got dtype {user.dtype}."
            )
        try:
            np.broadcast_shapes(user.shape, scores_shape)
        except ValueError:
            raise ValueError(
                f"mask: shape {user.shape} does not broadcast to the scores' shape "
                f"{scores_shape}; give it shape (T_q, T_k) or the full scores' shape."
            ) from None
        keep = user if keep is None else (keep & user)
    return keep


def softmax_rows(
    x: np.ndarray,
    *,
    factor: float = 1.0,
    keep: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise softmax of ``x * factor`` with hidden entries (``keep`` False) at zero.

    Works on blocks of rows that fit in cache: each block is scaled, masked,
    shifted by its row max, exponentiated and normalised in place in ``out``
    before the next block is touched, so the big tensor is read once and written
    once. Returns ``(weights, fully_masked_rows)``; a row with no visible key gets
    all-zero weights.
    """
    if out is None:
        out = np.empty_like(x)
    t_k = x.shape[-1]
    rows_x = x.reshape(-1, t_k)
    rows_out = out.reshape(-1, t_k)
    n_rows = rows_x.shape[0]
    dtype = x.dtype.type
    f = dtype(factor)
    t_q = x.shape[-2] if x.ndim >= 2 else 1
    keep_rows = keep_2d = None
    if keep is not None:
        if keep.ndim > 2:
            keep_rows = np.broadcast_to(keep, x.shape).reshape(-1, t_k)
        else:  # one (T_q, T_k) mask repeated for every (batch, head)
            keep_2d = np.broadcast_to(keep, (t_q, t_k))
    fully = np.zeros(n_rows, dtype=bool)
    block = max(1, _SOFTMAX_BLOCK_BYTES // max(1, t_k * x.itemsize))
    row_max = np.empty((block, 1), dtype=x.dtype)
    row_sum = np.empty((block, 1), dtype=x.dtype)
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        n = stop - start
        blk = rows_out[start:stop]  # (n, T_k) view into the output
        np.multiply(rows_x[start:stop], f, out=blk)
        if keep is not None:
            if keep_rows is not None:
                visible = keep_rows[start:stop]
            else:
                assert keep_2d is not None
                visible = keep_2d[np.arange(start, stop) % t_q]
            blk[~visible] = -np.inf
        mx = row_max[:n]
        np.max(blk, axis=1, keepdims=True, out=mx)
        dead = ~np.isfinite(mx[:, 0])  # every key hidden in this row
        if dead.any():
            fully[start:stop] = dead
            mx[dead] = 0
        np.subtract(blk, mx, out=blk)
        np.exp(blk, out=blk)
        sm = row_sum[:n]
        np.sum(blk, axis=1, keepdims=True, out=sm)
        if dead.any():
            sm[dead] = 1
            blk[dead] = 0
        np.divide(blk, sm, out=blk)
    return out, fully.reshape(x.shape[:-1])


def attention(
    query: object,
    key: object,
    value: object | None = None,
    *,
    strategy: str = "batched",
    scale: bool | float = True,
    causal: bool = False,
    mask: object | None = None,
) -> AttentionResult:
    """Scaled dot-product attention, every stage kept (see the module docstring).

    ``query`` (…, T_q, d), ``key`` (…, T_k, d), ``value`` (…, T_k, d_v) share their
    leading dimensions. ``scale=True`` multiplies by 1/√d in the scores' dtype;
    a float gives the factor; ``False`` skips it. ``causal`` hides key j > query i
    (aligned at the last query when T_q ≠ T_k). ``mask`` is boolean, broadcastable
    to the scores, True = keep.
    """
    scores = attention_scores(query, key, strategy)
    t_q, t_k = scores.shape[-2], scores.shape[-1]
    d = np.shape(query)[-1]
    factor = _scale_factor(scale, d)
    keep = _combine_keep(t_q, t_k, causal, mask, scores.shape)
    weights, fully = softmax_rows(scores, factor=factor, keep=keep)
    output = None
    if value is not None:
        v = as_float_array("value", value)
        if v.ndim != scores.ndim or v.shape[:-2] != scores.shape[:-2] or v.shape[-2] != t_k:
            raise ValueError(
                f"value: shape {v.shape} does not fit key {np.shape(key)}; value needs the "
                "same leading dimensions and one row per key token (…, T_k, d_v)."
            )
        check_finite("value", v)
        output = np.matmul(weights, v.astype(weights.dtype, copy=False))  # (…,T_q,T_k)@(…,T_k,d_v)
    return AttentionResult(
        scores=scores,
        weights=weights,
        output=output,
        scale=factor,
        keep=keep,
        fully_masked_rows=fully,
        strategy=strategy,
    )
