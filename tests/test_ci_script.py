""".ci/run: the README's test command verbatim, never in a developer's own .venv, and
failing when pytest collects nothing (exit 5).

The script runs here against a copy of itself in a scratch checkout, with fake ``python3``
and ``id`` first on ``PATH``: the fake ``python3 -m venv .venv`` writes a ``.venv`` whose
``pip`` succeeds and whose ``python`` logs the folder it runs in and exits with
``FAKE_PYTEST_STATUS``. Nothing is installed and no apt-get runs (``id -u`` says 1000).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "run"
BEGIN, END = "# --- the README's test command, verbatim ---\n", "\n# ---"

FAKE_PYTHON3 = """#!/bin/sh
# python3 -m venv .venv: a venv whose pip succeeds and whose python logs where it runs.
mkdir -p .venv/bin
printf '#!/bin/sh\\nexit 0\\n' > .venv/bin/pip
printf '#!/bin/sh\\necho "$PWD $*" >> "$FAKE_LOG"\\nexit "${FAKE_PYTEST_STATUS:-0}"\\n' \\
  > .venv/bin/python
chmod +x .venv/bin/pip .venv/bin/python
"""


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("Install and run the tests:", 1)[1].strip().splitlines()[0].strip()


def test_ci_runs_the_readmes_test_command_verbatim():
    block = SCRIPT.read_text(encoding="utf-8").split(BEGIN, 1)[1].split(END, 1)[0]
    assert block.strip() == readme_test_command()


@pytest.fixture
def checkout(tmp_path):
    """A scratch checkout holding .ci/run, a source file and a developer's own .venv."""
    root = tmp_path / "checkout"
    (root / ".ci").mkdir(parents=True)
    (root / ".ci" / "run").write_bytes(SCRIPT.read_bytes())
    (root / ".ci" / "run").chmod(0o755)
    (root / "source.py").write_text("x = 1\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "mine").write_text("the developer's venv\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {"python3": FAKE_PYTHON3, "id": "#!/bin/sh\necho 1000\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return root


def run_ci(
    checkout: Path, *, ci: bool, status: int = 0
) -> tuple[subprocess.CompletedProcess, list]:
    tmp = checkout.parent
    log = tmp / "log.txt"
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {
        "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}",
        "HOME": str(tmp),
        "TMPDIR": str(scratch),
        "FAKE_LOG": str(log),
        "FAKE_PYTEST_STATUS": str(status),
    }
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        ["bash", str(checkout / ".ci" / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    runs = [line.split(" ", 1) for line in log.read_text().splitlines()] if log.exists() else []
    return done, runs


@pytest.mark.parametrize("git", [True, False], ids=["git-checkout", "unpacked-archive"])
def test_outside_ci_it_tests_a_copy_and_leaves_the_developers_venv_alone(checkout, git):
    if git:
        (checkout / ".gitignore").write_text(".venv/\n")
        subprocess.run(["git", "init", "-q", str(checkout)], check=True, timeout=30)
    done, runs = run_ci(checkout, ci=False)
    assert done.returncode == 0, done.stderr
    assert (checkout / ".venv" / "mine").read_text() == "the developer's venv\n"
    assert [args for _, args in runs][:1] == ["-m pytest"]  # the suite, then the references
    assert any("tests/models/test_reference.py" in args for _, args in runs)
    scratch = checkout.parent / "scratch"
    for folder, _ in runs:
        assert Path(folder).parent == scratch, folder  # a copy under $TMPDIR
    assert list(scratch.iterdir()) == []  # and the copy is removed afterwards


def test_in_ci_it_builds_a_fresh_venv_in_the_checkout(checkout):
    done, runs = run_ci(checkout, ci=True)
    assert done.returncode == 0, done.stderr
    assert not (checkout / ".venv" / "mine").exists()  # rebuilt from nothing
    assert {folder for folder, _ in runs} == {str(checkout)}


@pytest.mark.parametrize("ci", [False, True])
def test_no_tests_collected_fails_the_run(checkout, ci):
    done, runs = run_ci(checkout, ci=ci, status=5)
    assert done.returncode == 1
    assert "collected no tests" in done.stderr
    assert [args for _, args in runs] == ["-m pytest"]  # no reference run after it


def test_a_failing_suite_fails_the_run_with_its_status(checkout):
    done, runs = run_ci(checkout, ci=False, status=3)
    assert done.returncode == 3
    assert len(runs) == 1
