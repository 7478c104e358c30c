"""Issue 12, items 1, 4 and 8: ``attn-explorer scores`` with hostile matrices: one line, exit 2."""

import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "attn_explorer", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("[[" + "9" * 5000 + "]]", ["query", "finite"]),  # int() refuses over 4 300 digits
        ("[" * 100_000, ["--query", "nested too deeply"]),
        ("[[1e308]]", ["query", "limit", "1e+15"]),
        ("[[1e154, 1e154]]", ["query", "limit"]),
        ("[[true, false]]", ["query", "booleans"]),
        ('[["1", "2"]]', ["query", "numbers"]),
        ("[[" + "1" * 17 + "]]", ["query", "limit"]),
    ],
)
def test_hostile_matrices_are_one_line_errors(query, words):
    result = run("scores", "--query", query)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)
