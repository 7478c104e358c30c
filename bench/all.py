"""Every performance target of every round in one command: measure, now, target, ok.

    python bench/all.py [--quick] [--llm] [--json [OUT]] [--compare BEFORE.json]
                        [--tree DIR] [--only NAME ...]

Each bench runs in its own process, one after the other (never two at once: they
would share the two cores), with ``--json``; their target rows are printed as one
table. Each row carries the load average (1 min) read just before its bench started
and the core count: a figure taken at a load over :data:`NOISY_LOAD` is marked
``noisy`` (the bench's own work raises the load while it runs, so the load before it
is the one that says what else was running). Issue 37's table is printed again at the
end, its rows in the issue's order.

``--llm`` adds the decoder benches: SmolLM2's open + first forward against a warm one
and against transformers, the instruments, the 8 192-token pass's memory and time,
and the Model dock's long pass (three runs: its stall target must hold in each).
``--quick`` runs every bench's quick mode (small sizes, no torch, seconds each): the
test suite runs it so a bench that crashes fails a test. A full run waits before each
bench for the load the one before left behind to decay (:func:`settle`, a minute at most).

``--json OUT`` writes the whole report (rows, each bench's own report, the load, the
commit measured) to OUT (``-`` or no OUT: standard output). ``--compare BEFORE.json``
adds the figure of the release before and the ratio now / before to each row; make
BEFORE.json with this same script run on the older tree::

    git archive RELEASE | tar -x -C /tmp/before
    python bench/all.py --llm --tree /tmp/before --json before.json
    python bench/all.py --llm --compare before.json

``--tree DIR`` measures the attn_explorer package of DIR with this checkout's bench
scripts (a bench the older tree cannot run shows as a failed row). Benches added by
other issues (``bench/patching.py``, ``bench/threads.py``) run when their file exists;
``bench/compare_view.py`` (the two-prompt dock's stalls, issue 35) runs with ``--llm``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: its own attn_explorer

from attn_explorer.cli.bench_report import LOWER, TargetRow, load_rows  # noqa: E402

#: A figure taken when the 1-minute load average was above this is marked noisy.
NOISY_LOAD = 1.5

#: Before each run of a full bench, wait up to SETTLE_SECONDS for the 1-minute load average
#: to fall to SETTLED_LOAD: a bench's own work leaves it near 2 on two cores, and it takes
#: about 40 s to decay, so without the wait the bench after a long one (the long pass, the
#: Model dock's three runs) starts on a machine that looks busy, and is, with its own
#: echo. A load that stays high (another tenant) is waited for once, then measured and
#: marked noisy. ``--quick`` never waits.
SETTLED_LOAD = 1.0
SETTLE_SECONDS = 60.0


def settle(
    limit: float = SETTLED_LOAD,
    seconds: float = SETTLE_SECONDS,
    load: Any = os.getloadavg,
    sleep: Any = time.sleep,
) -> float:
    """Wait until the 1-minute load is at most ``limit``, or ``seconds`` have passed (in
    steps of 5 s); the load at the end."""
    waited = 0.0
    now = load()[0]
    while now > limit and waited < seconds:
        sleep(5.0)
        waited += 5.0
        now = load()[0]
    return float(now)


#: Issue 37's targets, which replace older ones for the rows the compute bench names
#: (its module keeps issue 15's numbers for ``attn-explorer bench`` on its own).
TARGETS_37 = {
    "attention() / torch SDPA (own process), H16 T512 d64": 1.3,
    "attention() / torch SDPA (own process), H16 T2048 d64": 1.3,
    "attention() / its two matmuls, H16 T512 d64": 1.5,
}

#: Issue 37's table in its order: (label, the start of the measure that answers it).
ISSUE_37 = (
    ("attention() / torch SDPA, H16 T512", "attention() / torch SDPA (own process), H16 T512"),
    (
        "  its numpy floor / torch SDPA",
        "attention()'s numpy floor / torch SDPA (own process), H16 T512",
    ),
    ("attention() / its own two matmuls, T512", "attention() / its two matmuls, H16 T512"),
    (
        "  its numpy floor / its two matmuls",
        "attention()'s numpy floor / its two matmuls, H16 T512",
    ),
    (
        "  products and exp2 alone / matmuls",
        "the two products and an exp2 alone / the two matmuls, H16 T512",
    ),
    ("attention() / torch SDPA, H16 T2048", "attention() / torch SDPA (own process), H16 T2048"),
    (
        "  its numpy floor / torch SDPA",
        "attention()'s numpy floor / torch SDPA (own process), H16 T2048",
    ),
    ("cold start → first paint", "cold start to first paint ("),
    ("  its floor: numpy + an empty window", "cold start floor: numpy + an empty PySide6 window"),
    ("peak RSS of an 8 192-token pass of SmolLM2", "long pass peak RSS, 8,192 tokens"),
    ("open SmolLM2 + first forward / warm forward", "SmolLM2 open + first forward / warm"),
    ("  its floor / warm forward", "SmolLM2 open + first forward floor / warm forward"),
    ("tiled / its numpy floor (table 5)", "tiled / numpy floor"),
    ("python bench/all.py --llm", "bench/all.py"),
)


@dataclass
class Bench:
    """One bench script: how to run it (full and quick), and whether it needs --llm."""

    name: str
    args: list[str]
    quick: list[str] = field(default_factory=list)
    llm: bool = False
    runs: int = 1  # > 1: run again; each row keeps its worst figure
    full_only: bool = False  # skipped with --quick (minutes even at its smallest)


def benches(quick: bool, llm: bool) -> list[Bench]:
    """The benches to run, in order; optional ones only when their file exists."""
    found = [
        Bench("attn-explorer bench", ["-m", "attn_explorer", "bench", "--json"], ["--quick"]),
        Bench("bench/gui.py", ["bench/gui.py", "--json"], ["--quick"]),
        Bench("bench/stepper.py", ["bench/stepper.py", "--json"], ["--quick"]),
        Bench("bench/vectors.py", ["bench/vectors.py", "--json"], ["--quick", "--tokens", "8"]),
        Bench("bench/tiled.py", ["bench/tiled.py", "--json"], ["--quick"]),
        Bench("bench/dequantize.py", ["bench/dequantize.py", "--json"], ["--quick"]),
        Bench(
            "bench/models.py", ["bench/models.py", "--json"], ["--rounds", "1", "--repeats", "3"]
        ),
        Bench("bench/models.py --llm", ["bench/models.py", "--llm", "--json"], ["--quick"], True),
        Bench(
            "bench/models.py --analysis",
            ["bench/models.py", "--analysis", "--json"],
            llm=True,
            full_only=True,
        ),
        Bench(
            "bench/long_context.py",
            ["bench/long_context.py", "--json"],
            ["--tokens", "256", "--ours-only"],
            True,
        ),
        Bench(
            "bench/model_view.py",
            ["bench/model_view.py", "--json"],
            ["--tokens", "1024"],  # up to ~700 tokens run in one full pass: no long pass
            True,
            runs=3,
        ),
    ]
    found.append(
        Bench(
            "bench/compare_view.py",
            ["bench/compare_view.py", "--json"],
            ["--quick"],  # a tiny random model: the steps run, the stalls have no target
            True,
        )
    )
    for script in ("patching.py", "threads.py"):  # other issues' benches, when merged
        if (HERE / script).is_file():
            found.append(Bench(f"bench/{script}", [f"bench/{script}", "--json"], ["--quick"]))
    chosen = [b for b in found if (llm or not b.llm) and not (quick and b.full_only)]
    if quick:
        for bench in chosen:
            bench.runs = 1
    return chosen


def last_json(text: str) -> dict[str, Any]:
    """The last JSON object of a bench's output (some print their tables before it)."""
    decoder = json.JSONDecoder()
    starts = [n for n, char in enumerate(text) if char == "{" and (n == 0 or text[n - 1] == "\n")]
    for start in reversed(starts):
        try:
            found, _ = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    raise ValueError("printed no JSON report")


def row_dicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """A bench report's target rows as plain dicts (the fields of TargetRow)."""
    rows = report.get("targets")
    if not isinstance(rows, list):
        raise ValueError("its JSON report has no 'targets' list")
    names = ("measure", "now", "unit", "target", "better", "note")
    return [{k: row[k] for k in names if k in row} for row in rows]


def run_bench(bench: Bench, tree: Path, quick: bool) -> dict[str, Any]:
    """Run one bench (``bench.runs`` times); its rows, each with the load it ran at."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    command = [sys.executable, *bench.args, *(bench.quick if quick else [])]
    if command[1].startswith("bench/"):
        command[1] = str(HERE / command[1].removeprefix("bench/"))
    merged: dict[str, dict[str, Any]] = {}
    reports, loads, seconds = [], [], 0.0
    for run in range(bench.runs):
        load = os.getloadavg()[0] if quick else settle()
        loads.append(load)
        print(
            f"  running {bench.name} ({run + 1}/{bench.runs}, load {load:.2f}) …",
            file=sys.stderr,
            flush=True,
        )
        start = time.perf_counter()
        try:
            out = subprocess.run(
                command,
                capture_output=True,
                text=True,
                cwd=tree,
                env=env,
                timeout=3600,
                check=False,
            )
            if out.returncode != 0:
                last = (out.stderr.strip().splitlines() or ["no output"])[-1]
                raise ValueError(f"exit status {out.returncode}: {last[:200]}")
            report = last_json(out.stdout)
            rows = row_dicts(report)
        except (ValueError, subprocess.TimeoutExpired) as exc:
            print(f"  {bench.name} failed: {exc}", file=sys.stderr, flush=True)
            return {
                "name": bench.name,
                "failed": str(exc),
                "load": max(loads),
                "report": {},
                "rows": [failed_row(bench.name, str(exc), load)],
            }
        seconds += time.perf_counter() - start
        reports.append(report)
        for row in rows:
            row["load"] = load
            row["bench"] = bench.name
            was = merged.get(row["measure"])
            if was is None or worse(row, was):
                merged[row["measure"]] = row
    print(f"  {bench.name} took {seconds:.0f} s", file=sys.stderr, flush=True)
    return {
        "name": bench.name,
        "load": max(loads),
        "seconds": seconds,
        "report": reports[0] if len(reports) == 1 else reports,
        "rows": list(merged.values()),
    }


def worse(row: dict[str, Any], was: dict[str, Any]) -> bool:
    """True if ``row``'s figure is worse than ``was``'s (of the same measure)."""
    if row.get("now") is None:
        return False
    if was.get("now") is None:
        return True
    bigger = row["now"] > was["now"]
    return bigger if row.get("better", LOWER) == LOWER else not bigger


def failed_row(name: str, why: str, load: float) -> dict[str, Any]:
    return {
        "measure": f"{name}: failed",
        "now": None,
        "unit": "",
        "target": None,
        "better": LOWER,
        "note": why,
        "load": load,
        "bench": name,
    }


def with_issue_targets(row: dict[str, Any]) -> dict[str, Any]:
    target = TARGETS_37.get(row["measure"])
    if target is not None and row.get("target") != target:
        row = {**row, "target": target}
        row["note"] = "; ".join(filter(None, [row.get("note", ""), "target of issue 37"]))
    return row


def finish(rows: list[dict[str, Any]], failed: list[str]) -> list[dict[str, Any]]:
    """Each row with its ok and noisy flags, plus the row that says whether every bench ran."""
    out = []
    for row in rows:
        row = with_issue_targets(row)
        target_row = TargetRow(
            **{k: row[k] for k in ("measure", "now", "unit") if k in row},
            **{k: row[k] for k in ("target", "better", "note") if k in row},
        )
        out.append({**row, "ok": target_row.ok, "noisy": row.get("load", 0.0) > NOISY_LOAD})
    ran = {
        "measure": "bench/all.py: every bench ran",
        "now": float(len(failed)),
        "unit": "failed",
        "target": 0.0,
        "better": LOWER,
        "note": ", ".join(failed) or "none failed",
        "load": None,
        "bench": "bench/all.py",
    }
    out.append({**ran, "ok": not failed, "noisy": False})
    return out


def number(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "×":
        return f"{value:.2f}×"
    digits = f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{digits} {unit}".rstrip()


def format_table(title: str, rows: list[dict[str, Any]], before: dict[str, TargetRow]) -> str:
    """The rows as an aligned table; with ``before``, its figure and now / before."""
    header = ["measure", "now", "target", "ok", "load"]
    if before:
        header += ["before", "now/before"]
    header.append("note")
    body = []
    for row in rows:
        target = (
            ""
            if row.get("target") is None
            else (
                ("≤ " if row.get("better", LOWER) == LOWER else "≥ ")
                + number(row["target"], row["unit"])
            )
        )
        ok = {True: "ok", False: "MISSED", None: ""}[row["ok"]]
        load = "" if row.get("load") is None else f"{row['load']:.2f}"
        if row["noisy"]:
            load += " noisy"
        line = [row["measure"], number(row["now"], row["unit"]), target, ok, load]
        if before:
            was = before.get(row["measure"])
            now, old = row.get("now"), None if was is None else was.now
            line += [
                number(old, row["unit"]) if was else "",
                f"{now / old:.2f}" if now is not None and old else "",
            ]
        line.append(row.get("note", ""))
        body.append(line)
    widths = [max(len(line[n]) for line in [header, *body]) for n in range(len(header) - 1)]
    out = [title, ""]
    for n, line in enumerate([header, *body]):
        cells = [
            cell.ljust(w) if c in (0, 2, 3, 4) else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(line, widths, strict=False))
        ]
        out.append("  ".join([*cells, line[-1]]).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths) + "  ----")
    return "\n".join(out)


def issue_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 37's table: for each of its lines, the first row whose measure answers it."""
    picked = []
    for label, start in ISSUE_37:
        row = next((r for r in rows if r["measure"].startswith(start)), None)
        if row is None:
            row = {
                "measure": start,
                "now": None,
                "unit": "",
                "ok": None,
                "noisy": False,
                "note": "not measured in this run",
            }
        picked.append({**row, "note": f"[{label}] {row.get('note', '')}".strip()})
    return picked


def commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every bench's quick mode")
    parser.add_argument("--llm", action="store_true", help="add the decoder benches")
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="OUT",
        help="write the whole report as JSON to OUT (default: stdout)",
    )
    parser.add_argument(
        "--compare",
        metavar="BEFORE.json",
        help="add the figures of an earlier --json report and now / before",
    )
    parser.add_argument(
        "--tree",
        type=Path,
        default=HERE.parent,
        help="the checkout whose attn_explorer is measured (default: this one)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="only the benches whose name contains one of these",
    )
    args = parser.parse_args(argv)
    before: dict[str, TargetRow] = {}
    if args.compare:
        try:
            before = {row.measure: row for row in load_rows(args.compare)}
        except (OSError, ValueError) as exc:
            print(f"bench/all.py: --compare: {exc}", file=sys.stderr)
            return 2
    tree = args.tree.resolve()
    if not (tree / "attn_explorer").is_dir():
        print(f"bench/all.py: --tree: {tree} holds no attn_explorer package", file=sys.stderr)
        return 2
    chosen = benches(args.quick, args.llm)
    if args.only:
        chosen = [b for b in chosen if any(part in b.name for part in args.only)]
    cores = os.cpu_count()
    start_load = os.getloadavg()
    results = [run_bench(bench, tree, args.quick) for bench in chosen]
    failed = [r["name"] for r in results if "failed" in r]
    rows = finish([row for r in results for row in r["rows"]], failed)
    title = (
        f"Performance targets of every round, measured in one run of {commit(tree)} "
        f"({'quick, ' if args.quick else ''}{cores} cores; load before the run "
        f"{start_load[0]:.2f}, after {os.getloadavg()[0]:.2f}; 'noisy': load > {NOISY_LOAD})"
    )
    text = format_table(title, rows, before)
    text += "\n\n" + format_table("Issue 37's table", issue_rows(rows), before)
    if args.json is not None:
        report = {
            "commit": commit(tree),
            "tree": str(tree),
            "quick": args.quick,
            "llm": args.llm,
            "cores": cores,
            "load_before": start_load,
            "load_after": os.getloadavg(),
            "noisy_load": NOISY_LOAD,
            "benches": {r["name"]: {k: v for k, v in r.items() if k != "rows"} for r in results},
            "targets": rows,
        }
        if args.json == "-":
            print(json.dumps(report, indent=1))
            return 0
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
