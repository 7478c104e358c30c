"""The whole repository passes ``ruff check`` and ``ruff format --check`` (pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ruff_check():
    done = ruff("check", "--no-cache", "--output-format=concise")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format():
    done = ruff("format", "--check", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
