"""The bench scripts still run against today's code (bench/stepper.py once stopped
running when the stepper model moved out of its panel, and nothing noticed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_script(*args: str) -> str:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
def test_stepper_bench_prints_its_three_tables():
    text = run_script("bench/stepper.py", "--quick")
    assert "UI-thread CPU time per step" in text
    assert "Playing at 60 steps/s" in text
    assert "268,435,456" in text  # the seek row at T = 512, H = 16


@pytest.mark.parametrize("script", ["bench/gui.py", "bench/models.py", "bench/all.py"])
def test_every_bench_answers_help(script):
    text = run_script(script, "--help")
    assert "usage" in text.lower() or "python bench" in text


@pytest.mark.slow
def test_dequantize_bench_prints_every_type_equal_to_gguf():
    text = run_script("bench/dequantize.py", "--quick")
    rows = [line.split() for line in text.splitlines()[2:] if line.strip()]
    assert [row[0] for row in rows] == [
        "Q4_0",
        "Q4_1",
        "Q5_0",
        "Q5_1",
        "Q8_0",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "BF16",
        "F16",
    ]
    assert all(row[-1] == "yes" for row in rows), text


def test_tiled_bench_prints_its_five_tables():
    text = run_script("bench/tiled.py", "--quick", "--json")
    report = json.loads(text.strip().splitlines()[-1])
    for row in report["floor"]:  # the strategy timed beside its floor's parts, not tables ago
        assert {"tiled", "products", "exp", "max"} <= set(row)
        ratio = row["tiled"] / row["floor"]
        assert f"tiled / floor, T{row['T']} causal={row['causal']}: {ratio:.2f}" in text
        measure = f"tiled / numpy floor, H2 T{row['T']} causal={row['causal']}"
        target = next(t for t in report["targets"] if t["measure"] == measure)
        assert target["now"] == pytest.approx(ratio)
    for title in (
        "1. Peak extra memory",
        "2. Whole attention",
        "3. tiled / torch",
        "4. Tiled by",
        "5. numpy's floor",
    ):
        assert title in text
    assert "crossover (causal)" in text


@pytest.mark.slow
def test_threads_bench_prints_the_ratio_and_the_load():
    text = run_script("bench/threads.py", "--quick", "--threads", "4")
    assert "ratio threads / sequential:" in text
    assert "cores:" in text and "load average:" in text
    rows = [
        line
        for line in text.splitlines()
        if "threads" in line and line.rstrip().endswith(("yes", "NO"))
    ]
    assert len(rows) == 3 and all(row.endswith("yes") for row in rows), text
