"""Ways to compute the score grid S = Q Kᵀ for every (batch, head).

Each strategy takes ``query`` shaped ``(B, H, T_q, d)`` and ``key`` shaped
``(B, H, T_k, d)`` (already validated and brought to four dimensions by
:func:`attn_explorer.compute.attention_scores`) and returns ``(B, H, T_q, T_k)``
in the input dtype. They differ only in *how* the same numbers are produced:

* ``loop``    — the seed article's triple loop, wrapped in loops over batch and head;
* ``matmul``  — one matrix product per (batch, head): the heads are still a Python loop;
* ``batched`` — one batched matrix product: the head dimension enters the call itself;
* ``tiled``   — block by block (:mod:`attn_explorer.compute.tiled`, whose attention never
  holds the whole grid: it keeps a running max and normaliser per row instead).

The text between the ``# [strategy ...]`` markers is shown verbatim in the app's
code panel and stepper, so it is written to be read.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np

from attn_explorer.compute.tiled import scores_tiled


def scores_loop(query: np.ndarray, key: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Nested Python loops over (b, h, i, j, d), multiply-adding Python floats.

    ``out``, if given, is a (B, H, T_q, T_k) array of the inputs' dtype to copy into.
    """
    B, H, T_q, d_head = query.shape
    T_k = key.shape[2]
    Q_all = query.tolist()  # nested lists of Python floats: no numpy in the loop body
    K_all = key.tolist()
    S_all = [[[[0.0] * T_k for _ in range(T_q)] for _ in range(H)] for _ in range(B)]
    # [strategy loop]
    for b in range(B):
        for h in range(H):
            Q, K, scores = Q_all[b][h], K_all[b][h], S_all[b][h]
            for i in range(T_q):
                for j in range(T_k):
                    total = 0.0
                    for d in range(d_head):
                        total += Q[i][d] * K[j][d]
                    scores[i][j] = total
    # [end]
    result = np.array(S_all, dtype=query.dtype).reshape(B, H, T_q, T_k)
    if out is None:
        return result
    out[...] = result
    return out


def scores_matmul(query: np.ndarray, key: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """One ``q @ k.T`` per (batch, head): a Python loop over heads, BLAS inside.

    ``out``, if given, is a (B, H, T_q, T_k) array of the inputs' dtype to write into.
    """
    B, H, T_q, _ = query.shape
    T_k = key.shape[2]
    scores = np.empty((B, H, T_q, T_k), dtype=query.dtype) if out is None else out
    # [strategy matmul]
    for b in range(B):
        for h in range(H):
            scores[b, h] = query[b, h] @ key[b, h].T  # (T_q, d) @ (d, T_k) -> (T_q, T_k)
    # [end]
    return scores


def scores_batched(query: np.ndarray, key: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """One batched matmul over every (batch, head) at once: no Python loop over heads.

    ``out``, if given, is a (B, H, T_q, T_k) array of the inputs' dtype to write into.
    """
    # [strategy batched]
    key_t = np.swapaxes(key, -1, -2)  # (B, H, T_k, d) -> (B, H, d, T_k)
    # (B, H, T_q, d) @ (B, H, d, T_k) -> (B, H, T_q, T_k); out: None, or an array to reuse
    scores = np.matmul(query, key_t, out=out)
    # [end]
    return scores


STRATEGY_FUNCTIONS = {
    "loop": scores_loop,
    "matmul": scores_matmul,
    "batched": scores_batched,
    # The fourth computes the whole attention in tiles (compute/tiled.py); asked for the
    # scores alone, it assembles the grid from the tiles it would compute one at a time.
    "tiled": scores_tiled,
}


def marked_source(module: str, marker: str) -> str:
    """The lines of ``module`` between ``# [marker]`` and ``# [end]``, dedented, exactly as
    written. The whole module's lines are read: getsource of one function tokenizes the file
    to find its end, ~2-8 ms of the window's start-up."""
    lines = inspect.getsource(sys.modules[module]).splitlines()
    start = next(n for n, line in enumerate(lines) if line.strip() == f"# [{marker}]")
    end = next(n for n in range(start + 1, len(lines)) if lines[n].strip() == "# [end]")
    body = lines[start + 1 : end]
    indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
    return "\n".join(line[indent:] for line in body)


def strategy_source(strategy: str) -> str:
    """The core lines of a strategy, exactly as they appear in this module's source.

    The app's code panel and the stepper's code view show this text, so what the
    user reads is what runs.
    """
    if strategy not in STRATEGY_FUNCTIONS:
        raise KeyError(strategy)
    module = "attn_explorer.compute.tiled" if strategy == "tiled" else __name__
    return marked_source(module, f"strategy {strategy}")
