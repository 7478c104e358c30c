"""The compute bench's measuring: round-robin timing of each strategy and of ``attention()``.

:func:`bench_scores` times the loop (or its calibrated ETA), the per-head and batched
matmuls, ``np.einsum`` and a square matmul of equal FLOPs at one (H, T, d);
:func:`bench_attention` times the full ``attention()`` with and without a workspace,
its two unavoidable matmuls, its peak extra memory, and PyTorch's
``scaled_dot_product_attention`` in a child process of its own (``python -m
attn_explorer.cli.bench_measure --torch-worker ...``, so torch's OpenMP pool never
shares cores with OpenBLAS). :func:`round_robin` takes one sample of each method in
turn, so a burst of load hits them all alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attn_explorer import compute
from attn_explorer.compute import attention, estimate_loop_seconds, flops
from attn_explorer.compute.strategies import scores_batched, scores_loop, scores_matmul

FULL_SCORE_SHAPES = [(1, 3, 2), (4, 64, 16), (16, 64, 16), (16, 512, 64), (16, 2048, 64)]
FULL_ATTENTION_SHAPES = [(16, 512, 64), (16, 2048, 64)]
QUICK_SCORE_SHAPES = [(1, 3, 2), (4, 64, 16), (16, 64, 16), (8, 256, 32)]
QUICK_ATTENTION_SHAPES = [(4, 256, 32)]

#: The loop runs only where its calibrated ETA is below this many seconds.
LOOP_LIMIT = {"full": 10.0, "quick": 0.3}


@dataclass
class Timing:
    seconds: float
    estimated: bool = False


@dataclass
class ScoreRow:
    heads: int
    tokens: int
    dim: int
    flops: int
    loop: Timing
    matmul: Timing
    batched: Timing
    einsum: Timing
    square: Timing
    square_n: int
    ratios: dict[str, float] = field(default_factory=dict)
    batched_gflops: float = 0.0
    square_gflops: float = 0.0
    batched_pct_of_square: float = 0.0


@dataclass
class AttentionRow:
    heads: int
    tokens: int
    dim: int
    attention_seconds: float  # with a Workspace, as the app calls it on every edit
    fresh_arrays_seconds: float  # without one: every call maps and zeroes new arrays
    two_matmuls_seconds: float
    ratio_to_two_matmuls: float
    peak_extra_bytes: int
    peak_in_score_tensors: float
    torch_seconds: float | None = None
    ratio_to_torch: float | None = None
    #: numpy's floor for the same work done pass by pass: the two products, one row max
    #: and one exp2 of every score, each a single numpy call over the whole grid (no
    #: scale, no checks, no sum, no normalisation). A blocked softmax, as the app's, takes
    #: its max from cache: its own bound lies between this and ``exp_only_seconds``.
    floor_seconds: float | None = None
    ratio_to_floor: float | None = None
    #: Below even that: the two products and one exp2 of every score (no row max).
    exp_only_seconds: float | None = None


def round_robin(
    funcs: dict[str, Callable[[], object]],
    repeats: int,
    min_seconds: float,
    pause: float = 0.0,
) -> dict[str, float]:
    """Median seconds per call of each function, sampled in turns (rotating order).

    ``pause`` seconds of sleep before each sample let thread pools go idle: OpenBLAS
    and OpenMP workers busy-wait for a while after a call, and that spinning would
    otherwise land on whichever method is timed next.
    """
    calls = {}
    for name, func in funcs.items():  # warm up, and find how many calls fill min_seconds
        start = time.perf_counter()
        func()
        once = max(time.perf_counter() - start, 1e-7)
        calls[name] = max(1, int(min_seconds / once))
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    names = list(funcs)
    for turn in range(repeats):
        # Rotate the order each round: what ran just before (a freed 256 MB array, a
        # spinning thread pool) must not always precede the same method.
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            func = funcs[name]
            if pause:
                time.sleep(pause)
            start = time.perf_counter()
            for _ in range(calls[name]):
                func()
            samples[name].append((time.perf_counter() - start) / calls[name])
    return {name: statistics.median(values) for name, values in samples.items()}


def blas_threads() -> int:
    """Threads OpenBLAS uses, if threadpoolctl can tell; else the core count."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return os.cpu_count() or 1
    for pool in threadpool_info():
        if pool.get("user_api") == "blas":
            return int(pool["num_threads"])
    return os.cpu_count() or 1


def bench_scores(
    heads: int, tokens: int, dim: int, rng: np.random.Generator, quick: bool
) -> ScoreRow:
    query = rng.standard_normal((1, heads, tokens, dim), dtype=np.float32)
    key = rng.standard_normal((1, heads, tokens, dim), dtype=np.float32)
    work = flops(query.shape, key.shape)
    n = max(2, round((work / 2) ** (1 / 3)))  # n×n @ n×n costs 2n³ FLOPs
    square = rng.standard_normal((n, n), dtype=np.float32)
    big = tokens >= 1024
    repeats = 3 if quick else (11 if big else 9)
    min_seconds = 0.002 if quick else (0.0 if big else 0.02)
    times = round_robin(
        {
            "matmul": lambda: scores_matmul(query, key),
            "batched": lambda: scores_batched(query, key),
            "einsum": lambda: np.einsum("...id,...jd->...ij", query, key, optimize=True),
            "square": lambda: square @ square,
        },
        repeats,
        min_seconds,
        pause=0.1 if big else 0.0,
    )
    eta = estimate_loop_seconds(query.shape, key.shape)
    if eta < LOOP_LIMIT["quick" if quick else "full"]:
        runs = 1 if eta > 1.0 else 3
        loop = Timing(round_robin({"loop": lambda: scores_loop(query, key)}, runs, 0.0)["loop"])
    else:
        loop = Timing(eta, estimated=True)
    batched = times["batched"]
    row = ScoreRow(
        heads=heads,
        tokens=tokens,
        dim=dim,
        flops=work,
        loop=loop,
        matmul=Timing(times["matmul"]),
        batched=Timing(batched),
        einsum=Timing(times["einsum"]),
        square=Timing(times["square"]),
        square_n=n,
    )
    row.ratios = {
        "loop/batched": loop.seconds / batched,
        "matmul/batched": times["matmul"] / batched,
        "einsum/batched": times["einsum"] / batched,
    }
    row.batched_gflops = work / batched / 1e9
    row.square_gflops = 2 * n**3 / times["square"] / 1e9
    row.batched_pct_of_square = 100 * row.batched_gflops / row.square_gflops
    return row


def bench_attention(
    heads: int, tokens: int, dim: int, rng: np.random.Generator, quick: bool
) -> AttentionRow:
    shape = (1, heads, tokens, dim)
    query, key, value = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))

    grid = np.empty((1, heads, tokens, tokens), dtype=np.float32)
    out = np.empty(shape, dtype=np.float32)

    def two_matmuls() -> np.ndarray:  # the work attention() cannot avoid, into kept arrays
        np.matmul(query, np.swapaxes(key, -1, -2), out=grid)  # (1, H, T, T)
        return np.matmul(grid, value, out=out)  # (1, H, T, T) @ (1, H, T, d) -> (1, H, T, d)

    weights = np.empty_like(grid)  # (1, H, T, T)
    row_max = np.empty((1, heads, tokens, 1), dtype=np.float32)

    def numpy_floor() -> np.ndarray:  # the products plus the least a softmax reads and writes
        np.matmul(query, np.swapaxes(key, -1, -2), out=grid)  # (1, H, T, T)
        np.max(grid, axis=-1, keepdims=True, out=row_max)  # one pass: each row's max
        np.exp2(grid, out=weights)  # one pass: read every score, write every weight
        return np.matmul(weights, value, out=out)  # (1, H, T, d)

    def exp_only() -> np.ndarray:  # a bound below any softmax: no max, no sum, no scale
        np.matmul(query, np.swapaxes(key, -1, -2), out=grid)  # (1, H, T, T)
        np.exp2(grid, out=weights)
        return np.matmul(weights, value, out=out)  # (1, H, T, d)

    # As the app keeps one: each edit recomputes the same shape. (A tree from before
    # Workspace existed, run for a before/after --compare, has none.)
    workspace = getattr(compute, "Workspace", None)
    kept: dict[str, Any] = {} if workspace is None else {"workspace": workspace()}
    repeats = 3 if quick else 7
    min_seconds = 0.0 if tokens >= 1024 else 0.05
    pause = 0.0 if quick else 0.1
    times = round_robin(
        {
            "attention": lambda: attention(query, key, value, **kept),
            "fresh": lambda: attention(query, key, value),
            "two matmuls": two_matmuls,
            "numpy floor": numpy_floor,
            "exp only": exp_only,
        },
        repeats,
        min_seconds,
        pause,
    )
    # torch runs in its own process: its OpenMP pool must not share cores with OpenBLAS.
    torch_seconds = None if quick else _torch_sdpa_seconds(heads, tokens, dim, repeats)
    if torch_seconds is not None:
        times["torch"] = torch_seconds
    tracemalloc.start()
    result = attention(query, key, value)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    score_tensor = heads * tokens * tokens * 4
    row = AttentionRow(
        heads=heads,
        tokens=tokens,
        dim=dim,
        attention_seconds=times["attention"],
        fresh_arrays_seconds=times["fresh"],
        two_matmuls_seconds=times["two matmuls"],
        ratio_to_two_matmuls=times["attention"] / times["two matmuls"],
        peak_extra_bytes=peak,
        peak_in_score_tensors=peak / score_tensor,
        floor_seconds=times["numpy floor"],
        ratio_to_floor=times["attention"] / times["numpy floor"],
        exp_only_seconds=times["exp only"],
    )
    if "torch" in times:
        row.torch_seconds = times["torch"]
        row.ratio_to_torch = times["attention"] / times["torch"]
    return row


def _torch_sdpa_seconds(heads: int, tokens: int, dim: int, repeats: int) -> float | None:
    """Median seconds of PyTorch's fused CPU attention on the same shape, in its own process.

    torch's OpenMP pool and numpy's OpenBLAS pool in one process fight over the cores
    (medians ×3–10 measured here), so torch runs in a child that never imports numpy's
    BLAS work. None when torch is not installed.
    """
    if importlib.util.find_spec("torch") is None:
        return None
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "attn_explorer.cli.bench_measure",
            "--torch-worker",
            str(heads),
            str(tokens),
            str(dim),
            str(repeats),
            str(blas_threads()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"torch worker failed: {out.stderr.strip()[-500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def torch_worker(heads: int, tokens: int, dim: int, repeats: int, threads: int) -> float:
    """Run in the child process: median seconds of ``F.scaled_dot_product_attention``."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn((1, heads, tokens, dim), generator=generator, dtype=torch.float32)
        for _ in range(3)
    )

    def run() -> object:
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v)

    min_seconds = 0.0 if tokens >= 1024 else 0.05
    return round_robin({"torch": run}, repeats, min_seconds, 0.1)["torch"]


if __name__ == "__main__":
    if sys.argv[1:2] != ["--torch-worker"]:
        raise SystemExit(
            "usage: python -m attn_explorer.cli.bench_measure --torch-worker H T d repeats threads"
        )
    h, t, d, repeats, threads = (int(a) for a in sys.argv[2:7])
    print(json.dumps({"seconds": torch_worker(h, t, d, repeats, threads)}))
