"""The rules of a structural edit, as plain functions: which sizes are allowed, what new cells hold.

Qt-free and free of the session: :class:`~attn_explorer.state.session.Session` asks
these when the user resizes, adds a token or loads numbers, and the session file
reader and the random-preset dialog ask :func:`size_problem` before anything is built,
so every path refuses the same sizes with the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attn_explorer.compute.validation import check_limits, check_score_elements, first_bad_value
from attn_explorer.state.types import MATRICES, Snapshot, cell_label, out_of_range


def size_problem(batch: int, heads: int, tokens: int, dim: int) -> str:
    """Empty string if the sizes are allowed, else what is wrong and what to do."""
    if tokens < 1:
        return "a table needs at least one token (T ≥ 1)"
    if dim < 1:
        return "each vector needs at least one dimension (d ≥ 1)"
    if heads < 1:
        return "attention needs at least one head (H ≥ 1)"
    if batch < 1:
        return "the batch needs at least one entry (B ≥ 1)"
    try:  # the compute layer's limits, so the tables never hold what it would refuse
        check_limits("Q, K, V", (batch, heads, tokens, dim))
        check_score_elements(batch * heads * tokens, tokens)
    except ValueError as exc:
        return str(exc)
    return ""


def new_cells(shape: tuple[int, ...], fill: str, seed: int) -> list[np.ndarray]:
    """New cells for query, key and value: zeros, or (``fill == "random"``) seeded numbers.

    One generator draws all three in turn, so Q, K and V get different
    numbers (one generator per matrix with the same seed made q_i = k_i, so a
    new token always attended most to itself).
    """
    if fill == "random":
        rng = np.random.default_rng(seed)
        return [np.round(rng.standard_normal(shape), 3) for _ in MATRICES]
    return [np.zeros(shape) for _ in MATRICES]


def unused_token_name(taken: Sequence[str]) -> str:
    """``t<n>`` for the first n from ``len(taken) + 1`` that no token is called yet."""
    n = len(taken) + 1
    while f"t{n}" in taken:
        n += 1
    return f"t{n}"


def as_float64(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with text token names and float64 copies of Q, K and V (what is stored)."""
    return Snapshot(
        tuple(str(t) for t in snapshot.tokens),
        np.array(snapshot.query, dtype=np.float64),
        np.array(snapshot.key, dtype=np.float64),
        np.array(snapshot.value, dtype=np.float64),
    )


def snapshot_problem(new: Snapshot) -> str:
    """Empty string if ``new`` may replace the session's numbers, else what is wrong.

    Every tensor has the query's shape, the sizes are allowed, one name per token,
    and every value is finite and within the limit.
    """
    b, h, t, d = new.shape
    for name, array in (("query", new.query), ("key", new.key), ("value", new.value)):
        if array.shape != (b, h, t, d):
            return f"{name} has shape {array.shape}, expected {(b, h, t, d)}"
    problem = size_problem(b, h, t, d)
    if problem:
        return f"{problem}; kept the current table"
    if len(new.tokens) != t:
        return f"{len(new.tokens)} token names for T = {t} rows"
    for name, array in (("query", new.query), ("key", new.key), ("value", new.value)):
        bad = first_bad_value(array)
        if bad is not None:
            where = cell_label(name, bad, new.tokens, b)
            return f"{where}: {out_of_range(float(array[bad]))}; kept the current table"
    return ""


def resized(old: Snapshot, fills: Sequence[np.ndarray]) -> Snapshot:
    """``old`` at the shape of ``fills`` (new query, key, value cells): kept cells keep
    their values, new token rows get names no kept token uses."""
    b, h, t, d = fills[0].shape
    b0, h0, t0, d0 = old.shape
    kb, kh, kt, kd = min(b, b0), min(h, h0), min(t, t0), min(d, d0)
    for grown, m in zip(fills, (old.query, old.key, old.value), strict=True):
        grown[:kb, :kh, :kt, :kd] = m[:kb, :kh, :kt, :kd]
    names = list(old.tokens[:t])
    for _ in range(t - t0):
        names.append(unused_token_name(names))
    return Snapshot(tuple(names), *fills)
