"""The command line's version, help and ``scores`` sub-command, as a user runs them."""

import subprocess
import sys

from attn_explorer import __version__


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "attn_explorer", *args], capture_output=True, text=True, timeout=120
    )


def test_version():
    result = run("--version")
    assert result.returncode == 0
    assert __version__ in result.stdout


def test_help_lists_subcommands():
    result = run("--help")
    assert result.returncode == 0
    for name in ("scores", "export", "bench"):
        assert name in result.stdout


def test_scores_worked_example_prints_S_for_each_strategy():
    result = run("scores", "--example", "worked")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]") == 4
    for name in ("loop", "matmul", "batched", "tiled"):
        assert f"{name} (" in result.stdout


def test_scores_json_input_and_bad_json():
    ok = run("scores", "--query", "[[2,0],[0,1]]", "--key", "[[1,1]]")
    assert ok.returncode == 0, ok.stderr
    assert "S = [[2], [1]]" in ok.stdout
    bad = run("scores", "--query", "[[1,0],")
    assert bad.returncode == 2
    assert "not valid JSON" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_scores_mismatched_d_is_one_clear_line():
    result = run("scores", "--query", "[[1,0]]", "--key", "[[1,0,0]]")
    assert result.returncode == 2
    assert "same vector size d" in result.stderr
    assert "Traceback" not in result.stderr
