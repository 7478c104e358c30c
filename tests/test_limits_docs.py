"""Issue 12: the guide (docs/guide/sessions.md) and docs/session-format.md state every limit in
one table, from the code.

Each row names the constant it shows (``attn_explorer.compute.LIMITS.max_heads``);
this test imports it and checks the number, so the documents cannot drift.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import fields
from pathlib import Path

import pytest

from attn_explorer.compute import LIMITS, LOOP_BUDGET

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "docs" / "guide" / "sessions.md", ROOT / "docs" / "session-format.md"]
ROW = re.compile(r"^\| (?P<what>[^|]+?) \| (?P<value>[^|]+?) \| `(?P<name>[\w.]+)` \|$")
VALUE = re.compile(r"^(?P<number>\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?)(?: (?P<unit>\S+))?$")
UNITS = {"MB": 2**20, "s": 1, "px": 1, "characters": 1, "cells": 1, None: 1}

#: What the tables must cover: each of these constants has a row.
REQUIRED = [
    "attn_explorer.state.storage.session_file.MAX_SESSION_BYTES",
    *(f"attn_explorer.compute.LIMITS.{f.name}" for f in fields(LIMITS)),
    "attn_explorer.compute.MAX_ABS_VALUE",
    "attn_explorer.state.storage.session_file.MAX_NAME_CHARS",
    "attn_explorer.state.storage.session_file.MAX_TOKEN_CHARS",
    "attn_explorer.compute.MAX_PASTE_CELLS",
    *(f"attn_explorer.compute.LOOP_BUDGET.{f.name}" for f in fields(LOOP_BUDGET)),
    "attn_explorer.state.storage.export.MAX_EXPORT_BYTES",
    "attn_explorer.models.MAX_TEXT_CHARS",
]


def limits_table(path: Path) -> list[tuple[str, str, str]]:
    """(what, value, constant) of each row of the one table under '## Limits'."""
    text = path.read_text(encoding="utf-8")
    assert text.count("\n## Limits\n") == 1, f"{path.name}: one '## Limits' section"
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    tables = re.findall(r"(?:^\|.*\|$\n?)+", section, flags=re.MULTILINE)
    assert len(tables) == 1, f"{path.name}: the limits are in one table"
    rows = [ROW.match(line) for line in tables[0].splitlines()[2:]]
    assert all(rows), f"{path.name}: a row does not read '| what | value | `constant` |'"
    return [(m["what"], m["value"], m["name"]) for m in rows if m]


def constant(dotted: str) -> object:
    """The value a dotted name refers to: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise AssertionError(f"cannot import {dotted}")


def number(text: str) -> float:
    match = VALUE.match(text)
    assert match and match["unit"] in UNITS, f"cannot read the value {text!r}"
    return float(match["number"].replace(",", "")) * UNITS[match["unit"]]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_number_in_the_table_is_the_constant_in_the_code(path):
    for what, value, name in limits_table(path):
        assert number(value) == constant(name), f"{path.name}: {what}: {value} vs {name}"


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_the_table_covers_every_limit(path):
    named = {name for _, _, name in limits_table(path)}
    missing = [name for name in REQUIRED if name not in named]
    assert not missing, f"{path.name} does not state {missing}"


def test_both_documents_show_the_same_table():
    guide, session_format = (limits_table(path) for path in DOCUMENTS)
    assert guide == session_format


def test_a_wrong_number_would_be_caught():
    assert number("32 MB") == 32 * 2**20
    assert number("1e15") == 1e15
    assert number("0.02 s") == 0.02
    assert number("2,097,152 cells") == 2_097_152
    assert number("4,096") != constant("attn_explorer.compute.LIMITS.max_dim")
