"""llama.cpp's Q/K row permutation: how a GGUF stores the query and key weights of a
llama-style model, and how they are put back in Hugging Face's order.

llama.cpp's converter (``convert_hf_to_gguf.py``, its ``permute``) reorders each head's rows
of the query and key weights from Hugging Face's rotate-half layout (the first half of a
head's dimensions, then the second) to adjacent pairs, as its RoPE kernel reads them. A wrong
un-permutation still gives fluent text, so the reference tests compare attention weights,
not only the next token.
"""

from __future__ import annotations

import numpy as np


def unpermute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: adjacent-pair RoPE layout -> halves layout.

    Within each head, llama.cpp stores row 2i as HF's row i and row 2i+1 as HF's row
    i + d/2. Works for a weight (heads·d, in) and a bias (heads·d,).
    """
    half = weight.shape[0] // heads // 2
    rows = weight.reshape(heads, half, 2, *weight.shape[1:])  # (heads, d/2, pair, …)
    return rows.swapaxes(1, 2).reshape(weight.shape)  # (heads, pair, d/2, …): halves


def stored_order(out: np.ndarray, heads: int) -> np.ndarray:
    """A view of ``out`` (rows, …) in which the rows stand as the GGUF stores them.

    Without ``heads`` that is ``out`` itself. With ``heads`` it is (heads, d/2, pair, …): the
    stored rows of each head, in llama.cpp's adjacent-pair order, seen through ``out``'s rows in
    Hugging Face's halves order. Writing stored row 2i + p of a head into it puts that row at
    HF row p·d/2 + i, as :func:`unpermute_rows` would, with no copy in between. ``out`` must be
    C-contiguous: a reshape of anything else could be a silent copy, and the writes lost.
    """
    if not heads:
        return out
    if not out.flags.c_contiguous:
        raise ValueError("stored_order needs a C-contiguous output")
    half = out.shape[0] // heads // 2
    halves = out.reshape(heads, 2, half, *out.shape[1:])  # (heads, pair, d/2, …): a view
    return halves.swapaxes(1, 2)  # (heads, d/2, pair, …): stored order


def join_rows(parts: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """The parts' rows, one after another, in one new array; a part given with ``heads``
    > 0 has llama.cpp's Q/K permutation undone as it is copied (:func:`unpermute_rows`
    without its own copy: the same values in the same places, one copy fewer)."""
    first = parts[0][0]
    out = np.empty((sum(p.shape[0] for p, _ in parts), *first.shape[1:]), dtype=first.dtype)
    row = 0
    for part, heads in parts:
        rows = out[row : row + part.shape[0]]
        if heads:
            half = part.shape[0] // heads // 2
            stored = part.reshape(heads, half, 2, *part.shape[1:])  # (heads, d/2, pair, …)
            np.copyto(rows.reshape(heads, 2, half, *part.shape[1:]), stored.swapaxes(1, 2))
        else:
            rows[...] = part
        row += part.shape[0]
    return out


def permute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's permutation (its converter's ``permute``): halves -> adjacent pairs."""
    half = weight.shape[0] // heads // 2
    rows = weight.reshape(heads, 2, half, *weight.shape[1:])  # (heads, pair, d/2, …)
    return rows.swapaxes(1, 2).reshape(weight.shape)
