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
