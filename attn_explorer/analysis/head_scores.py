"""Head scores: what each layer × head attends to, from its weights alone.

Definitions follow TransformerLens ``transformer_lens/head_detector.py`` (the
previous-token, duplicate-token and induction patterns) and issue 25's contract,
with w[l, h, i, j] the weight query i gives key j:

- previous_token = mean over i in 1 … T−1 of w[i, i−1]
- first_token = mean over i in 0 … T−1 of w[i, 0] (the attention sink)
- duplicate_token: D_i = {j < i : id[j] = id[i]}; mean over the i with D_i non-empty
  of Σ_{j∈D_i} w[i, j]
- induction: S_i = {j + 1 : 0 ≤ j < i − 1, id[j] = id[i]}; mean over the i with S_i
  non-empty of Σ_{t∈S_i} w[i, t] (the token after an earlier copy of the current one)

Unlike TransformerLens (a match score against a pattern), each score here is the
mean attention mass on the pattern, in 0 … 1. A score with no defined row (T = 1 for
previous_token, no repeated id for the other two) is NaN; the JSON writes it null.
Only j < i ever counts, so an encoder ([CLS] at 0) is scored the same way.
"""

from __future__ import annotations

import numpy as np

from attn_explorer.models.results import ModelAttention

SCORE_NAMES = ("previous_token", "first_token", "duplicate_token", "induction")


def duplicate_mask(input_ids: np.ndarray) -> np.ndarray:
    """(T, T) boolean: True at (i, j) where j < i and id[j] = id[i] (the set D_i)."""
    ids = np.asarray(input_ids)
    same = ids[:, None] == ids[None, :]  # (T, T)
    return same & np.tri(ids.size, k=-1, dtype=bool)


def induction_mask(input_ids: np.ndarray) -> np.ndarray:
    """(T, T) boolean: True at (i, j + 1) where 0 ≤ j < i − 1 and id[j] = id[i] (S_i)."""
    earlier = duplicate_mask(input_ids)  # (i, j): j < i, same id
    mask = np.zeros_like(earlier)
    mask[:, 1:] = earlier[:, :-1]  # shift each matching j to j + 1 (j + 1 < i keeps j < i − 1)
    mask &= np.tri(earlier.shape[0], k=-1, dtype=bool)
    return mask


def _mean_mass(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over the rows i that have a True of Σ_j weights[…, i, j] over mask[i]: (L, H)."""
    rows = mask.any(axis=1)  # (T,)
    if not rows.any():
        return np.full(weights.shape[:2], np.nan)
    mass = (weights * mask).sum(axis=-1, dtype=np.float64)  # (L, H, T)
    return mass[..., rows].mean(axis=-1)  # (L, H)


def head_scores(weights: np.ndarray, input_ids: np.ndarray) -> dict[str, np.ndarray]:
    """The four scores of every head, each an (L, H) float64 array (NaN where undefined).

    ``weights`` is (L, H, T, T), rows = query i, columns = key j; ``input_ids`` (T,).
    """
    w = np.asarray(weights)
    ids = np.asarray(input_ids)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] != ids.size:
        raise ValueError("head_scores: expected weights (L, H, T, T) and input_ids (T,).")
    t = ids.size
    previous = np.tri(t, k=-1, dtype=bool) & ~np.tri(t, k=-2, dtype=bool)  # j = i − 1
    first = np.zeros((t, t), dtype=bool)
    first[:, 0] = True
    return {
        "previous_token": _mean_mass(w, previous),
        "first_token": _mean_mass(w, first),
        "duplicate_token": _mean_mass(w, duplicate_mask(ids)),
        "induction": _mean_mass(w, induction_mask(ids)),
    }


def result_head_scores(result: ModelAttention) -> dict[str, np.ndarray]:
    """:func:`head_scores` of a model's result; a long pass's, as it streamed them over its
    blocks of weights (the same definitions, summed row block by row block)."""
    if result.long is not None:
        means = result.long.means()
        names = {
            "previous_token": "previous",
            "first_token": "first",
            "duplicate_token": "duplicate",
        }
        return {name: means[names.get(name, name)] for name in SCORE_NAMES}
    assert isinstance(result.weights, np.ndarray)
    return head_scores(result.weights, result.input_ids)


def repeated_random_tokens(
    vocab_size: int, length: int = 20, seed: int = 0, prefix: list[int] | None = None
) -> np.ndarray:
    """A seeded random sequence of ``length`` ids, then the same sequence again: (2·length,).

    TransformerLens's probe for induction heads (``generate_repeated_tokens``): on the
    second copy, an induction head attends to the token after the earlier copy of the
    current one. ``prefix`` (a BOS, say) goes before the two copies. Ids are drawn from
    the upper 90 % of the vocabulary's first ids, skipping the low ids special tokens
    usually take.
    """
    if vocab_size < 20 or length < 1:
        raise ValueError("repeated_random_tokens: need a vocabulary of ≥ 20 and length ≥ 1.")
    rng = np.random.default_rng(seed)
    low = max(1, vocab_size // 10)
    half = rng.integers(low, vocab_size, size=length)
    return np.concatenate([np.asarray(prefix or [], dtype=np.int64), half, half]).astype(np.int64)


def probe_text(
    vocabulary: list[str], encode, length: int = 20, seed: int = 0, leading_space: bool = True
) -> str:
    """The repeated-random-tokens probe as text that tokenizes back to its own ids.

    ``vocabulary[i]`` is token i as text, ``encode(text) -> ids`` the model's
    tokenizer (without special tokens). Whole lower-case words of 3+ letters are drawn
    (seeded), each kept only if it is a single token on its own, and the sequence is
    written twice: " w1 w2 … wn w1 w2 … wn" for a decoder's space-prefixed tokens
    (``leading_space``), "w1 w2 … w1 w2 …" for a WordPiece vocabulary.
    """
    prefix = " " if leading_space else ""
    words = sorted(
        {
            w[len(prefix) :]
            for w in vocabulary
            if w.startswith(prefix) and _lower_word(w[len(prefix) :])
        }
    )
    if len(words) < length:
        raise ValueError(f"probe_text: the vocabulary has {len(words)} plain words; need {length}.")
    rng = np.random.default_rng(seed)
    chosen: list[str] = []
    for index in rng.permutation(len(words)):
        word = words[index]
        if len(encode(prefix + word if leading_space else word)) == 1:
            chosen.append(word)
        if len(chosen) == length:
            break
    if len(chosen) < length:
        raise ValueError(f"probe_text: only {len(chosen)} words are one token each; need {length}.")
    half = "".join(f" {w}" for w in chosen) if leading_space else " ".join(chosen)
    return half + half if leading_space else f"{half} {half}"


def _lower_word(text: str) -> bool:
    return len(text) >= 3 and text.isascii() and text.isalpha() and text.islower()
