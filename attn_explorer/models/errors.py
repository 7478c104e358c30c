"""The two ways a model export or view can be refused: a bad model folder, or bad text.

Both are ``ValueError`` subclasses, so existing ``except ValueError`` handlers
keep working; the message is one line that names the file and the field (for
a model) or the argument (for text) and says what to do.
"""

from __future__ import annotations

from typing import Literal, overload


class ModelError(ValueError):
    """A model folder cannot be used: ``<file>: <field> ...; what to do``."""


class TextError(ValueError):
    """The text to run through a model is unusable: not text, or over the length limit."""


#: Longest text (or second text) run through a model. BERT reads at most 512 wordpieces,
#: about 3 000 characters; tokenizing text far beyond that is pure cost.
MAX_TEXT_CHARS = 100_000


@overload
def check_text(name: str, text: object, *, optional: Literal[False] = False) -> str: ...
@overload
def check_text(name: str, text: object, *, optional: bool) -> str | None: ...
def check_text(name: str, text: object, *, optional: bool = False) -> str | None:
    """``text`` if it is a str within :data:`MAX_TEXT_CHARS`; TextError naming ``name`` if not."""
    if text is None and optional:
        return None
    if not isinstance(text, str):
        raise TextError(f"{name}: expected text (a str), got {type(text).__name__}.")
    if len(text) > MAX_TEXT_CHARS:
        raise TextError(
            f"{name}: {len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,}; "
            "a model reads at most a few thousand, so shorten it."
        )
    return text
