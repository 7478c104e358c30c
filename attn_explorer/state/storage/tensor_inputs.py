"""A user's own query, key and value arrays turned into the explorer's inputs. Qt-free.

The Python API (``attn_explorer.view``) and File ▸ Open tensors… both end here:
:func:`explorer_inputs` takes anything ``np.asarray`` accepts — a numpy array, a CPU
torch tensor, a jax array, a cupy array after ``.get()``, nested lists, an object with
only ``__array__`` — without importing any of those libraries, and returns a
:class:`~attn_explorer.state.types.Snapshot` and :class:`~attn_explorer.state.types.Options`
the session loads as they are.

Shapes are ``(T, d)``, ``(H, T, d)`` or ``(B, H, T, d)``. Key and value may have fewer
heads than the query when that number divides H (grouped-query attention, as in Llama
and Qwen2: query head h reads key/value head ``h // (H // H_kv)``); the window then shows
H heads, each with its group's keys and values. float16 and bfloat16 become float32, with
a note. Every refusal is a ``ValueError`` naming the argument and its shape, raised from
the declared ``shape`` before the array is converted or copied whenever the object has one.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute.validation import (
    LIMITS,
    as_float_array,
    check_limits,
    check_score_elements,
    check_values,
    to_4d,
)
from attn_explorer.state.types import Options, Snapshot, default_tokens


@dataclass(frozen=True)
class ExplorerInputs:
    """What the session loads: numbers and names, options, and how heads share keys."""

    snapshot: Snapshot  # query, key, value (B, H, T, d), key/value repeated per group
    options: Options
    #: (H,): the key/value head each query head reads; None when every head has its own.
    kv_heads: np.ndarray | None
    #: Conversions made on the way in ("query: float16 converted to float32"), for the user.
    notes: tuple[str, ...]

    def sharing(self) -> str:
        """'9 query heads share 3 key/value heads (3 read each one).' or ''."""
        if self.kv_heads is None:
            return ""
        heads, kv = len(self.kv_heads), int(self.kv_heads.max()) + 1
        return f"{heads} query heads share {kv} key/value heads ({heads // kv} read each one)."


def declared_shape(value: object) -> tuple[int, ...] | None:
    """The ``shape`` an array-like says it has (numpy, torch, jax, cupy), or None."""
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, str | bytes):
        return None
    try:
        sizes = tuple(shape)
    except TypeError:
        return None
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in sizes):
        return None
    return tuple(int(n) for n in sizes)


def check_shape(name: str, shape: tuple[int, ...]) -> None:
    """Raise ValueError naming ``name`` and ``shape`` unless it is (T, d), (H, T, d) or
    (B, H, T, d) with no empty axis and within the window's limits (``LIMITS``)."""
    if len(shape) not in (2, 3, 4):
        raise ValueError(
            f"{name}: shape {shape} has {len(shape)} dimension(s); expected (T, d), (H, T, d) "
            "or (B, H, T, d)."
        )
    if 0 in shape:
        raise ValueError(f"{name}: shape {shape} is empty; every axis needs at least one entry.")
    check_limits(name, shape, LIMITS)


def _is_bfloat16(dtype: object) -> bool:
    return "bfloat16" in str(dtype)


def as_array(name: str, value: object, notes: list[str]) -> np.ndarray:
    """``value`` as a float32 or float64 numpy array, its shape checked before conversion.

    float16 and bfloat16 (torch's, or ml_dtypes' as jax gives it) become float32 and a
    note says so; integers become float64; anything else is refused naming ``name``.
    """
    shape = declared_shape(value)
    if shape is not None:
        check_shape(name, shape)  # before np.asarray: __array__ may copy or allocate
    source_dtype = getattr(value, "dtype", None)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        to_float = getattr(value, "float", None)  # torch: numpy has no bfloat16
        if not (_is_bfloat16(source_dtype) and callable(to_float)):
            raise ValueError(f"{name}: cannot be read as an array of numbers ({exc}).") from None
        array = np.asarray(to_float())
    if _is_bfloat16(source_dtype) or _is_bfloat16(array.dtype):
        array = array.astype(np.float32)
        notes.append(f"{name}: bfloat16 converted to float32")
    elif array.dtype == np.float16:
        array = array.astype(np.float32)
        notes.append(f"{name}: float16 converted to float32")
    if shape is None or tuple(array.shape) != shape:
        check_shape(name, tuple(array.shape))
    array = as_float_array(name, array)
    check_values(name, array)
    return array


def _kv_group(name: str, shape: tuple[int, ...], query: tuple[int, ...]) -> int:
    """How many query heads read each head of ``name`` (key or value), checked."""
    b, h, t, _ = query
    kb, kh, kt, _ = shape
    if kb != b:
        raise ValueError(
            f"{name}: shape {shape} has B = {kb} batch entries but the query has {b} "
            f"(query {query}); give both the same batch."
        )
    if kt != t:
        raise ValueError(
            f"{name}: shape {shape} has T = {kt} tokens but the query has {t} (query {query}); "
            "the explorer shows self-attention, where every token is a query and a key."
        )
    if h % kh:
        divisors = ", ".join(str(n) for n in range(1, h + 1) if h % n == 0)
        raise ValueError(
            f"{name}: shape {shape} has {kh} heads, which does not divide the query's {h} "
            f"(query {query}); grouped-query attention needs a divisor of H ({divisors})."
        )
    return h // kh


def explorer_inputs(
    query: object,
    key: object,
    value: object = None,
    *,
    tokens: Sequence[str] | None = None,
    causal: bool = False,
) -> ExplorerInputs:
    """Check and convert a user's Q, K (and V) into what the session loads (see the module).

    ``value=None`` uses the key as the value (as Keras' ``Attention`` does), so the output
    stage is ``weights @ K``; ``tokens`` names the T rows (default ``t1 … tT``).
    """
    if not isinstance(causal, bool | np.bool_):
        raise ValueError(f"causal: expected True or False, got {causal!r}.")
    notes: list[str] = []
    q = as_array("query", query, notes)
    q4 = to_4d(q)  # (B, H, T, d)
    b, h, t, d = q4.shape
    k4 = to_4d(as_array("key", key, notes))  # (B, H_kv, T, d)
    if k4.shape[-1] != d:
        raise ValueError(
            f"key: shape {k4.shape} has vector size d = {k4.shape[-1]} but the query has "
            f"d = {d} (query {q4.shape}); a score is the dot product of a query and a key "
            "of one size."
        )
    group = _kv_group("key", k4.shape, q4.shape)
    if value is None:
        v4 = k4
        notes.append("value: not given, so V = K (the output is weights @ K)")
    else:
        v4 = to_4d(as_array("value", value, notes))  # (B, H_kv, T, d)
        if v4.shape[-1] != d:
            raise ValueError(
                f"value: shape {v4.shape} has vector size d = {v4.shape[-1]} but the query "
                f"has d = {d} (query {q4.shape}); the explorer's tables give V the size of Q "
                "and K (or leave value out: V = K)."
            )
        if v4.shape[1] != k4.shape[1]:
            raise ValueError(
                f"value: shape {v4.shape} has {v4.shape[1]} heads but the key has "
                f"{k4.shape[1]} (key {k4.shape}); each key head has one value head."
            )
        _kv_group("value", v4.shape, q4.shape)
    check_score_elements(b * h * t, t, LIMITS)
    names = _token_names(tokens, t)
    kv_heads = None
    if group > 1:
        kv_heads = np.arange(h) // group  # (H,): query head -> key/value head
        k4 = np.repeat(k4, group, axis=1)  # (B, H, T, d)
        v4 = np.repeat(v4, group, axis=1)  # (B, H, T, d)
    arrays = (q4, k4, v4)
    dtype = "float32" if all(a.dtype == np.float32 for a in arrays) else "float64"
    options = Options(stage="weights", causal=bool(causal), dtype=dtype)
    snapshot = Snapshot(names, *(np.array(a, dtype=np.float64) for a in arrays))
    return ExplorerInputs(snapshot, options, kv_heads, tuple(notes))


def _token_names(tokens: Sequence[str] | None, count: int) -> tuple[str, ...]:
    if tokens is None:
        return tuple(default_tokens(count))
    if isinstance(tokens, str | bytes):
        raise ValueError(f"tokens: expected a list of {count} names, got one string {tokens!r}.")
    try:
        names = tuple(str(name) for name in tokens)
    except TypeError:
        raise ValueError(f"tokens: expected a list of {count} names, got {tokens!r}.") from None
    if len(names) != count:
        raise ValueError(f"tokens: {len(names)} names for T = {count} tokens; give {count}.")
    for n, name in enumerate(names):
        if not name.strip():
            raise ValueError(f"tokens: name {n + 1} is empty; every token needs a name.")
    return names
