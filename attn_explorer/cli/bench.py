"""``attn-explorer bench``: one table of loop / matmul / batched / einsum timings.

One job: run the bench and print its report. The measuring is in
:mod:`.bench_measure`, the text tables and target rows in :mod:`.bench_tables`; all
of them read the one report :func:`run_benchmark` returns.

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
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from attn_explorer.cli.bench_measure import (
    FULL_ATTENTION_SHAPES,
    FULL_SCORE_SHAPES,
    QUICK_ATTENTION_SHAPES,
    QUICK_SCORE_SHAPES,
    bench_attention,
    bench_scores,
    blas_threads,
)
from attn_explorer.cli.bench_report import TargetRow, compare, format_rows, load_rows
from attn_explorer.cli.bench_tables import format_tables, target_rows
from attn_explorer.cli.console import OneLineParser


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
    raise SystemExit(run_bench(sys.argv[1:]))
