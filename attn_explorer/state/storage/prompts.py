"""The model dock's prompts in a session file (format version 2): write and validate them.

Qt-free. A session saved while the model dock holds a sentence carries a top-level
``"prompts"`` object: the sentence, the corrupted prompt it is compared with (issue 35),
and the answer and wrong tokens (text as typed, a token id as picked, ``""`` for the
default). Only such a file is written as version 2, so a session without prompts still
opens in an app that reads version 1; version 1 files (no prompts) open as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attn_explorer.state.storage.safe_files import clean_text

#: Longest prompt kept in a session file: the longest text the model dock runs
#: (``attn_explorer.models.MAX_TEXT_CHARS``; the layers keep ``state`` below ``models``).
MAX_PROMPT_CHARS = 100_000
#: The format version that added ``"prompts"``.
PROMPTS_VERSION = 2
PROMPT_FIELDS = ("text", "corrupt", "answer", "wrong")


@dataclass(frozen=True)
class Prompts:
    """The model dock's request as a session file keeps it (see the module docstring)."""

    text: str = ""
    corrupt: str = ""
    answer: str | int = ""
    wrong: str | int = ""

    @property
    def empty(self) -> bool:
        """True when there is nothing worth saving (every field at its default)."""
        return self == Prompts()


def prompts_to_dict(prompts: Prompts) -> dict[str, Any]:
    """The JSON-ready ``"prompts"`` object."""
    values = (getattr(prompts, name) for name in PROMPT_FIELDS)
    return {
        name: clean_text(value) if isinstance(value, str) else value
        for name, value in zip(PROMPT_FIELDS, values, strict=True)
    }


def prompts_problem(value: Any) -> tuple[str, str] | None:
    """What is wrong with a parsed ``"prompts"`` object: (JSON path, message), or None."""
    if not isinstance(value, dict):
        return "prompts", "expected an object {...}"
    for key in getattr(value, "duplicates", ()):
        return "prompts", f'field "{key}" appears more than once; keep one'
    for key in value:
        if key not in PROMPT_FIELDS:
            return "prompts", f'unknown field "{key}"; expected one of {", ".join(PROMPT_FIELDS)}'
    for name in PROMPT_FIELDS:
        item = value.get(name, "")
        path = f"prompts.{name}"
        token = name in ("answer", "wrong")
        if token and type(item) is int:
            if item < 0:
                return path, f"a token id is a whole number ≥ 0, got {item}"
            continue
        if not isinstance(item, str):
            what = "text or a token id" if token else "text"
            return path, f"expected {what}"
        if len(item) > MAX_PROMPT_CHARS:
            return path, (
                f"{len(item):,} characters long, over the limit of {MAX_PROMPT_CHARS:,}; shorten it"
            )
    return None


def prompts_from_dict(value: dict[str, Any]) -> Prompts:
    """Prompts from an object :func:`prompts_problem` found nothing wrong with."""
    return Prompts(**{name: value.get(name, "") for name in PROMPT_FIELDS})
