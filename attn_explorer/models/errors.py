"""Why a model, a text or a call was refused, in fields each entry point phrases in its words.

A refusal is a :class:`Refusal` (a ``ValueError``, so existing ``except ValueError``
handlers keep working) carrying structured fields:

- ``what``: the thing the user gave, by the Python API's name for it — an argument
  (``text``, ``text_pair``, ``prompt``, ``max_new_tokens``, ``layer``, ``head``, ``stage``,
  the explorer's ``query``, ``key``, ``value``)
  or ``model`` for the model file or folder (whose path, key or tensor is then named in
  ``problem``);
- ``problem``: what is wrong with it, with its ``value`` and what was ``expected``;
- ``hint``: what to do, in the API's words; ``hints`` the same for another entry point
  when its words differ (the CLI's ``--layer L --head H`` where the API says
  ``run_head_export(layer=, head=)``).

``str(error)`` is the API's sentence, ``<what>: <problem>; <hint>.``; :func:`phrase` gives
the sentence for the CLI (``--text-file: …``, ``--model: …``) or the window (``Sentence: …``),
naming the flag or the field the user typed into (:data:`ENTRY_NAMES`). A refusal built
from one sentence in the API's words (``TextError("text: the text is empty; type at least
one word.")``, as most of the models code writes them) is read back into the same fields:
its ``what`` is the name before the first ``": "`` when that is an API name.

The kinds: :class:`ModelError` (a model file or folder cannot be used) and
:class:`TextError` (the text is unusable: not text, empty, too long, a second text a
decoder cannot read), of which :class:`LimitError` is a text or a request over a size
limit. A refusal keeps its fields through pickling (a worker process to its parent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, overload

#: The entry points a message is phrased for.
ENTRY_POINTS = ("api", "cli", "window")

#: How each entry point names what the user gave, by its API name (absent: the API's name).
ENTRY_NAMES: dict[str, dict[str, str]] = {
    "api": {},
    "cli": {
        "query": "--query",
        "key": "--key",
        "text": "--text",
        "text_pair": "--text-pair",
        "model": "--model",
        "layer": "--layer",
        "head": "--head",
        "stage": "--stage",
        "format": "--format",
        "values": "--values",
        "corrupt": "--corrupt",
        "answer": "--answer",
        "wrong": "--wrong",
    },
    "window": {
        "text": "Sentence",
        "text_pair": "Second sentence",
        "prompt": "Sentence",  # the Generate tab continues what the Sentence box holds
        "max_new_tokens": "Most new tokens",
        "model": "Model",
        "layer": "Layer",
        "head": "Head",
    },
}

#: Every name a refusal's ``what`` may take (read back from a one-sentence message).
API_NAMES = frozenset(
    [
        "text",
        "text_pair",
        "prompt",
        "max_new_tokens",
        "model",
        "layer",
        "head",
        "stage",
        "format",
        "values",
        "corrupt",
        "answer",
        "wrong",
        "strategy",
        "input_ids",
        "sampling",
        "query",
        "key",
        "value",
    ]
)


class Refusal(ValueError):
    """Why something the user gave was refused: ``what``, ``problem``, ``hint`` (and more).

    ``Refusal(what, problem, hint, value=, expected=, hints=)`` builds one from fields
    (``quote_value=True`` names the value with the thing: ``--layer 3``, ``layer=3``);
    ``Refusal(sentence)`` reads an API sentence ``"<what>: <problem>"`` back into them.
    """

    def __init__(
        self,
        what: str,
        problem: str | None = None,
        hint: str = "",
        *,
        value: object = None,
        expected: object = None,
        hints: Mapping[str, str] | None = None,
        quote_value: bool = False,
    ) -> None:
        if problem is None:  # one sentence, as the API says it
            sentence = what
            head, sep, rest = sentence.partition(": ")
            what, problem = (head, rest) if sep and head in API_NAMES else ("", sentence)
            self.sentence: str | None = sentence
        else:
            self.sentence = None
        self.what, self.problem, self.hint = what, problem, hint
        self.value, self.expected = value, expected
        self.hints = dict(hints or {})
        self.quote_value = quote_value  # the name says the value: "--layer 3", "layer=3"
        super().__init__(self.phrase("api"))

    def phrase(self, entry: str = "api", names: Mapping[str, str] | None = None) -> str:
        """The sentence for ``entry`` ("api", "cli", "window"); ``names`` overrides its
        names (the CLI says ``--text-file`` when the text came from a file)."""
        name = self.what
        if name:
            name = (names or {}).get(name) or ENTRY_NAMES.get(entry, {}).get(name, name)
            if self.quote_value:
                name = f"{name}={self.value!r}" if entry == "api" else f"{name} {self.value}"
        if self.sentence is not None:  # its words kept as written, only the name translated
            return f"{name}: {self.problem}" if name else self.sentence
        hint = self.hints.get(entry, self.hint)
        body = self.problem.rstrip(".")
        text = f"{name}: {body}" if name else body
        if hint:
            text += f"; {hint.rstrip('.')}"
        return text + "."


class ModelError(Refusal):
    """A model file or folder cannot be used: ``<file>: <key or tensor> ...; what to do``."""


class TextError(Refusal):
    """The text to run through a model is unusable: not text, empty, or too long."""


class LimitError(TextError):
    """A text or a request over a size or memory limit (a ``TextError``, as it always was)."""


def phrase(error: BaseException, entry: str, names: Mapping[str, str] | None = None) -> str:
    """``error`` as ``entry`` ("api", "cli", "window") says it; any ``ValueError`` whose
    message starts with an API name is translated as a refusal would be."""
    if isinstance(error, Refusal):
        return error.phrase(entry, names)
    text = str(error) or type(error).__name__
    if isinstance(error, ValueError):
        return Refusal(text).phrase(entry, names)
    return text


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
        raise TextError(
            name, f"expected text (a str), got {type(text).__name__}", value=type(text).__name__
        )
    if len(text) > MAX_TEXT_CHARS:
        raise LimitError(
            name,
            f"{len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,}",
            "a model reads at most a few thousand, so shorten it",
            value=len(text),
            expected=MAX_TEXT_CHARS,
        )
    return text
