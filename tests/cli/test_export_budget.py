"""Issue 12, item 5: the command line's export is bounded in memory, refused from the shape first.

An 823 KB session (H = 16, T = 4096, d = 1) used to cost 23 s and 6.6 GB. Its
export is now refused from the declared shape before anything is computed, and
for exports that run, the peak resident memory measured here stays within
``export_memory_estimate`` (so MAX_EXPORT_BYTES really bounds them). Memory is
measured with ``os.wait4``'s rusage of each child; nothing asserts wall-clock time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attn_explorer.state.session import Session
from attn_explorer.state.storage.export import MAX_EXPORT_BYTES, export_memory_estimate
from attn_explorer.state.storage.session_file import session_json, snapshot_to_dict
from attn_explorer.state.types import Options, Snapshot

MB = 2**20


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"  # the same on every machine
    return env


#: Runs the export as its own child and reports that child's peak resident memory. A child
#: forked straight from pytest inherits pytest's high-water mark at exec (Linux keeps the old
#: mm's peak in ru_maxrss), so after a long run every export looked as big as pytest; forked
#: from this small process instead, the baseline and the export start from the same floor.
MEASURE = r"""
import os, subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-m", "attn_explorer", "export", *sys.argv[1:]],
    stdout=subprocess.DEVNULL,
)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)  # ru_maxrss is in KB
"""


def export(*args: object) -> tuple[int, str, int]:
    """Run ``attn-explorer export ARGS``: (exit status, stderr, the child's peak resident bytes)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *map(str, args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
        check=False,
    )
    code, peak = (int(word) for word in done.stdout.split())
    return code, done.stderr, peak


def write_session(path, shape, dtype="float64", causal=False, strategy="batched", whole=False):
    t = shape[2]
    rng = np.random.default_rng(0)
    if whole:  # one digit a number: the smallest file for the shape
        arrays = [rng.integers(0, 10, shape).astype(np.float64) for _ in range(3)]
    else:
        arrays = [np.round(rng.standard_normal(shape), 2) for _ in range(3)]
    snapshot = Snapshot(tuple(f"t{i}" for i in range(t)), *arrays)
    options = Options(dtype=dtype, causal=causal, strategy=strategy)
    data = snapshot_to_dict(snapshot, options, "budget")
    text = json.dumps(data, separators=(",", ":")) if whole else session_json(data)
    path.write_text(text, encoding="utf-8")
    return Session(snapshot, options)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> int:
    """Peak resident memory of exporting the worked example: the interpreter, numpy, Qt."""
    out = tmp_path_factory.mktemp("baseline")
    code, stderr, peak = export("--example", "worked", "--out", out)
    assert code == 0, stderr
    return peak


@pytest.mark.slow
def test_the_823_kb_session_is_refused_before_any_work(tmp_path, baseline):
    path = tmp_path / "h16-t4096.json"
    session = write_session(path, (1, 16, 4096, 1), whole=True)
    assert path.stat().st_size < 1.0 * MB
    assert export_memory_estimate(session, "scores", "png") > MAX_EXPORT_BYTES
    code, stderr, peak = export(path, "--out", tmp_path / "out")
    assert code == 2
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert f"over the command line's limit of {MAX_EXPORT_BYTES // MB} MB" in stderr
    assert "268,435,456 scores" in stderr
    # Refused from the shape: nothing near a score tensor (2 GB in float64) was allocated.
    assert peak - baseline < 96 * MB, f"{(peak - baseline) / MB:.0f} MB above the baseline"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["png", "svg", "csv", "npz"])
@pytest.mark.slow
def test_an_export_uses_no_more_than_its_estimate(tmp_path, baseline, fmt):
    """The estimate is an upper bound of what the export really allocates."""
    path = tmp_path / "s.json"
    session = write_session(path, (1, 4, 1024, 2), causal=True)  # masked: a new array
    estimate = export_memory_estimate(session, "masked", fmt)
    assert estimate < MAX_EXPORT_BYTES
    code, stderr, peak = export(
        path, "--out", tmp_path / "out", "--format", fmt, "--stage", "masked"
    )
    assert code == 0, stderr
    used = peak - baseline
    print(f"{fmt}: used {used / MB:.0f} MB of an estimated {estimate / MB:.0f} MB")
    assert used <= estimate, f"{fmt}: used {used / MB:.0f} MB, estimated {estimate / MB:.0f} MB"
    assert used > estimate / 8, "the estimate is far too pessimistic to be useful"


def test_float32_halves_the_estimate_and_the_message_says_so(tmp_path):
    path = tmp_path / "s.json"
    big64 = write_session(path, (1, 2, 4096, 1))
    big32 = Session(big64.snapshot(), Options(dtype="float32"))
    assert export_memory_estimate(big32, "scores", "csv") < export_memory_estimate(
        big64, "scores", "csv"
    )
    code, stderr, _ = export(path, "--out", tmp_path / "out")
    assert code == 2 and "dtype float32" in stderr


def test_the_estimate_counts_the_loop_when_it_really_runs():
    shape = (1, 1, 64, 4)
    snapshot = Snapshot(tuple(f"t{i}" for i in range(64)), *(np.ones(shape) for _ in range(3)))
    session = Session(snapshot, Options(strategy="loop"))
    loop = export_memory_estimate(session, "scores", "csv", strategy="loop")
    batched = export_memory_estimate(session, "scores", "csv", strategy="batched")
    assert loop - batched == 64 * 64 * 40


def test_a_loop_session_within_the_budget_exports(tmp_path):
    path = tmp_path / "loop.json"
    write_session(path, (1, 2, 8, 3), strategy="loop")
    code, stderr, _ = export(path, "--out", tmp_path / "out", "--format", "csv", "--heads", "all")
    assert code == 0, stderr
    assert json.loads(path.read_text())["options"]["strategy"] == "loop"
