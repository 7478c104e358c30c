"""Input checks shared by every compute entry point.

Each failure raises ``ValueError`` naming the argument, the shapes involved and
what to do about it, so that the GUI and the command line can show the message
as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Limits:
    """Largest sizes the app accepts (each alone, and in total)."""

    max_batch: int = 8
    max_heads: int = 64
    max_tokens: int = 4096
    max_dim: int = 512
    #: elements of one Q, K or V tensor (B·H·T·d): 64 Mi floats = 256 MB as float32
    max_matrix_elements: int = 64 * 1024 * 1024
    #: elements of one score tensor (B·H·T_q·T_k): 256 Mi floats = 1 GB as float32
    max_score_elements: int = 256 * 1024 * 1024


LIMITS = Limits()


def as_float_array(name: str, value: object) -> np.ndarray:
    """Return ``value`` as a float32/float64 array, keeping either dtype as it is."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(
            f"{name}: expected a rectangular array of numbers (every row the same length); {exc}"
        ) from None
    if array.dtype not in FLOAT_DTYPES:
        if array.dtype.kind in "biu":
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
    check_finite("query", q)
    check_finite("key", k)
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
            f"{name}: entry {list(bad)} is {array[bad]!r}; every value must be a finite "
            "number (replace NaN and ±inf)."
        )


def to_4d(array: np.ndarray) -> np.ndarray:
    """View a (T, d), (H, T, d) or (B, H, T, d) array as (B, H, T, d)."""
    return array.reshape((1,) * (4 - array.ndim) + array.shape)
