"""docs/session-format.md's options table is ``Options()``: every field, in order, with its default.

As tests/test_limits_docs.py does for the limits, the document is read and compared with
the code, so a new option, a changed default or a removed one cannot drift from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from attn_explorer.state.types import Options

DOCUMENT = Path(__file__).resolve().parents[1] / "docs" / "session-format.md"
ROW = re.compile(r"^\| `(?P<name>\w+)` \| `(?P<default>[^`]+)` \| (?P<allowed>[^|]+) \|$")


def options_table(text: str) -> list[tuple[str, object]]:
    """(option, default read as JSON) of each row of the one table under '### Options'."""
    assert text.count("\n### Options\n") == 1, "one '### Options' section"
    section = text.split("\n### Options\n", 1)[1].split("\n#", 1)[0]
    tables = re.findall(r"(?:^\|.*\|$\n?)+", section, flags=re.MULTILINE)
    assert len(tables) == 1, "the options are in one table"
    lines = tables[0].splitlines()
    assert lines[0].startswith("| option | default |"), lines[0]
    rows = [ROW.match(line) for line in lines[2:]]
    assert all(rows), "a row does not read '| `option` | `default` | allowed |'"
    return [(m["name"], json.loads(m["default"])) for m in rows if m]


def test_the_options_table_is_every_field_of_options_with_its_default():
    documented = options_table(DOCUMENT.read_text(encoding="utf-8"))
    assert documented == list(asdict(Options()).items())


def test_a_wrong_default_or_a_missing_option_would_be_caught():
    text = DOCUMENT.read_text(encoding="utf-8")
    wrong = text.replace('| `fill` | `"random"` |', '| `fill` | `"zero"` |')
    assert wrong != text
    assert options_table(wrong) != list(asdict(Options()).items())
    missing = re.sub(r"^\| `predict` .*\n", "", text, flags=re.MULTILINE)
    assert missing != text
    assert options_table(missing) != list(asdict(Options()).items())
