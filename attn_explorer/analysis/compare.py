"""Two prompts through one decoder: the clean run, the corrupted run and their logit difference.

The starting point of activation patching and direct logit attribution (Wang et al. 2022,
indirect object identification; TransformerLens ``patching.py``): a clean prompt ("When Mary
and John went to the store, John gave a drink to" → " Mary") and a corrupted one of the same
length that changes the answer (the second John swapped for Mary). The *logit difference* of
a run is logits[T − 1, answer] − logits[T − 1, wrong] (after the final soft-cap of Gemma 2).

Defaults (issue 35): the answer is the clean run's top token; the wrong token the
corrupted run's top token, or, when that is the answer, the clean run's best other token.

:class:`PairError` is a pair that cannot be compared; its message names no entry point
(the CLI prefixes the flag, the API the argument, the window the field) and ``kind`` says
which input is at fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.blocks import BlockTrace, run_blocks
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.ops import rms_norm, softcap
from attn_explorer.models.decoder.text.bpe import check_unicode
from attn_explorer.models.errors import TextError, check_text

#: The kinds of :class:`PairError`, and which input each blames.
PAIR_KINDS = ("token_count", "answer", "wrong", "equal", "encoder")

#: Why an encoder cannot compare two prompts (no next token, so no logit difference).
ENCODER_REASON = (
    "an encoder such as BERT predicts no next token, so there is no logit difference to "
    "compare or patch; open a decoder (a GGUF model)"
)

#: Two logit differences closer than this leave nothing to normalise patching by.
EQUAL_TOLERANCE = 1e-4


class PairError(ValueError):
    """A pair of prompts (or an answer / wrong token) that cannot be compared.

    ``kind`` is one of :data:`PAIR_KINDS`: "token_count" (the prompts' token counts
    differ), "answer" / "wrong" (not exactly one token), "equal" (equal logit
    differences: nothing to normalise) or "encoder" (no next token). The message names
    no entry point; ``detail`` keeps it when a caller prefixes its own argument name.
    """

    def __init__(self, kind: str, message: str, detail: str | None = None) -> None:
        if kind not in PAIR_KINDS:
            raise ValueError(f"PairError: unknown kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.detail = message if detail is None else detail

    def named(self, name: str) -> PairError:
        """The same error with ``name: `` (a flag, an argument) before its message."""
        return PairError(self.kind, f"{name}: {self.detail}", self.detail)


@dataclass(frozen=True)
class Comparison:
    """The clean and the corrupted run of one decoder, and the two tokens compared.

    ``clean_hidden`` / ``corrupt_hidden`` (L + 1, T, hidden): each block's input,
    pre-norm (as :class:`~attn_explorer.analysis.ablation.Ablation` uses), the last the
    final block's output. ``clean_logits`` / ``corrupt_logits`` (vocab,): the last
    position's logits. ``first_diff``: the first position whose ids differ (positions
    before it are the same in both runs). ``clean_trace`` / ``corrupt_trace`` keep what
    patching and attribution read besides (each head's output per block).
    """

    clean_ids: list[int]
    corrupt_ids: list[int]
    clean_tokens: list[str]
    corrupt_tokens: list[str]
    answer_id: int
    wrong_id: int
    logit_diff_clean: float
    logit_diff_corrupt: float
    first_diff: int
    clean_hidden: np.ndarray
    corrupt_hidden: np.ndarray
    clean_logits: np.ndarray
    corrupt_logits: np.ndarray
    clean_trace: BlockTrace = field(repr=False)
    corrupt_trace: BlockTrace = field(repr=False)

    @property
    def tokens(self) -> int:
        return len(self.clean_ids)

    def differs(self) -> list[bool]:
        """Per position: True where the two prompts' tokens differ (marked in the window)."""
        return [a != b for a, b in zip(self.clean_ids, self.corrupt_ids, strict=True)]

    def normalise(self, logit_diff: np.ndarray | float) -> np.ndarray:
        """(ld − ld_corrupt) / (ld_clean − ld_corrupt): 0 the corrupted run, 1 the clean."""
        span = self.logit_diff_clean - self.logit_diff_corrupt
        return (np.asarray(logit_diff, dtype=np.float64) - self.logit_diff_corrupt) / span


def _content_ids(model: DecoderModel, text: str) -> list[int]:
    """``text``'s ids without the BOS token a tokenizer puts before every text."""
    tokenizer = model.tokenizer
    ids = tokenizer.encode(text)
    if tokenizer.add_bos and ids and ids[0] == tokenizer.bos_id:
        ids = ids[1:]
    return ids


def token_id(model: DecoderModel, text: str | int, role: str) -> int:
    """The id of ``text`` if it is exactly one token (or an id in the vocabulary).

    ``role`` is "answer" or "wrong"; otherwise :class:`PairError` of that kind saying
    how the text tokenizes.
    """
    if role not in ("answer", "wrong"):
        raise ValueError(f"token_id: role is 'answer' or 'wrong', not {role!r}")
    vocab = model.config.vocab_size
    if isinstance(text, bool) or not isinstance(text, (str, int, np.integer)):
        raise PairError(role, f"expected one token (a str) or its id, got {type(text).__name__}")
    if not isinstance(text, str):
        if not 0 <= int(text) < vocab:
            raise PairError(role, f"id {int(text)} is outside the vocabulary (0 … {vocab - 1})")
        return int(text)
    try:
        check_unicode(role, check_text(role, text))
    except TextError as exc:
        raise PairError(role, str(exc).removeprefix(f"{role}: ")) from None
    ids = _content_ids(model, text)
    if len(ids) != 1:
        pieces = ", ".join(repr(t) for t in model.readable(ids))
        count = f"{len(ids)} token" + ("" if len(ids) == 1 else "s")
        said = f"{text!r} is {count}" + (f" ({pieces})" if ids else "")
        raise PairError(role, f"{said}; give one token")
    return ids[0]


def last_logit_rows(model: DecoderModel, ids: list[int]) -> np.ndarray:
    """(len(ids), hidden) rows of the output head (unembedding) for ``ids``."""
    weights = model.weights
    rows: np.ndarray = weights.file.dequantize(weights.head_name, np.asarray(ids))
    weights.file.release(weights.head_name)
    return np.asarray(rows, dtype=np.float32)


def logit_difference(
    model: DecoderModel, last: np.ndarray, answer_id: int, wrong_id: int
) -> np.ndarray:
    """(…, hidden) residual streams after the last block -> (…,) logit differences,
    reading only the answer's and the wrong token's rows of the output head."""
    c = model.config
    normed = rms_norm(np.asarray(last, np.float32), model.weights.final_norm, c.rms_norm_eps)
    logits = normed @ last_logit_rows(model, [answer_id, wrong_id]).T  # (…, 2)
    if c.final_softcap:
        logits = softcap(logits, c.final_softcap)
    return logits[..., 0].astype(np.float64) - logits[..., 1].astype(np.float64)


def trace_run(
    model: DecoderModel,
    ids: list[int],
    on_layer: Callable[[int], None] | None = None,
) -> tuple[BlockTrace, np.ndarray]:
    """Run ``ids`` through every block, recording its trace; and its last logits (vocab,)."""
    c = model.config
    x = model.weights.embed(np.asarray(ids, dtype=np.int64))  # (T, hidden)
    if c.embedding_scale != 1.0:
        x = x * np.float32(c.embedding_scale)  # Gemma: × √width, as forward does
    trace = BlockTrace.empty(model, len(ids))
    out = run_blocks(model, x, 0, trace=trace, on_layer=on_layer)
    # every row, as forward does, so the last row's logits equal its own bit for bit
    normed = rms_norm(out, model.weights.final_norm, c.rms_norm_eps)
    logits = model.weights.logits(normed)[-1]  # (vocab,)
    if c.final_softcap:
        logits = softcap(logits, c.final_softcap)
    return trace, logits


def _check_pair(model: DecoderModel, clean: list[int], corrupt: list[int]) -> int:
    """The first position where the ids differ; PairError if the counts differ."""
    limit = min(len(clean), len(corrupt))
    part = next((i for i in range(limit) if clean[i] != corrupt[i]), limit)
    if len(clean) != len(corrupt):
        where = (
            f"they part at token {part} ({model.readable([clean[part]])[0]!r} / "
            f"{model.readable([corrupt[part]])[0]!r})"
            if part < limit
            else f"one is the other plus {abs(len(clean) - len(corrupt))} more"
        )
        raise PairError(
            "token_count",
            f"the corrupted prompt is {len(corrupt)} tokens and the clean one {len(clean)}; "
            f"{where}. Patching needs the same count: change words for words of as many tokens",
        )
    if part == len(clean):
        raise PairError(
            "equal",
            "the two prompts are the same tokens; change a word of the corrupted prompt",
        )
    return part


def compare(
    model: object,
    clean_text: str,
    corrupt_text: str,
    answer: str | int | None = None,
    wrong: str | int | None = None,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Comparison:
    """Run both prompts through ``model``; the answer and wrong tokens and each run's
    logit difference (see the module doc for the defaults).

    PairError for an encoder, token counts that differ, an answer or wrong token that is
    not one token, or equal logit differences; TextError for an empty or over-long text.
    ``progress(fraction, message)``; ``should_stop()`` true raises ``Cancelled``.
    """
    if not isinstance(model, DecoderModel):
        raise PairError("encoder", ENCODER_REASON)
    ids = []
    for name, text in (("text", clean_text), ("corrupt", corrupt_text)):
        check_unicode(name, check_text(name, text))
        ids.append(model.tokenizer.encode(text))
        model._check_ids(ids[-1], name)
    clean_ids, corrupt_ids = ids
    first_diff = _check_pair(model, clean_ids, corrupt_ids)
    if not model.records_everything(len(clean_ids)):  # a long text: the pass by blocks
        raise TextError(
            f"corrupt: {len(clean_ids):,} tokens each; comparing and patching keep every "
            "head of both runs, which fits for shorter prompts only; shorten both"
        )
    answer_id = None if answer is None else token_id(model, answer, "answer")
    wrong_id = None if wrong is None else token_id(model, wrong, "wrong")
    layers = model.config.num_layers

    def step(run: int) -> Callable[[int], None]:
        def on_layer(index: int) -> None:
            if should_stop is not None and should_stop():
                raise Cancelled("comparison cancelled")
            if progress is not None:
                name = ("clean", "corrupted")[run]
                progress((run * layers + index + 1) / (2 * layers), f"{name} run: block {index}")

        return on_layer

    clean_trace, clean_logits = trace_run(model, clean_ids, step(0))
    corrupt_trace, corrupt_logits = trace_run(model, corrupt_ids, step(1))
    ranked = np.argsort(-clean_logits, kind="stable")
    if answer_id is None:
        answer_id = int(ranked[0])
    if wrong_id is None:
        wrong_id = int(np.argmax(corrupt_logits))
        if wrong_id == answer_id:
            wrong_id = int(next(i for i in ranked if i != answer_id))
    if wrong_id == answer_id:
        token = model.readable([answer_id])[0]
        raise PairError("wrong", f"{token!r} is the answer too; choose another token")
    diff_clean = float(clean_logits[answer_id]) - float(clean_logits[wrong_id])
    diff_corrupt = float(corrupt_logits[answer_id]) - float(corrupt_logits[wrong_id])
    if abs(diff_clean - diff_corrupt) < EQUAL_TOLERANCE:
        raise PairError(
            "equal",
            f"both prompts give the same logit difference ({diff_clean:.4f}), so there is "
            "nothing to normalise patching by; change the corrupted prompt or the tokens",
        )
    return Comparison(
        clean_ids=clean_ids,
        corrupt_ids=corrupt_ids,
        clean_tokens=model.readable(clean_ids),
        corrupt_tokens=model.readable(corrupt_ids),
        answer_id=answer_id,
        wrong_id=wrong_id,
        logit_diff_clean=diff_clean,
        logit_diff_corrupt=diff_corrupt,
        first_diff=first_diff,
        clean_hidden=clean_trace.inputs,
        corrupt_hidden=corrupt_trace.inputs,
        clean_logits=clean_logits,
        corrupt_logits=corrupt_logits,
        clean_trace=clean_trace,
        corrupt_trace=corrupt_trace,
    )
