"""A decoder writing a continuation token by token, apart from the model dock's state.

A :class:`GenerationRequest` names the decoder and the prompt; :func:`generate_tokens`
runs it greedily against the :class:`~attn_explorer.models.requests.ModelCache` and
reports a :class:`GenerationState` (the tokens so far and each step's attention row)
after every token; :data:`STOP_REASONS` says why it ended. Safe on a worker thread: the
session only takes the states it is handed
(:meth:`~attn_explorer.models.session.ModelSession.accept_generation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.errors import phrase
from attn_explorer.models.requests import ModelCache, never_stop

#: Why a generation ended, as the status line says it.
STOP_REASONS = {
    "end of turn": "the model ended its turn",
    "max_new_tokens": "that was the most new tokens asked for",
    "context": "the context is full",
    "your stop": "stopped by you",
}


@dataclass(frozen=True)
class GenerationRequest:
    """Continue ``prompt`` with the decoder in ``folder``: greedy, up to ``max_new_tokens``."""

    folder: str
    prompt: str
    max_new_tokens: int = 20
    chat: bool = False


@dataclass(frozen=True)
class GenerationState:
    """A continuation so far: the tokens, the text and each step's attention row.

    ``rows[s]`` is (L, H, 1, t_s): the weights of the query row that chose new token s
    against every cached key (t_s = prompt + s tokens). ``done`` is False while tokens
    still come; ``stopped`` then says why ('end of turn', 'max_new_tokens', 'context',
    'stopped by you').
    """

    prompt_tokens: list[str]
    tokens: list[str]
    text: str
    rows: list[np.ndarray]
    max_new_tokens: int
    done: bool = False
    stopped: str = ""

    def matrix(self, layer: int, head: int) -> np.ndarray:
        """(S, t_max) weights of one head: row s is step s's query row, NaN past its keys.

        The staircase grows by one row per token: the sequence dimension remains, each
        new query row is scored against every cached key.
        """
        steps = len(self.rows)
        width = self.rows[-1].shape[-1] if steps else 0
        out = np.full((steps, width), np.nan, dtype=np.float32)  # (S, t_max)
        for s, row in enumerate(self.rows):
            out[s, : row.shape[-1]] = row[layer, head, 0]  # (t_s,)
        return out

    def query_tokens(self) -> list[str]:
        """The token whose query row chose each new token: the prompt's last, then each new."""
        if not self.rows:
            return []
        return [self.prompt_tokens[-1], *self.tokens[: len(self.rows) - 1]]

    def key_tokens(self) -> list[str]:
        """Every key the newest row reads: the prompt and the new tokens before the last."""
        return [*self.prompt_tokens, *self.tokens[: max(0, len(self.rows) - 1)]]


def generate_tokens(
    cache: ModelCache,
    request: GenerationRequest,
    report: Callable[[GenerationState], None],
    should_stop: Callable[[], bool] = never_stop,
) -> GenerationState:
    """Load the decoder and write the continuation, reporting after every token.

    ``report`` hears a :class:`GenerationState` per new token (any thread: the caller
    carries it to the GUI). Raises ``Cancelled`` when ``should_stop()`` turns true, and
    ``ValueError`` (with the next step) when the model is an encoder or the prompt is
    refused, naming the window's field ("Prompt: …").
    """
    model = cache.get(request.folder)
    if not isinstance(model, DecoderModel):
        raise ValueError(
            f"{model.name or 'This model'} is an encoder (BERT): it reads, it does not "
            "write. Choose a .gguf decoder such as SmolLM2 to generate."
        )
    try:
        return _write(model, request, report, should_stop)
    except ValueError as exc:  # in the window's words: "Prompt: …", "Most new tokens: …"
        raise ValueError(phrase(exc, "window")) from None


def _write(
    model: DecoderModel,
    request: GenerationRequest,
    report: Callable[[GenerationState], None],
    should_stop: Callable[[], bool],
) -> GenerationState:
    """Write the reply to ``request.prompt`` (the body of :func:`generate_tokens`); its
    refusals are in the API's words, which the caller puts in the window's."""
    prompt = request.prompt
    if request.chat:
        prompt = model.chat_prompt(prompt)
    prompt_tokens = model.readable(model.tokenizer.encode(prompt))
    ids: list[int] = []
    rows: list[np.ndarray] = []

    def on_token(token_id: int, row: np.ndarray) -> None:
        ids.append(token_id)
        rows.append(row)
        report(
            GenerationState(
                prompt_tokens,
                model.readable(ids),
                model.tokenizer.decode(ids),
                list(rows),
                request.max_new_tokens,
            )
        )
        if should_stop():
            raise Cancelled()

    result = model.generate(request.prompt, request.max_new_tokens, request.chat, on_token)
    return GenerationState(
        result.prompt_tokens, result.tokens, result.text, result.steps,
        request.max_new_tokens, done=True, stopped=result.stopped,
    )  # fmt: skip
