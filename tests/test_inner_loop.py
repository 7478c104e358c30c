"""The inner loop's lists name real tests: the measured-slow list and the journeys' fast core.

A renamed test would silently fall back into (or out of) the inner loop; this catches it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import FAST_CORE, measured_slow

ROOT = Path(__file__).resolve().parents[1]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def _missing(node_ids: frozenset[str]) -> list[str]:
    missing = []
    for node_id in sorted(node_ids):
        file, _, name = node_id.partition("::")
        path = ROOT / file
        function = name.split("[")[0]
        if not path.is_file() or function not in _functions(path):
            missing.append(node_id)
    return missing


def test_every_measured_slow_test_exists():
    listed = measured_slow()
    assert len(listed) > 100, "the measured list is read (one node id per line)"
    assert _missing(listed) == []


def test_every_fast_core_journey_exists_and_is_a_journey():
    assert _missing(FAST_CORE) == []
    assert all(node_id.startswith("tests/ui/journeys/") for node_id in FAST_CORE)


@pytest.mark.parametrize("node_id", sorted(FAST_CORE))
def test_the_fast_core_is_not_marked_slow_in_its_file(node_id):
    file, _, name = node_id.partition("::")
    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    marks = [ast.unparse(d) for d in function.decorator_list]
    assert "pytest.mark.slow" not in marks, f"{name} is in the fast core but marked slow"
