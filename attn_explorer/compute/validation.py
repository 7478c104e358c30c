"""Input checks shared by every compute entry point.

Each failure raises ``ValueError`` naming the argument, the shapes involved and
what to do about it, so that the GUI and the command line can show the message
as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: The pipeline's stages in order, the names ``stage=`` accepts (``AttentionResult.stage``,
#: ``TiledResult.stage``, ``stage_source``). Here, below the pipeline and the tiled strategy
#: that both check a name against it, so neither imports the other for it.
STAGES = ("scores", "scaled", "masked", "weights", "output")

#: Largest magnitude of any query, key or value entry. A score is a sum of d products,
#: |s| ≤ d·M², and must stay finite in float32 (max 3.4e38) with d at its limit of
#: 512: 512·(1e15)² = 5.1e32 leaves a margin of 10⁵ for the scale factor and the sums.
#: 1e15 is also below 2**53, so every whole number up to it is exact in float64.
MAX_ABS_VALUE = 1e15

#: Whole numbers beyond this are rounded when converted to float64.
EXACT_INTEGER_LIMIT = 2**53


@dataclass(frozen=True)
class Limits:
    """Largest sizes the app accepts (each alone, and in total)."""

    max_batch: int = 8
    max_heads: int = 64
    max_tokens: int = 8192  # a small LLM's whole context (SmolLM2: 8 192), taken as one head
    max_dim: int = 512
    #: elements of one Q, K or V tensor (B·H·T·d): 64 Mi floats = 256 MB as float32
    max_matrix_elements: int = 64 * 1024 * 1024
    #: elements of one score tensor (B·H·T_q·T_k): 256 Mi floats = 1 GB as float32
    max_score_elements: int = 256 * 1024 * 1024


LIMITS = Limits()

#: Largest block of cells one paste may write (rows × columns), to be checked from the
#: clipboard's dimensions before any cell is parsed: a whole (T, d) table at its limits.
MAX_PASTE_CELLS = LIMITS.max_tokens * LIMITS.max_dim


def as_float_array(name: str, value: object) -> np.ndarray:
    """Return ``value`` as a float32/float64 array, keeping either dtype as it is."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(
            f"{name}: expected a rectangular array of numbers (every row the same length); {exc}"
        ) from None
    if array.dtype not in FLOAT_DTYPES:
        if array.dtype.kind == "b":
            raise ValueError(
                f"{name}: expected numbers, got booleans (True/False); pass numbers such as "
                "0.0 and 1.0 (a mask of booleans goes in mask=)."
            )
        if array.dtype.kind in "iu":
            if array.size and (
                array.max() > EXACT_INTEGER_LIMIT or array.min() < -EXACT_INTEGER_LIMIT
            ):
                raise ValueError(
                    f"{name}: holds whole numbers beyond ±2**53, which float64 cannot hold "
                    f"exactly (and the limit is ±{MAX_ABS_VALUE:g}); use smaller numbers."
                )
            array = array.astype(np.float64)
        elif array.dtype.kind == "f":
            array = array.astype(np.float64)  # float16 / longdouble: compute in float64
        else:
            raise ValueError(
                f"{name}: expected numbers, got an array of dtype {array.dtype}; "
                "pass a float32 or float64 array (or nested lists of numbers)."
            )
    return array


def check_pair(
    query: object, key: object, limits: Limits = LIMITS
) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``query`` (…, T_q, d) and ``key`` (…, T_k, d) and return them as arrays.

    Both end up with the same dtype: float64 if either is float64, else float32.
    """
    q = as_float_array("query", query)
    k = as_float_array("key", key)
    for name, array in (("query", q), ("key", k)):
        if array.ndim not in (2, 3, 4):
            raise ValueError(
                f"{name}: expected 2 to 4 dimensions (T, d), (H, T, d) or (B, H, T, d); "
                f"got shape {array.shape} with {array.ndim} dimension(s)."
            )
        if 0 in array.shape:
            raise ValueError(
                f"{name}: shape {array.shape} is empty; every dimension needs at least "
                "one entry (add a token or a dimension)."
            )
    if q.ndim != k.ndim or q.shape[:-2] != k.shape[:-2]:
        raise ValueError(
            f"query and key must have the same leading (batch, head) dimensions; got "
            f"query {q.shape} and key {k.shape}. Give both the same number of heads "
            "and batch entries."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"query and key must have the same vector size d; got query {q.shape} "
            f"(d={q.shape[-1]}) and key {k.shape} (d={k.shape[-1]}). Resize one of them."
        )
    check_limits("query", q.shape, limits)
    check_limits("key", k.shape, limits)
    check_score_elements(int(np.prod(q.shape[:-1], dtype=np.int64)), k.shape[-2], limits)
    check_values("query", q)
    check_values("key", k)
    if q.dtype != k.dtype:
        common = np.result_type(q.dtype, k.dtype)
        q, k = q.astype(common), k.astype(common)
    return q, k


def check_limits(name: str, shape: tuple[int, ...], limits: Limits = LIMITS) -> None:
    """Raise if a (…, T, d) shape is over any documented limit."""
    padded = (1,) * (4 - len(shape)) + tuple(shape)
    batch, heads, tokens, dim = padded
    for label, size, limit in (
        ("batch size B", batch, limits.max_batch),
        ("number of heads H", heads, limits.max_heads),
        ("number of tokens T", tokens, limits.max_tokens),
        ("vector size d", dim, limits.max_dim),
    ):
        if size > limit:
            raise ValueError(
                f"{name}: {label} = {size} is over the limit of {limit} (shape {tuple(shape)}); "
                f"use at most {limit}."
            )
    elements = batch * heads * tokens * dim
    if elements > limits.max_matrix_elements:
        raise ValueError(
            f"{name}: shape {tuple(shape)} holds {elements:,} values, over the limit of "
            f"{limits.max_matrix_elements:,}; reduce B, H, T or d."
        )


def check_score_elements(query_rows: int, t_k: int, limits: Limits = LIMITS) -> None:
    """Raise if a score tensor of ``query_rows`` (B·H·T_q) rows by ``t_k`` keys is too big."""
    elements = query_rows * t_k
    if elements > limits.max_score_elements:
        raise ValueError(
            f"the score tensor would hold {query_rows:,} query rows × {t_k:,} keys = "
            f"{elements:,} values, over the limit of {limits.max_score_elements:,}; "
            "use fewer tokens, heads or batch entries."
        )


def check_finite(name: str, array: np.ndarray) -> None:
    """Raise naming the first NaN or ±inf entry of ``array``."""
    if not np.isfinite(array).all():
        bad = tuple(int(x) for x in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(
            f"{name}: entry {list(bad)} is {float(array[bad])!r}; every value must be a finite "
            "number (replace NaN and ±inf)."
        )


def first_bad_value(array: np.ndarray, limit: float = MAX_ABS_VALUE) -> tuple[int, ...] | None:
    """The index of the first NaN, ±inf or entry larger in magnitude than ``limit``; None if none.

    Two reductions (min and max, which propagate NaN) and no temporary array when
    every value is fine; the offending entry is only searched for on failure.
    """
    if array.size == 0:
        return None
    low, high = float(array.min()), float(array.max())
    if -limit <= low and high <= limit:  # False for NaN and ±inf
        return None
    bad = ~np.isfinite(array) | (np.abs(array) > limit)
    return tuple(int(x) for x in np.argwhere(bad)[0])


def check_values(name: str, array: np.ndarray, limit: float = MAX_ABS_VALUE) -> None:
    """Raise naming the first NaN, ±inf or entry larger in magnitude than ``limit``."""
    bad = first_bad_value(array, limit)
    if bad is None:
        return
    check_finite(name, array)
    raise ValueError(
        f"{name}: entry {list(bad)} is {float(array[bad])!r}, over the limit of "
        f"±{limit:g} (MAX_ABS_VALUE): larger values overflow the scores; use smaller numbers."
    )


def to_4d(array: np.ndarray) -> np.ndarray:
    """View a (T, d), (H, T, d) or (B, H, T, d) array as (B, H, T, d)."""
    return array.reshape((1,) * (4 - array.ndim) + array.shape)
