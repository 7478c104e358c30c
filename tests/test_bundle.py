"""Build the PyInstaller bundle with packaging/build.sh and run its self-test.

Slow (a clean venv, pip and PyInstaller: about 35 s with a warm pip cache) but part of the
normal run, because a bundle breaks in ways no other test sees: a data file, Qt plugin or
lazily imported module left out. Skips, saying why, only when pip cannot reach an index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_explorer import __version__

pytestmark = [pytest.mark.bundle, pytest.mark.slow]  # ~90 s: never in the inner loop

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT = 1800  # seconds; a cold pip cache downloads ~150 MB of wheels
#: Exit status of build.sh when pip could not install the build's packages.
PIP_UNAVAILABLE = 75
#: A hello-world PySide6 + pyqtgraph bundle is ~220 MB; fail well before twice that.
MAX_BUNDLE_MB = 350
NETWORK_SIGNS = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "Read timed out",
    "Could not fetch URL",
    "No matching distribution found",
    "Could not find a version that satisfies",
)


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory):
    """dist/attn-explorer/ built into a temporary folder; yields the executable's path."""
    if shutil.which("tar") is None:
        pytest.fail("build.sh needs tar")
    base = tmp_path_factory.mktemp("bundle")
    build_dir, dist_dir = base / "build", base / "dist"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    env |= {
        "PYTHON": getattr(sys, "_base_executable", sys.executable),
        "BUILD_DIR": str(build_dir),
        "DIST_DIR": str(dist_dir),
        "QT_QPA_PLATFORM": "offscreen",
    }
    start = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    seconds = time.monotonic() - start
    output = result.stdout + result.stderr
    if result.returncode == PIP_UNAVAILABLE and any(sign in output for sign in NETWORK_SIGNS):
        tail = " | ".join(line for line in output.splitlines()[-3:] if line.strip())
        pytest.skip(f"bundle not built: pip cannot reach a package index ({tail})")
    if "ensurepip is not available" in output:
        pytest.skip(
            "bundle not built: python3 -m venv lacks ensurepip (apt-get install python3-venv)"
        )
    assert result.returncode == 0, (
        f"build.sh failed (status {result.returncode}):\n{output[-6000:]}"
    )
    executable = dist_dir / "attn-explorer" / "attn-explorer"
    assert executable.is_file(), output[-3000:]
    shutil.rmtree(build_dir, ignore_errors=True)  # the venv alone is ~400 MB
    megabytes = _folder_bytes(executable.parent) / 1e6
    print(f"\nbundle built in {seconds:.0f} s, {megabytes:.0f} MB")
    yield executable
    shutil.rmtree(dist_dir, ignore_errors=True)


def run_bundle(executable: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A neutral working directory proves resources are not found relative to the checkout.
    return subprocess.run(
        [str(executable), *args],
        capture_output=True,
        text=True,
        cwd=executable.parent.parent,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        timeout=120,
        check=False,
    )


def test_bundle_passes_its_self_test(bundle: Path) -> None:
    result = run_bundle(bundle, "--self-test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "self-test ok"


def test_bundle_runs_the_cli(bundle: Path) -> None:
    result = run_bundle(bundle, "--version")
    assert result.stdout.strip() == f"attn-explorer {__version__}"
    result = run_bundle(bundle, "scores", "--example", "worked", "--strategy", "loop")
    assert result.returncode == 0, result.stderr
    assert "S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]" in result.stdout


def test_bundle_carries_resources_and_stays_small(bundle: Path) -> None:
    internal = bundle.parent / "_internal"
    assert (internal / "attn_explorer" / "resources" / "icons" / "attn-explorer-256.png").is_file()
    megabytes = _folder_bytes(bundle.parent) / 1e6
    assert megabytes < MAX_BUNDLE_MB, (
        f"bundle grew to {megabytes:.0f} MB; check the spec's excludes"
    )
    for unused in ("QtWebEngineCore", "Qt3DCore", "QtQuick", "QtMultimedia", "tkinter"):
        assert not list(internal.rglob(f"*{unused}*")), f"{unused} should be excluded"
