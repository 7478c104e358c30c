"""Named starting points for the tables: the seed article's examples and a few teaching cases."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attn_explorer.state.types import Options, Preset, Snapshot, default_tokens

WORKED_QK = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]


def random_title(
    batch: int = 1, heads: int = 4, tokens: int = 8, dim: int = 4, seed: int = 0
) -> str:
    """The title of :func:`random_preset` made with these arguments."""
    return f"Random (B={batch}, H={heads}, T={tokens}, d={dim}, seed {seed})"


#: Each preset's title and description. The menus are made from these at start-up without
#: making any numbers (two presets draw random ones: numpy.random takes ~10 ms to import).
PRESET_TEXT: dict[str, tuple[str, str]] = {
    "worked": (
        "Worked example",
        "Three tokens, two dimensions, one head: Q = K = [[1,0],[0,1],[1,1]].",
    ),
    "exercise": (
        "Exercise: k4 = (2, 0)",
        "Adds k4 = (2, 0). Predict: is q2·k4 larger or smaller than q2·k2?",
    ),
    "random": (
        random_title(),
        "Seeded random numbers from a standard normal distribution.",
    ),
    "identity": (
        "Identity",
        "Q = K = I (4×4): each query matches only its own key, so S = I.",
    ),
    "duplicates": (
        "Duplicate tokens (ties)",
        "Keys k1 and k2 are equal, so every query weighs them exactly alike.",
    ),
    "large-norms": (
        "Large norms (softmax saturation)",
        "Vectors of length ~10: scores near 100 make softmax put ~all weight on one key.",
    ),
    "causal": (
        "Causal language model",
        "A causal mask hides later tokens: row i only attends to keys j ≤ i.",
    ),
}


def _snap(tokens: list[str], q: np.ndarray, k: np.ndarray, v: np.ndarray | None = None) -> Snapshot:
    q4 = np.asarray(q, dtype=np.float64).reshape((1,) * (4 - np.ndim(q)) + np.shape(q))
    k4 = np.asarray(k, dtype=np.float64).reshape((1,) * (4 - np.ndim(k)) + np.shape(k))
    v4 = k4.copy() if v is None else np.asarray(v, dtype=np.float64).reshape(k4.shape)
    return Snapshot(tuple(tokens), q4, k4, v4)


def worked_example() -> Preset:
    """The article's worked example.

    Q = K = [[1,0],[0,1],[1,1]] gives S = [[1,0,1],[0,1,1],[1,1,2]].
    """
    q = np.array(WORKED_QK)
    return Preset(
        "worked",
        *PRESET_TEXT["worked"],
        _snap(["t1", "t2", "t3"], q, q, np.eye(3, 2)),
        Options(scale=False),
    )


def exercise() -> Preset:
    """The article's exercise: a fourth key k4 = (2, 0); predict q2·k4 against q2·k2."""
    q = np.array([*WORKED_QK, [0.0, 0.0]])
    k = np.array([*WORKED_QK, [2.0, 0.0]])
    return Preset(
        "exercise",
        *PRESET_TEXT["exercise"],
        _snap(["t1", "t2", "t3", "t4"], q, k),
        Options(scale=False, strategy="loop", predict=True, granularity="cell"),
        vectors_query=1,  # q2, which the exercise asks about
    )


def random_preset(
    batch: int = 1, heads: int = 4, tokens: int = 8, dim: int = 4, seed: int = 0
) -> Preset:
    """Seeded random values, rounded to 2 decimals so they read well in the tables."""
    rng = np.random.default_rng(seed)
    shape = (batch, heads, tokens, dim)
    q, k, v = (np.round(rng.standard_normal(shape), 2) for _ in range(3))
    big = batch * heads * tokens * tokens > 1_000_000
    return Preset(
        "random",
        random_title(batch, heads, tokens, dim, seed),
        PRESET_TEXT["random"][1],
        Snapshot(tuple(default_tokens(tokens)), q, k, v),
        Options(seed=seed, dtype="float32" if big else "float64"),
    )


def identity() -> Preset:
    """Q = K = I: every token matches only itself, so S is the identity."""
    eye = np.eye(4)
    return Preset(
        "identity",
        *PRESET_TEXT["identity"],
        _snap(default_tokens(4), eye, eye, eye),
    )


def duplicate_tokens() -> Preset:
    """Two identical keys tie: softmax splits the weight evenly between them."""
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    k = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    return Preset(
        "duplicates",
        *PRESET_TEXT["duplicates"],
        _snap(["the", "the", "cat"], q, k),
        Options(stage="weights"),
    )


def large_norms() -> Preset:
    """Big vectors saturate softmax: one key takes (almost) all the weight.

    Every vector has length about 10 and points a different way, so each query's
    best key beats the runner-up by about 30 (e^-30 ≈ 1e-13). Scaling the worked
    example by 10 instead would tie q1·k1 = q1·k3 = 100 and split the weight 50/50.
    """
    q = np.array([[10.0, 0.0], [0.0, 10.0], [7.0, 7.0]])
    return Preset(
        "large-norms",
        *PRESET_TEXT["large-norms"],
        _snap(default_tokens(3), q, q),
        Options(stage="weights", scale=False),
    )


def causal_demo() -> Preset:
    """A causal language-model demo: each token sees itself and the tokens before it."""
    tokens = ["The", "cat", "sat", "on", "the", "mat"]
    rng = np.random.default_rng(7)
    q = np.round(rng.standard_normal((1, 2, 6, 4)), 2)
    k = np.round(rng.standard_normal((1, 2, 6, 4)), 2)
    v = np.round(rng.standard_normal((1, 2, 6, 4)), 2)
    return Preset(
        "causal",
        *PRESET_TEXT["causal"],
        Snapshot(tuple(tokens), q, k, v),
        Options(causal=True, stage="weights"),
    )


PRESETS: dict[str, Callable[[], Preset]] = {
    "worked": worked_example,
    "exercise": exercise,
    "random": random_preset,
    "identity": identity,
    "duplicates": duplicate_tokens,
    "large-norms": large_norms,
    "causal": causal_demo,
}


def preset(name: str) -> Preset:
    """A preset by its short name (see ``PRESETS``)."""
    if name not in PRESETS:
        raise ValueError(f"preset: unknown {name!r}; choose one of {', '.join(PRESETS)}.")
    return PRESETS[name]()
