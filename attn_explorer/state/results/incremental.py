"""Recompute only the heads an edit touched, and splice them into the previous result.

Qt-free. Heads never mix in attention: a cell of Q, K or V of (batch b, head h)
changes only that head's scores, weights and output. So after an edit of one
cell of a 16-head session, :func:`recompute_heads` runs
:func:`~attn_explorer.compute.attention` (the same function, strategy and options
a full recompute uses) on the changed heads alone and copies the other heads'
arrays from the previous result: the result equals a full recompute, at a
fraction of its cost. :class:`~attn_explorer.state.results.results.Results` decides when
this applies (same shape and options, few heads changed).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from attn_explorer.compute import STAGES, AttentionResult, attention
from attn_explorer.state.results.preview import Preview, make_preview

#: (batch, head) pairs, one a row: (n, 2) integers.
Heads = np.ndarray


def changed_heads(
    before: tuple[np.ndarray, np.ndarray, np.ndarray],
    after: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> Heads:
    """The (batch, head) pairs whose query, key or value differ between two (B, H, T, d) sets."""
    differs = np.zeros(before[0].shape[:2], dtype=bool)  # (B, H)
    for old, new in zip(before, after, strict=True):
        differs |= np.any(old != new, axis=(2, 3))
    return np.argwhere(differs)  # (n, 2)


def recompute_heads(
    base: AttentionResult,
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    heads: Heads,
    *,
    strategy: str,
    scale: bool,
    causal: bool,
    window: int | None = None,
    in_place: bool = False,
) -> tuple[AttentionResult, AttentionResult]:
    """``base`` with ``heads`` recomputed from the new (B, H, T, d) inputs.

    Returns the spliced result and the part computed (its stages stacked (n, …)
    in the order of ``heads``), from which previews of those heads are made.

    ``in_place`` writes the new heads into ``base``'s own arrays instead of copies
    (two 32 MB copies at H16 T512, each a page-faulting allocation): only for the
    owner of ``base`` replacing it at once, on the thread that reads it.
    """
    bs, hs = heads[:, 0], heads[:, 1]
    part = attention(  # the changed heads stacked: (n, T, d) → (n, T_q, T_k)
        query[bs, hs],
        key[bs, hs],
        value[bs, hs],
        strategy=strategy,
        scale=scale,
        causal=causal,
        window=window,
    )

    def splice(whole: np.ndarray, new: np.ndarray) -> np.ndarray:
        spliced = whole if in_place else whole.copy()
        spliced[bs, hs] = new
        return spliced

    assert base.output is not None and part.output is not None  # sessions always have V
    result = AttentionResult(
        scores=splice(base.scores, part.scores),
        weights=splice(base.weights, part.weights),
        output=splice(base.output, part.output),
        scale=part.scale,
        keep=base.keep,  # the causal mask and window depend on the shape only
        fully_masked_rows=splice(base.fully_masked_rows, part.fully_masked_rows),
        strategy=strategy,
    )
    if in_place:  # base's cached derived stages (scaled, masked) hold the old numbers
        for name in STAGES:
            if isinstance(getattr(type(base), name, None), cached_property):
                vars(base).pop(name, None)
    return result, part


def splice_preview(
    preview: Preview,
    result: AttentionResult,
    part: AttentionResult,
    heads: Heads,
    stage: str,
    batch: int,
) -> Preview:
    """The preview of ``stage`` in ``batch`` of ``result``, reusing ``preview`` (the base's)
    for the heads not in ``heads`` (those of ``part``, see :func:`recompute_heads`)."""
    rows = [n for n, (b, _) in enumerate(heads.tolist()) if b == batch]
    if not rows:
        return preview  # nothing in this batch entry changed
    if not preview.reduced:  # the preview is the values themselves: nothing to reuse
        whole = result.stage(stage)
        assert whole is not None
        return make_preview(whole[batch])
    values = part.stage(stage)
    assert values is not None
    new = make_preview(values[rows])  # (n, T_q, T_k) of the changed heads
    return preview.with_heads([int(heads[n, 1]) for n in rows], new)
