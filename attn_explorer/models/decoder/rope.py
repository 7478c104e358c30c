"""How rotary positions (RoPE) make one head's query·key score depend on distance only.

RoPE rotates each pair of a head's dimensions by an angle proportional to the token's
position. A query at position p + Δ and a key at position p are rotated by
(p + Δ)·θᵢ and p·θᵢ, so their dot product only sees the difference Δ·θᵢ:

    score(Δ) = RoPE(q, p + Δ) · RoPE(k, p)        the same for every p

:func:`score_by_distance` computes that curve with the decoder's own tables and
rotation (``ops.rope_tables`` and ``ops.apply_rope``: the halves layout the forward
pass uses), so it shows the convention the model really runs. :func:`head_position_curve`
picks a real pair from a result: the last token's query and the key it attends to
most, taken back to before their rotation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_explorer.models.decoder.ops import apply_rope, rope_tables
from attn_explorer.models.results import ModelAttention

#: Δ = 0 … this many tokens, by default.
MAX_DISTANCE = 256


def rotate(vectors: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """(N, d) vectors rotated to their (N,) positions, as the decoder's forward pass does."""
    cos, sin = rope_tables(positions, vectors.shape[-1], theta)  # (N, d) each
    return apply_rope(vectors.astype(np.float32), cos, sin)


def unrotate(vectors: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """The inverse of :func:`rotate`: (N, d) rotated vectors back to before their rotation."""
    cos, sin = rope_tables(positions, vectors.shape[-1], theta)  # (N, d) each
    return apply_rope(vectors.astype(np.float32), cos, -sin)  # the angle, backwards


def score_by_distance(
    query: np.ndarray,
    key: np.ndarray,
    theta: float,
    max_distance: int = MAX_DISTANCE,
    start: int = 0,
) -> np.ndarray:
    """q·k (unscaled, float32) after rotating the key to ``start`` and the query to start + Δ.

    ``query`` and ``key`` are (d,) vectors before rotation; returns (max_distance + 1,)
    scores for Δ = 0 … max_distance. Any ``start`` gives the same curve up to float32
    rounding; at Δ = 0 it is the plain q·k.
    """
    if max_distance < 0 or start < 0:
        raise ValueError("max_distance and start: must be 0 or more.")
    distances = np.arange(max_distance + 1)  # (D,)
    queries = np.broadcast_to(query, (distances.size, query.shape[-1]))  # (D, d)
    rotated_q = rotate(queries, start + distances, theta)  # (D, d)
    rotated_k = rotate(key[None, :], np.array([start]), theta)  # (1, d)
    scores: np.ndarray = rotated_q @ rotated_k[0]  # (D, d) @ (d,) -> (D,)
    return scores


@dataclass(frozen=True)
class PositionCurve:
    """One head's q·k pair at every relative distance, and where the real pair sits.

    ``scores[Δ]`` is q·k with the key at some position and the query Δ later
    (``distances`` = 0 … max). ``query_index`` / ``key_index`` are the pair's token
    positions in the sentence (0-based), so the model's own score is at
    Δ = ``query_index − key_index`` and equals ``actual_score``.
    """

    layer: int
    head: int
    kv_head: int
    distances: np.ndarray
    scores: np.ndarray
    unrotated: float
    query_index: int
    key_index: int
    query_token: str
    key_token: str
    actual_score: float

    @property
    def actual_distance(self) -> int:
        return self.query_index - self.key_index


def head_position_curve(
    result: ModelAttention,
    layer: int,
    head: int,
    theta: float,
    max_distance: int = MAX_DISTANCE,
) -> PositionCurve:
    """The last token's query in (layer, head) and the key it attends to most, at every Δ.

    Both vectors are taken back to before their rotation (the result holds them rotated,
    at positions 0 … T − 1), then rotated again at (p + Δ, p). ``theta`` is the model's
    RoPE base. ``ValueError`` for a result without rotation (BERT).
    """
    if not result.causal or result.kv_heads is None:
        raise ValueError("This result is not a decoder's: it has no rotary positions.")
    last = result.query.shape[2] - 1
    kv = result.kv_head(head)
    key_index = int(np.argmax(result.weights[layer, head, last]))  # its strongest key
    query = unrotate(result.query[layer, head, last][None], np.array([last]), theta)[0]  # (d,)
    key = unrotate(result.key[layer, kv, key_index][None], np.array([key_index]), theta)[0]
    return PositionCurve(
        layer=layer,
        head=head,
        kv_head=kv,
        distances=np.arange(max_distance + 1),
        scores=score_by_distance(query, key, theta, max_distance),
        unrotated=float(query @ key),  # (d,) · (d,)
        query_index=last,
        key_index=key_index,
        query_token=result.tokens[last],
        key_token=result.tokens[key_index],
        actual_score=float(result.scores[layer, head, last, key_index]),
    )
