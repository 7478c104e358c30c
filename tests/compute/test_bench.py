"""The benchmark runs end to end (quick mode) and reports every column of its table."""

import json

from attn_explorer.cli.bench import run_bench
from attn_explorer.cli.bench_measure import Timing, round_robin
from attn_explorer.cli.bench_tables import format_tables


def test_quick_json_has_every_column(capsys):
    assert run_bench(["--quick", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # --json keeps stderr quiet for scripts
    report = json.loads(out)
    assert report["quick"] is True and report["dtype"] == "float32"
    assert len(report["scores"]) >= 3 and len(report["attention"]) >= 1
    for row in report["scores"]:
        for method in ("loop", "matmul", "batched", "einsum", "square"):
            assert row[method]["seconds"] > 0, method
            assert isinstance(row[method]["estimated"], bool)
        assert set(row["ratios"]) == {"loop/batched", "matmul/batched", "einsum/batched"}
        assert row["ratios"]["matmul/batched"] == (
            row["matmul"]["seconds"] / row["batched"]["seconds"]
        )
        assert row["batched_gflops"] > 0 and row["batched_pct_of_square"] > 0
        assert row["flops"] == 2 * row["heads"] * row["tokens"] ** 2 * row["dim"]
    assert not report["scores"][0]["loop"]["estimated"]  # H=1, T=3, d=2 always runs
    for row in report["attention"]:
        assert row["attention_seconds"] > 0 and row["two_matmuls_seconds"] > 0
        # the result alone holds scores and weights: two (H, T, T) tensors
        assert 1.9 < row["peak_in_score_tensors"] < 3
        assert (row["torch_seconds"] is None) == (row["ratio_to_torch"] is None)
        # numpy's floor does the two products and more: it cannot beat them
        assert row["floor_seconds"] > 0
        assert row["ratio_to_floor"] == row["attention_seconds"] / row["floor_seconds"]
    targets = {row["measure"]: row for row in report["targets"]}
    first = report["attention"][0]
    shape = f"H{first['heads']} T{first['tokens']} d{first['dim']}"
    floor_row = targets[f"attention()'s numpy floor / its two matmuls, {shape}"]
    assert floor_row["now"] == first["floor_seconds"] / first["two_matmuls_seconds"]
    assert "exp2" in floor_row["note"] and floor_row["target"] is None
    assert targets[f"attention() / its numpy floor, {shape}"]["now"] == first["ratio_to_floor"]
    bound = targets[f"the two products and an exp2 alone / the two matmuls, {shape}"]
    assert bound["now"] == first["exp_only_seconds"] / first["two_matmuls_seconds"]
    torch_row = targets["attention() / torch SDPA (own process), H4 T256 d32"]
    assert torch_row["now"] is None and torch_row["note"]  # says why it is missing
    per_head = targets["per-head matmul / batched, H16 T64 d16"]
    assert per_head["now"] == report["scores"][2]["ratios"]["matmul/batched"]
    assert per_head["ok"] == (per_head["now"] >= per_head["target"])
    text = format_tables(report)
    assert "Scores S = Q Kᵀ" in text and "Full attention()" in text
    assert text.count("\n") > len(report["scores"]) + len(report["attention"])


def test_estimated_loop_is_marked():
    report = {
        "numpy": "x",
        "blas_threads": 1,
        "cpu_count": 1,
        "machine": "m",
        "scores": [
            {
                "heads": 16,
                "tokens": 2048,
                "dim": 64,
                "loop": {"seconds": 4000.0, "estimated": True},
                **{m: {"seconds": 0.1, "estimated": False} for m in ("matmul", "batched")},
                **{m: {"seconds": 0.1, "estimated": False} for m in ("einsum", "square")},
                "ratios": {"loop/batched": 4e4, "matmul/batched": 1.0, "einsum/batched": 1.0},
                "batched_gflops": 86.0,
                "batched_pct_of_square": 90.0,
            }
        ],
        "attention": [],
    }
    assert "4e+03 s est." in format_tables(report)
    assert Timing(1.0).estimated is False


def test_round_robin_times_each_function():
    calls = {"a": 0, "b": 0}

    def bump(name):
        calls[name] += 1

    times = round_robin({"a": lambda: bump("a"), "b": lambda: bump("b")}, 3, 0.0)
    assert set(times) == {"a", "b"} and all(t > 0 for t in times.values())
    assert calls == {"a": 4, "b": 4}  # one warm-up + three samples
