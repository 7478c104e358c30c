"""The target table every benchmark prints: ok/MISSED by direction, JSON, and --compare."""

import json

import pytest

from attn_explorer.cli.bench import run_bench
from attn_explorer.cli.bench_report import (
    HIGHER,
    TargetRow,
    compare,
    format_rows,
    load_rows,
    rows_json,
)


def test_ok_follows_the_direction_of_better():
    assert TargetRow("t", 10.0, "ms", 16.0).ok is True
    assert TargetRow("t", 17.0, "ms", 16.0).ok is False
    assert TargetRow("r", 61.0, "/s", 60.0, HIGHER).ok is True
    assert TargetRow("r", 59.0, "/s", 60.0, HIGHER).ok is False
    assert TargetRow("x", None, "×", 1.5, note="torch not installed").ok is None
    assert TargetRow("y", 3.0, "ms").ok is None  # no target: nothing to judge


def test_table_shows_now_target_and_ok():
    rows = [
        TargetRow("edit → repaint", 12.345, "ms", 16.0),
        TargetRow("redraws", 41.0, "/s", 60.0, HIGHER, "plain 54 /s"),
        TargetRow("ours / torch", None, "×", 1.5, note="torch not installed"),
    ]
    text = format_rows("Title", rows)
    lines = text.splitlines()
    assert lines[0] == "Title"
    assert lines[2].split() == ["measure", "now", "target", "ok", "note"]
    assert "12.3 ms" in lines[4] and "≤ 16 ms" in lines[4] and lines[4].rstrip().endswith("ok")
    assert "41 /s" in lines[5] and "≥ 60 /s" in lines[5] and "MISSED" in lines[5]
    assert "n/a" in lines[6] and "≤ 1.50×" in lines[6] and "torch not installed" in lines[6]


def test_json_round_trip_and_compare(tmp_path):
    before = [TargetRow("a", 20.0, "ms", 16.0), TargetRow("b", 30.0, "/s", 60.0, HIGHER)]
    after = [TargetRow("a", 10.0, "ms", 16.0), TargetRow("b", 66.0, "/s", 60.0, HIGHER)]
    for name, rows in (("before", before), ("after", after)):
        (tmp_path / f"{name}.json").write_text(json.dumps(rows_json(rows, bench="x")))
    assert load_rows(tmp_path / "after.json") == after
    table = compare(load_rows(tmp_path / "before.json"), load_rows(tmp_path / "after.json"))
    a_line = next(line for line in table.splitlines() if line.startswith("a "))
    assert a_line.split()[1:8] == ["20", "ms", "10", "ms", "0.50", "≤", "16"]
    assert a_line.endswith("ok")
    assert "2.20" in next(line for line in table.splitlines() if line.startswith("b "))


def test_compare_through_the_cli(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(rows_json([TargetRow("cold start", 300.0, "ms", 350.0)])))
    assert run_bench(["--compare", str(path), str(path)]) == 0
    out = capsys.readouterr().out
    assert "cold start" in out and "1.00" in out and "ok" in out


@pytest.mark.parametrize("content", ["{", "[]", '{"rows": []}'])
def test_compare_refuses_a_file_without_target_rows(tmp_path, capsys, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert run_bench(["--compare", str(path), str(path)]) == 2
    assert "bad.json" in capsys.readouterr().err


def test_compare_names_a_missing_file(tmp_path, capsys):
    assert run_bench(["--compare", str(tmp_path / "nope.json"), str(tmp_path / "x.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
