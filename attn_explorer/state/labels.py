"""The words the app uses for its stages and strategies: one definition each, Qt-free.

Menus, the toolbar, the score grid, the heatmaps, exported figures and the
stepper all read their names here, so a stage or a strategy is called the same
everywhere.
"""

from __future__ import annotations

#: A stage's name, as menus, titles and exported figures show it.
STAGE_NAMES = {
    "scores": "scores S = Q Kᵀ",
    "scaled": "scaled S / √d",
    "masked": "masked",
    "weights": "softmax weights",
    "output": "output (weights @ V)",
}

#: What a stage's numbers mean, shown beside its axes.
STAGE_NOTES = {
    "scores": "raw dot products q_i · k_j",
    "scaled": "scores times the scale (1/√d by default)",
    "masked": "−∞ = key hidden from this query",
    "weights": "each row sums to 1",
    "output": "each row mixes the rows of V",
}

#: A strategy in a few words, with how it divides the work.
STRATEGY_SUMMARIES = {
    "loop": "loop (one multiply-add at a time)",
    "matmul": "matmul (one call per head)",
    "batched": "batched (one call for all heads)",
    "tiled": "tiled (online softmax, block by block)",
}

#: A strategy explained in a tooltip (the key that chooses it is added by the caller).
STRATEGY_TIPS = {
    "loop": "Nested Python loops over (b, h, i, j, d): one multiply-add at a time",
    "matmul": "One q @ k.T per head: a Python loop over heads, BLAS inside",
    "batched": "One batched matmul over every head at once: no Python loop",
    "tiled": (
        "FlashAttention's online softmax: query and key blocks, a running max m, "
        "normaliser ℓ and output per row; never the whole T×T grid"
    ),
}
