"""A ChatML prompt from a GGUF's chat template, read in linear time.

The explorer does not run Jinja: it finds the template's default system turn
(``<|im_start|>system\\n … <|im_end|>``, written with an escaped ``\\n`` inside a
Jinja string, or a real newline) and wraps the user's message in ChatML. The
search is one forward pass with ``str.find`` whose positions only move on, so a
hostile template (20 000 repeated ``<|im_start|>system\\n`` and no end) costs
milliseconds, not the minutes a lazy ``(.*?)`` regex took; the template's size is
bounded by ``tokenizer.chat_template``'s spec (:mod:`gguf_metadata`).
"""

from __future__ import annotations

START, END = "<|im_start|>", "<|im_end|>"
SYSTEM = START + "system"


class _Next:
    """The next occurrence of ``needle`` at or after a position, for positions that only
    grow: each ``str.find`` starts past the previous answer, so all of them together
    read the text once."""

    def __init__(self, text: str, needle: str) -> None:
        self.text, self.needle, self.found = text, needle, -2

    def at_or_after(self, position: int) -> int:
        if self.found == -1 or (self.found >= position):
            return self.found
        self.found = self.text.find(self.needle, position)
        return self.found


def default_system(template: str) -> str | None:
    """The template's default system message, or None.

    As the two regexes it replaces: first ``<|im_start|>system\\n(.*?)<|im_end|>``
    with an escaped newline and no real newline inside, then the same with a real
    newline and anything inside. Linear in the template's length.
    """
    found = _first(template, SYSTEM + "\\n", forbid_newline=True)
    if found is None:
        found = _first(template, SYSTEM + "\n", forbid_newline=False)
    return found


def _first(template: str, opening: str, forbid_newline: bool) -> str | None:
    ends, newlines = _Next(template, END), _Next(template, "\n")
    start = template.find(opening)
    while start != -1:
        body = start + len(opening)
        end = ends.at_or_after(body)
        if end == -1:
            return None  # no later opening can be closed either
        newline = newlines.at_or_after(body) if forbid_newline else -1
        if newline == -1 or newline >= end:
            return template[body:end]
        start = template.find(opening, newline + 1)  # an opening before it would fail too
    return None


def chatml_prompt(template: str, message: str) -> str | None:
    """``message`` as one user turn after the template's default system turn, ready for the
    assistant's reply; None when the template is not ChatML."""
    if START not in template:
        return None
    prompt = ""
    system = default_system(template)
    if system is not None:
        prompt += f"{START}system\n{system}{END}\n"
    return prompt + f"{START}user\n{message}{END}\n{START}assistant\n"
