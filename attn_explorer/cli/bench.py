"""``attn-explorer bench``: one table of loop / matmul / batched / einsum timings.

One job: measure the compute layer in one run and print it; the measuring, the
text table and the target rows read the same report, so they stay in one module.

Everything in the table is measured in one run, on float32 inputs with B = 1:

* score strategies at several (H, T, d): median seconds of the loop (or its
  calibrated ETA, marked ``est.``, when it would take too long), the per-head
  matmul, the batched matmul, ``np.einsum(optimize=True)`` and a square
  ``np.matmul`` of equal FLOPs, with the ratios to ``batched`` and how close the
  batched call comes to the square matmul's GFLOP/s;
* full ``attention()`` (scale + mask + softmax + weights @ V): its time, its ratio
  to the two batched matmuls it cannot avoid, its peak extra memory as a multiple
  of one (H, T, T) tensor, and PyTorch's ``scaled_dot_product_attention`` when
  torch is installed (timed in its own process);
* the target rows of issue 15 (now, target, ok), also in ``--json``.

Methods are timed round-robin (one sample of each, then the next round) so a
burst of load on the machine hits them all alike; each sample repeats a fast call
until it lasts long enough to be above timer noise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from attn_explorer import compute
from attn_explorer.cli.bench_report import (
    HIGHER,
    TargetRow,
    compare,
    format_rows,
    load_rows,
)
from attn_explorer.cli.console import OneLineParser
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
            "attn_explorer.cli.bench",
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


def _fmt_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _fmt_timing(timing: Timing) -> str:
    return _fmt_seconds(timing.seconds) + (" est." if timing.estimated else "")


def format_tables(report: dict[str, Any]) -> str:
    """The report as aligned text tables."""
    lines = [
        "Attention Explorer benchmark: float32, B = 1, median of round-robin samples",
        f"numpy {report['numpy']}, BLAS threads {report['blas_threads']}, "
        f"{report['cpu_count']} cores, {report['machine']}",
        "",
    ]
    header = (
        f"{'H':>3} {'T':>5} {'d':>3} | {'loop':>12} {'matmul':>9} {'batched':>9} {'einsum':>9} "
        f"{'square mm':>9} | {'loop/b':>8} {'mm/b':>5} {'ein/b':>5} | {'GFLOP/s':>7} {'%sq':>4}"
    )
    lines += ["Scores S = Q Kᵀ", header, "-" * len(header)]
    for row in report["scores"]:
        r = row["ratios"]
        lines.append(
            f"{row['heads']:>3} {row['tokens']:>5} {row['dim']:>3} | "
            f"{_fmt_timing(Timing(**row['loop'])):>12} "
            f"{_fmt_seconds(row['matmul']['seconds']):>9} "
            f"{_fmt_seconds(row['batched']['seconds']):>9} "
            f"{_fmt_seconds(row['einsum']['seconds']):>9} "
            f"{_fmt_seconds(row['square']['seconds']):>9} | "
            f"{r['loop/batched']:>8.3g} {r['matmul/batched']:>5.2f} {r['einsum/batched']:>5.2f} | "
            f"{row['batched_gflops']:>7.1f} {row['batched_pct_of_square']:>3.0f}%"
        )
    lines += [
        "",
        "Full attention() = scale + softmax + weights @ V "
        "(with a Workspace, as the app calls it; 'fresh': new arrays every call)",
    ]
    header = (
        f"{'H':>3} {'T':>5} {'d':>3} | {'attention':>10} {'fresh':>10} {'2 matmuls':>10} "
        f"{'ratio':>5} | "
        f"{'peak extra':>10} {'× (H,T,T)':>9} | {'torch sdpa':>10} {'ours/torch':>10}"
    )
    lines += [header, "-" * len(header)]
    for row in report["attention"]:
        torch_text = (
            f"{_fmt_seconds(row['torch_seconds']):>10} {row['ratio_to_torch']:>10.2f}"
            if row["torch_seconds"] is not None
            else f"{'n/a':>10} {'':>10}"
        )
        lines.append(
            f"{row['heads']:>3} {row['tokens']:>5} {row['dim']:>3} | "
            f"{_fmt_seconds(row['attention_seconds']):>10} "
            f"{_fmt_seconds(row['fresh_arrays_seconds']):>10} "
            f"{_fmt_seconds(row['two_matmuls_seconds']):>10} {row['ratio_to_two_matmuls']:>5.2f} | "
            f"{row['peak_extra_bytes'] / 2**20:>7.0f} MB {row['peak_in_score_tensors']:>9.2f} | "
            f"{torch_text}"
        )
    return "\n".join(lines)


def target_rows(report: dict[str, Any]) -> list[TargetRow]:
    """The figures issue 15 sets targets for (and the ones to keep), from one report."""
    rows: list[TargetRow] = []
    if not report.get("torch"):
        torch_note = "torch not installed: pip install -e '.[reference]'"
    else:
        torch_note = "not measured with --quick" if report.get("quick") else ""
    for row in report["attention"]:
        shape = f"H{row['heads']} T{row['tokens']} d{row['dim']}"
        big = (row["heads"], row["tokens"], row["dim"]) in FULL_ATTENTION_SHAPES
        rows.append(
            TargetRow(
                f"attention() / torch SDPA (own process), {shape}",
                row["ratio_to_torch"],
                "×",
                1.5 if big else None,
                note="" if row["ratio_to_torch"] is not None else torch_note,
            )
        )
        rows.append(
            TargetRow(
                f"attention() / its two matmuls, {shape}",
                row["ratio_to_two_matmuls"],
                "×",
                1.6 if (row["heads"], row["tokens"]) == (16, 512) else None,
            )
        )
        rows.append(TargetRow(f"attention(), {shape}", row["attention_seconds"] * 1e3, "ms"))
        if row["ratio_to_torch"] is not None:
            rows.append(
                TargetRow(
                    f"attention() with fresh arrays / torch SDPA, {shape}",
                    row["fresh_arrays_seconds"] / row["torch_seconds"],
                    "×",
                    note="a library call without a Workspace",
                )
            )
    for row in report["scores"]:
        dims = (row["heads"], row["tokens"], row["dim"])
        if dims == (16, 64, 16):
            rows.append(
                TargetRow(
                    "per-head matmul / batched, H16 T64 d16",
                    row["ratios"]["matmul/batched"],
                    "×",
                    1.5,
                    HIGHER,
                    "kept: batching the heads stays clearly faster",
                )
            )
        if dims[1] >= 512:
            rows.append(
                TargetRow(
                    f"einsum / batched, H{dims[0]} T{dims[1]} d{dims[2]}",
                    row["ratios"]["einsum/batched"],
                    "×",
                    0.95,
                    HIGHER,
                    "kept: batched at least as fast as np.einsum (within noise)",
                )
            )
    return rows


def run_benchmark(quick: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    """Measure every row of the table and return it as plain data."""
    rng = np.random.default_rng(0)
    score_shapes = QUICK_SCORE_SHAPES if quick else FULL_SCORE_SHAPES
    attention_shapes = QUICK_ATTENTION_SHAPES if quick else FULL_ATTENTION_SHAPES
    report: dict[str, Any] = {
        "numpy": np.__version__,
        "blas_threads": blas_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "quick": quick,
        "torch": importlib.util.find_spec("torch") is not None,
        "dtype": "float32",
        "scores": [],
        "attention": [],
    }
    for heads, tokens, dim in score_shapes:
        if progress:
            progress(f"scores H={heads} T={tokens} d={dim}")
        report["scores"].append(asdict(bench_scores(heads, tokens, dim, rng, quick)))
    for heads, tokens, dim in attention_shapes:
        if progress:
            progress(f"attention H={heads} T={tokens} d={dim}")
        report["attention"].append(asdict(bench_attention(heads, tokens, dim, rng, quick)))
    report["targets"] = [row.as_dict() for row in target_rows(report)]
    return report


def run_bench(argv: Sequence[str]) -> int:
    """The ``bench`` sub-command: print the table (or ``--json``); return the exit status."""
    parser = OneLineParser(  # argument errors: one line, exit 2 (cli/console.py)
        prog="attn-explorer bench",
        description="Time loop / matmul / batched / einsum scores and full attention(), "
        "against the performance targets (now, target, ok).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small shapes, few repeats, no torch (< 10 s)"
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE.json", "AFTER.json"),
        help="print the target rows of two --json runs side by side (of any bench)",
    )
    args = parser.parse_args(list(argv))
    if args.compare:
        try:
            before, after = (load_rows(path) for path in args.compare)
        except (OSError, ValueError) as exc:
            print(f"attn-explorer bench: {exc}", file=sys.stderr)
            return 2
        print(compare(before, after))
        return 0

    def progress(message: str) -> None:
        if not args.json:
            print(f"  measuring {message} …", file=sys.stderr, flush=True)

    report = run_benchmark(quick=args.quick, progress=progress)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_tables(report))
        print()
        rows = [TargetRow(**{k: v for k, v in r.items() if k != "ok"}) for r in report["targets"]]
        print(format_rows("Targets (issue 15), measured in this run", rows))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--torch-worker"]:
        h, t, d, repeats, threads = (int(a) for a in sys.argv[2:7])
        print(json.dumps({"seconds": torch_worker(h, t, d, repeats, threads)}))
        raise SystemExit(0)
    raise SystemExit(run_bench(sys.argv[1:]))
