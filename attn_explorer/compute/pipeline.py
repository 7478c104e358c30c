"""The full attention pipeline, built on the score strategies.

    scores = Q Kᵀ                    (any strategy)
    scaled = scores · 1/√d           (or a given factor, or skipped)
    masked = scaled with −inf where a key is hidden (causal, a sliding window, a boolean mask)
    weights = softmax(masked) row by row
    output = weights @ V

``scaled`` and ``masked`` are derived on access, so a big input holds only the
scores and the weights at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attn_explorer.compute.softmax import NonFiniteRows, softmax_rows
from attn_explorer.compute.strategies import STRATEGY_FUNCTIONS, marked_source
from attn_explorer.compute.tiled import DEFAULT_BLOCK, TiledResult, attention_tiled, check_block
from attn_explorer.compute.validation import (
    STAGES,
    as_float_array,
    check_limits,
    check_pair,
    check_values,
    to_4d,
)
from attn_explorer.compute.workspace import Workspace

STRATEGIES = tuple(STRATEGY_FUNCTIONS)  # ("loop", "matmul", "batched", "tiled"), teaching order


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
    return _scores(q, k, strategy)


def _scores(
    q: np.ndarray, k: np.ndarray, strategy: str, out: np.ndarray | None = None
) -> np.ndarray:
    """Q Kᵀ of already validated arrays, shaped like the inputs' leading dims.

    ``out`` (``(…, T_q, T_k)``, the inputs' dtype), if given, receives the scores.
    """
    q4, k4 = to_4d(q), to_4d(k)
    out4 = None if out is None else out.reshape(*q4.shape[:-1], k4.shape[-2])  # a view
    scores = STRATEGY_FUNCTIONS[strategy](q4, k4, out=out4)  # (B, H, T_q, T_k)
    return scores.reshape(*q.shape[:-2], q.shape[-2], k.shape[-2])  # (…, T_q, T_k)


def causal_keep(t_q: int, t_k: int, window: int | None = None) -> np.ndarray:
    """Boolean (T_q, T_k): True where query i may see key j (j ≤ i, aligned at the last query).

    With a sliding ``window`` w (Mistral, Gemma's local layers) query i sees only the w
    keys i − w + 1 … i: a band below the diagonal, so a cache needs to hold w keys, not T.
    """
    offset = t_k - t_q
    rows = np.arange(t_q)[:, None] + offset  # (T_q, 1): the last key each query may see
    keys = np.arange(t_k)[None, :]  # (1, T_k)
    keep = keys <= rows  # (T_q, T_k)
    if window is not None:
        keep &= keys > rows - window  # hide keys w or more positions back
    return keep


def check_window(window: object, causal: bool) -> int | None:
    """``window`` as None (no window) or a whole number ≥ 1; ValueError otherwise.

    A sliding window is a causal mask with a band, so it needs ``causal=True``.
    """
    if window is None:
        return None
    if (
        isinstance(window, bool | np.bool_)
        or not isinstance(window, int | np.integer)
        or window < 1
    ):
        raise ValueError(f"window: expected None or a whole number of keys ≥ 1, got {window!r}.")
    if not causal:
        raise ValueError(
            "window: a sliding window hides keys before the query as well as after it; "
            "it needs causal=True."
        )
    return int(window)


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
        scaled: np.ndarray  # (the marked lines below are shown in the app as they are)
        # [stage scaled]
        scaled = self.scores * self.scores.dtype.type(self.scale)  # scale = 1/√d or 1
        # [end]
        return scaled

    @cached_property
    def masked(self) -> np.ndarray:
        if self.keep is None:
            return self.scaled
        # [stage masked]
        masked = np.where(self.keep, self.scaled, self.scores.dtype.type(-np.inf))  # hidden: −inf
        # [end]
        return masked

    def stage(self, name: str) -> np.ndarray | None:
        """The array of a pipeline stage by name (see ``STAGES``)."""
        if name not in STAGES:
            raise ValueError(f"stage: unknown stage {name!r}; choose one of {', '.join(STAGES)}.")
        array: np.ndarray | None = getattr(self, name)
        return array


def stage_source(stage: str) -> str:
    """The lines of this module that turn the scores into ``stage`` (empty for "scores",
    which the strategy's own lines make), exactly as they appear in the source."""
    if stage not in STAGES:
        raise ValueError(f"stage: unknown stage {stage!r}; choose one of {', '.join(STAGES)}.")
    if stage == "scores":
        return ""
    return marked_source(__name__, f"stage {stage}")


def _check_value(value: object, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    v = as_float_array("value", value)
    if v.ndim != k.ndim or v.shape[:-1] != k.shape[:-1] or 0 in v.shape:
        raise ValueError(
            f"value: shape {v.shape} does not fit key {k.shape}; value needs the same "
            "leading dimensions and one row per key token (…, T_k, d_v), with d_v ≥ 1."
        )
    check_limits("value", v.shape)
    check_values("value", v)
    return v


def _scale_factor(scale: bool | float, d: int) -> float:
    if isinstance(scale, bool | np.bool_):
        return 1.0 / float(np.sqrt(float(d))) if scale else 1.0
    # Text, None and lists are refused rather than converted: float("2") would pass.
    if not isinstance(scale, int | float | np.integer | np.floating) or not np.isfinite(scale):
        raise ValueError(f"scale: expected True, False or a finite number; got {scale!r}.")
    return float(scale)


def _check_flag(name: str, value: object) -> bool:
    """``value`` as a bool; ValueError unless it is True or False (``"no"`` is truthy)."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}: expected True or False, got {value!r}.")
    return bool(value)


def _combine_keep(
    t_q: int,
    t_k: int,
    causal: bool,
    mask: object,
    scores_shape: tuple[int, ...],
    window: int | None = None,
) -> np.ndarray | None:
    keep: np.ndarray | None = causal_keep(t_q, t_k, window) if causal else None
    if mask is not None:
        user = np.asarray(mask)
        if user.dtype != np.bool_:
            raise ValueError(
                f"mask: expected a boolean array (True = keep), got dtype {user.dtype}."
            )
        try:
            fits = np.broadcast_shapes(user.shape, scores_shape) == tuple(scores_shape)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"mask: shape {user.shape} does not broadcast to the scores' shape "
                f"{scores_shape}; give it shape (T_q, T_k) or the full scores' shape."
            )
        keep = user if keep is None else (keep & user)
    return keep


def attention(
    query: object,
    key: object,
    value: object | None = None,
    *,
    strategy: str = "batched",
    scale: bool | float = True,
    causal: bool = False,
    mask: object | None = None,
    workspace: Workspace | None = None,
    block: int = DEFAULT_BLOCK,
    window: int | None = None,
) -> AttentionResult:
    """Scaled dot-product attention, every stage kept (see the module docstring).

    ``query`` (…, T_q, d), ``key`` (…, T_k, d), ``value`` (…, T_k, d_v) share their
    leading dimensions. ``scale=True`` multiplies by 1/√d in the scores' dtype;
    a float gives the factor; ``False`` skips it. ``causal`` hides key j > query i
    (aligned at the last query when T_q ≠ T_k); with ``window`` w (causal only) query i
    sees just the keys i − w + 1 … i, a sliding window. ``mask`` is boolean, broadcastable
    to the scores, True = keep. ``workspace`` lends the scores, weights and output
    arrays of an earlier call of the same shape once nothing refers to them any more
    (see :mod:`attn_explorer.compute.workspace`); the numbers are the same either way.

    ``strategy="tiled"`` returns a :class:`~attn_explorer.compute.tiled.TiledResult`
    instead (the same attributes): the output and each row's max and normaliser, computed
    in ``block`` × ``block`` tiles without any (T_q × T_k) array; its key and value may
    have fewer heads than the query (grouped-query attention). The typing says
    AttentionResult for a plain ``str`` strategy; test ``isinstance(r, TiledResult)``.
    """
    if strategy not in STRATEGY_FUNCTIONS:
        raise ValueError(
            f"strategy: unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}."
        )
    if strategy == "tiled":
        # A TiledResult has AttentionResult's attributes, its grid stages derived on access.
        return attention_tiled_result(  # type: ignore[return-value]
            query, key, value, scale=scale, causal=causal, mask=mask, block=block, window=window
        )
    q, k = check_pair(query, key)
    v = None if value is None else _check_value(value, q, k)
    if v is not None and v.dtype != q.dtype:  # float64 anywhere: everything in float64
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
    t_q, t_k = q.shape[-2], k.shape[-2]
    factor = _scale_factor(scale, q.shape[-1])
    causal = _check_flag("causal", causal)
    window = check_window(window, causal)
    keep = _combine_keep(t_q, t_k, causal, mask, (*q.shape[:-1], t_k), window)  # before work
    grid = (*q.shape[:-1], t_k)  # (…, T_q, T_k)
    if workspace is not None:
        shapes = (grid, grid, (*q.shape[:-1], v.shape[-1] if v is not None else 0))
        lent: list[np.ndarray | None] = list(workspace.take(shapes, q.dtype))
    else:
        lent = [None, None, None]
    scores_out, weights_out, output_out = lent
    scores = _scores(q, k, strategy, scores_out)  # (…, T_q, T_k); q, k are checked above
    try:
        # [stage weights]
        # each row: x = S·scale, hidden keys −inf; x −= max(x); e = exp(x); w = e / sum(e)
        weights, fully = softmax_rows(scores, factor=factor, keep=keep, out=weights_out)
        # [end]
    except NonFiniteRows as exc:  # inputs are bounded, so only the scale can overflow
        raise ValueError(
            f"scores: S · scale is not finite (NaN or ±inf) in query row {exc.row} "
            f"(scale = {factor:g}, {scores.dtype}); use a smaller scale or smaller "
            "query/key values."
        ) from None
    # [stage output]
    output = None if v is None else np.matmul(weights, v, out=output_out)  # (…,T_q,T_k)@(…,T_k,d_v)
    # [end]
    return AttentionResult(
        scores=scores,
        weights=weights,
        output=output,
        scale=factor,
        keep=keep,
        fully_masked_rows=fully,
        strategy=strategy,
    )


def _check_grouped(query: object, key: object) -> tuple[np.ndarray, np.ndarray]:
    """``check_pair`` for the tiled strategy: the key may have fewer heads (H a multiple
    of H_kv), and no score-grid limit applies, since no grid is built."""
    q = as_float_array("query", query)
    k = as_float_array("key", key)
    heads_fit = (
        q.ndim == k.ndim
        and q.shape[:-3] == k.shape[:-3]
        and (q.ndim == 2 or (k.shape[-3] > 0 and q.shape[-3] % k.shape[-3] == 0))
    )
    if not heads_fit:
        raise ValueError(
            f"query {q.shape} and key {k.shape}: the key needs the query's batch dimensions "
            "and a number of heads that divides the query's (grouped-query attention)."
        )
    q4, k4 = to_4d(q), to_4d(k)
    check_pair(q4[:, :1], k4[:, :1])  # dimensions, d, limits and values of one head each
    for name, array in (("query", q), ("key", k)):
        check_limits(name, array.shape)
        check_values(name, array)
    if q.dtype != k.dtype:
        common = np.result_type(q.dtype, k.dtype)
        q, k = q.astype(common), k.astype(common)
    return q, k


def attention_tiled_result(
    query: object,
    key: object,
    value: object,
    *,
    scale: bool | float = True,
    causal: bool = False,
    mask: object | None = None,
    block: int = DEFAULT_BLOCK,
    window: int | None = None,
) -> TiledResult:
    """``attention(..., strategy="tiled")``: checked inputs in, a :class:`TiledResult` out."""
    block = check_block(block)
    if value is None:
        raise ValueError("value: the tiled strategy computes the output, so it needs a value.")
    q, k = _check_grouped(query, key)
    v = _check_value(value, k, k)
    if v.dtype != q.dtype:
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
    t_q, t_k = q.shape[-2], k.shape[-2]
    factor = _scale_factor(scale, q.shape[-1])
    causal = _check_flag("causal", causal)
    window = check_window(window, causal)
    user = _combine_keep(t_q, t_k, False, mask, (*q.shape[:-1], t_k))
    q4 = to_4d(q)
    keep4 = None if user is None else np.broadcast_to(user, (*q.shape[:-1], t_k))
    if keep4 is not None:
        keep4 = keep4.reshape(*q4.shape[:-1], t_k)  # (B, H, T_q, T_k): a view
    with np.errstate(over="raise", invalid="raise"):
        try:
            output, row_max, row_sum = attention_tiled(
                q4, to_4d(k), to_4d(v), factor, causal=causal, keep=keep4, block=block,
                window=window,
            )  # fmt: skip
        except FloatingPointError:
            raise ValueError(
                f"scores: S · scale is not finite (scale = {factor:g}, {q.dtype}); use a "
                "smaller scale or smaller query/key values."
            ) from None
    keep = causal_keep(t_q, t_k, window) if causal and user is None else None
    if causal and user is not None:
        keep = causal_keep(t_q, t_k, window) & user
    elif user is not None:
        keep = user
    lead = q.shape[:-1]  # (…, T_q)
    return TiledResult(
        output=output.reshape(*lead, v.shape[-1]),
        row_max=row_max.reshape(lead),
        row_sum=row_sum.reshape(lead),
        scale=factor,
        keep=keep,
        fully_masked_rows=(row_sum == 0).reshape(lead),
        block=block,
        query=q,
        key=k,
    )
