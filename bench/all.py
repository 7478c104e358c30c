"""Every performance target in one run: ``attn-explorer bench``, bench/gui.py, bench/models.py.

    python bench/all.py [--quick] [--json] [--llm]

Each bench runs in its own process, one after the other (never two at once: they
would share the two cores), with ``--json``; their target rows are printed as one
table (measure, now, target, ok) or, with ``--json``, written as one JSON file that
``attn-explorer bench --compare BEFORE.json AFTER.json`` reads. ``--llm`` adds the
decoder bench (SmolLM2 against transformers; about a minute more).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: its own attn_explorer

from attn_explorer.cli.bench_report import TargetRow, format_rows, rows_json  # noqa: E402


def run(name: str, command: list[str]) -> tuple[list[TargetRow], dict]:
    """Run one bench with --json; its target rows and its whole report."""
    start = time.perf_counter()
    print(f"  running {name} …", file=sys.stderr, flush=True)
    # Every child imports this checkout's attn_explorer, not whichever one is installed.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    out = subprocess.run(
        command, capture_output=True, text=True, cwd=HERE.parent, env=env, timeout=1800
    )
    if out.returncode != 0:
        note = (out.stderr.strip().splitlines() or ["no output"])[-1][:200]
        print(f"  {name} failed: {note}", file=sys.stderr)
        return [TargetRow(f"{name}: failed", None, "", note=note)], {}
    report = json.loads(out.stdout)
    rows = [TargetRow(**{k: v for k, v in row.items() if k != "ok"}) for row in report["targets"]]
    print(f"  {name} took {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return rows, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the benches' quick modes")
    parser.add_argument("--json", action="store_true", help="print one JSON report")
    parser.add_argument("--llm", action="store_true", help="add the decoder bench")
    args = parser.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    py = sys.executable
    benches = [
        ("attn-explorer bench", [py, "-m", "attn_explorer", "bench", "--json", *quick]),
        ("bench/gui.py", [py, str(HERE / "gui.py"), "--json", *quick]),
        ("bench/models.py", [py, str(HERE / "models.py"), "--json"]),
    ]
    if args.llm:
        benches.append(("bench/models.py --llm", [py, str(HERE / "models.py"), "--llm", "--json"]))
    rows: list[TargetRow] = []
    reports = {}
    for name, command in benches:
        found, report = run(name, command)
        rows += found
        reports[name] = report
    if args.json:
        print(json.dumps(rows_json(rows, benches=reports), indent=2))
    else:
        print(format_rows("Performance targets (issue 15), measured in one run", rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
