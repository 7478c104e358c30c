"""The bench scripts still run against today's code (bench/stepper.py once stopped
running when the stepper model moved out of its panel, and nothing noticed)."""

from __future__ import annotations

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
