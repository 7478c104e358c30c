"""The compute and state layers never load Qt (STYLE.md: keep the layers honest)."""

import json
import os
import subprocess
import sys

import pytest

#: Run in a fresh interpreter: import a package and every module inside it, then
#: report which modules were loaded and which Qt modules came along.
PROBE = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
loaded = [sys.argv[1]]
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
    loaded.append(info.name)
qt = sorted(m for m in sys.modules if m.split(".")[0] in {"PySide6", "pyqtgraph", "shiboken6"})
print(json.dumps({"loaded": loaded, "qt": qt}))
"""


def probe(package: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, package],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYQTGRAPH_QT_LIB": "PySide6"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("package", ["attn_explorer.compute", "attn_explorer.state"])
def test_layer_imports_no_qt(package):
    report = probe(package)
    assert report["qt"] == [], f"{package} pulled in Qt: {report['qt']}"


def test_probe_walks_every_compute_module():
    loaded = probe("attn_explorer.compute")["loaded"]
    for module in ("pipeline", "strategies", "softmax", "trace", "timing", "projection"):
        assert f"attn_explorer.compute.{module}" in loaded


@pytest.mark.slow
def test_probe_would_notice_qt():
    """Not a tautology: a package that imports pyqtgraph is reported."""
    pytest.importorskip("pyqtgraph")
    assert "pyqtgraph" in probe("pyqtgraph.colors")["qt"]


def test_import_contracts_hold():
    """pyproject's [tool.importlinter] contracts: the layer order, no Qt below render, no torch."""
    pytest.importorskip(
        "importlinter", reason="import-linter is not installed (pip install -e '.[test]')"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "broken" not in done.stdout.lower().replace("0 broken", "")
