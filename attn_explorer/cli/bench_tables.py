"""The compute bench's report in words: aligned text tables and the target rows of issue 15.

Both read the plain-data report :func:`attn_explorer.cli.bench.run_benchmark` returns
(the same one ``--json`` prints), so the table, the JSON and the targets never
disagree.
"""

from __future__ import annotations

from typing import Any

from attn_explorer.cli.bench_measure import FULL_ATTENTION_SHAPES, Timing
from attn_explorer.cli.bench_report import HIGHER, TargetRow


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
        floor = row.get("floor_seconds")  # absent from reports of older trees
        if floor:
            floor_note = "numpy's floor: the two products, a row max and an exp2 of every score"
            rows.append(
                TargetRow(
                    f"attention()'s numpy floor / its two matmuls, {shape}",
                    floor / row["two_matmuls_seconds"],
                    "×",
                    note=floor_note,
                )
            )
            rows.append(
                TargetRow(f"attention() / its numpy floor, {shape}", row["ratio_to_floor"], "×")
            )
            if row.get("exp_only_seconds"):
                rows.append(
                    TargetRow(
                        f"the two products and an exp2 alone / the two matmuls, {shape}",
                        row["exp_only_seconds"] / row["two_matmuls_seconds"],
                        "×",
                        note="a bound below any softmax: no row max, no sum, no scale",
                    )
                )
            if row["torch_seconds"] is not None:
                rows.append(
                    TargetRow(
                        f"attention()'s numpy floor / torch SDPA (own process), {shape}",
                        floor / row["torch_seconds"],
                        "×",
                        note=floor_note,
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
