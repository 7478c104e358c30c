"""Several sentences through a real model as one batch: the (B, H, T, T) tensor made real.

The model view's sentence box may hold one sentence a line. :func:`run_batch` tokenizes
each, right-pads them to the longest (BERT's ``[PAD]`` id, a decoder's end-of-text id
or 0) and runs them as ONE pass with an attention mask (1 = real token): BERT hides
padded keys from every query (the additive mask HF applies), a decoder hides them on
top of its causal mask (:func:`attn_explorer.models.decoder.batch.forward_batch`).
Padded keys therefore get exactly zero weight, and each sentence's real rows equal
the sentence run alone.

:class:`BatchAttention` keeps the padded (B, L, H, T, …) arrays; its
:meth:`~BatchAttention.sentence` is one sentence as the model view shows it, a
:class:`SentenceOfBatch` (a ``ModelAttention``): trimmed to its own tokens, or padded
with the padding masked out (its weights 0). :func:`batch_inputs` takes one head of
every sentence into the explorer as a (B, 1, T, d) snapshot. Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from attn_explorer.compute import LIMITS
from attn_explorer.models.decoder.batch import forward_batch
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.long_pass import MAX_RECORD_BYTES
from attn_explorer.models.decoder.text.bpe import check_unicode
from attn_explorer.models.encoder.bert import BertModel
from attn_explorer.models.errors import TextError, check_text
from attn_explorer.models.results import ModelAttention
from attn_explorer.models.take_head import explorer_inputs, head_title
from attn_explorer.state import Options, Snapshot

#: How a padded position is labelled on the axes.
PAD_LABEL = "[PAD]"


def batch_lines(text: str) -> list[str]:
    """The sentences of a batch: the text's non-blank lines, stripped (one line: no batch)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class BatchAttention:
    """B sentences run together: right-padded to T tokens, every layer kept.

    ``query`` (B, L, H, T, d); ``key``/``value`` (B, L, H or H_kv, T, d); ``scores`` and
    ``weights`` (B, L, H, T, T), rows = query i, columns = key j, ``weights`` exactly 0 at
    every padded key; ``hidden_states`` (B, L + 1, T, hidden). ``lengths[b]`` real tokens
    start sentence b; ``tokens[b]`` has T labels, ``PAD_LABEL`` after them.
    """

    texts: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    lengths: tuple[int, ...]
    input_ids: np.ndarray
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    hidden_states: np.ndarray
    scale: float
    strategy: str
    model_name: str = ""
    causal: bool = False
    kv_heads: np.ndarray | None = None
    truncated: tuple[bool, ...] = ()
    layer_kinds: tuple[str, ...] = ()
    window: int = 0
    notes: tuple[str, ...] = ()
    logits: np.ndarray | None = None  # a decoder's (B, T, vocab)

    @property
    def size(self) -> int:
        """B: how many sentences."""
        return len(self.texts)

    @property
    def keep(self) -> np.ndarray:
        """(B, T) True at real tokens, False at padding: the attention mask."""
        positions = np.arange(self.input_ids.shape[1])
        keep: np.ndarray = positions[None, :] < np.array(self.lengths)[:, None]
        return keep

    def sentence(self, index: int, padded: bool = False) -> SentenceOfBatch:
        """Sentence ``index`` as one ``ModelAttention``: its own n tokens, or (``padded``) all T.

        Padded, the padding is masked out: its key columns hold the exactly-zero weights
        the mask gave them, and its query rows (which nothing downstream reads) are set
        to 0 too; raw scores stay as computed (the mask comes after them).
        """
        if not 0 <= index < self.size:
            raise ValueError(f"sentence {index + 1} does not exist: the batch has {self.size}.")
        n = self.input_ids.shape[1] if padded else self.lengths[index]
        real = self.lengths[index]
        weights = self.weights[index, :, :, :n, :n]
        if padded and real < n:
            weights = weights.copy()
            weights[:, :, real:, :] = 0  # padded query rows: masked out
        return SentenceOfBatch(
            tokens=list(self.tokens[index][:n]),
            input_ids=self.input_ids[index, :n],
            token_type_ids=np.zeros(n, dtype=np.int64),
            query=self.query[index, :, :, :n],
            key=self.key[index, :, :, :n],
            value=self.value[index, :, :, :n],
            scores=self.scores[index, :, :, :n, :n],
            weights=weights,
            hidden_states=self.hidden_states[index, :, :n],
            scale=self.scale,
            strategy=self.strategy,
            model_name=self.model_name,
            truncated=bool(self.truncated and self.truncated[index]),
            full_length=real,
            causal=self.causal,
            kv_heads=self.kv_heads,
            layer_kinds=self.layer_kinds,
            window=self.window,
            notes=self.notes,
            logits=None if self.logits is None else self.logits[index, :n],
            batch=self,
            index=index,
            padded=padded,
        )


@dataclass(frozen=True)
class SentenceOfBatch(ModelAttention):
    """One sentence of a :class:`BatchAttention`, shown as the model view shows any result."""

    batch: BatchAttention | None = field(default=None, repr=False, compare=False)
    index: int = 0
    padded: bool = False

    def other(self, index: int | None = None, padded: bool | None = None) -> SentenceOfBatch:
        """Another sentence of the same batch, or this one padded / trimmed."""
        assert self.batch is not None
        return self.batch.sentence(
            self.index if index is None else index, self.padded if padded is None else padded
        )

    @property
    def notice(self) -> str:
        """Which sentence of how many, its length against the batch's, any truncation."""
        assert self.batch is not None
        b, t = self.batch.size, self.batch.input_ids.shape[1]
        pads = t - self.full_length
        line = (
            f"Sentence {self.index + 1} of a batch of {b} (B = {b}, T = {t}): "
            f"{self.full_length} tokens and {pads} padded positions."
        )
        cut = " It was truncated." if self.truncated else ""
        return line + cut


def _check_batch(texts: list[str], pair: str | None) -> None:
    if pair:
        raise TextError("A batch reads one sentence per line; clear the second sentence.")
    if not 2 <= len(texts) <= LIMITS.max_batch:
        raise TextError(
            f"A batch takes 2 to {LIMITS.max_batch} sentences, one per line; got {len(texts)}."
        )
    for number, text in enumerate(texts, 1):
        check_text(f"sentence {number}", text)


def _pad(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Right-pad id lists into (B, T) ids; their lengths."""
    lengths = tuple(len(r) for r in rows)
    ids = np.full((len(rows), max(lengths)), pad_id, dtype=np.int64)  # (B, T)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = row
    return ids, lengths


def _labels(tokens: list[list[str]], width: int) -> tuple[tuple[str, ...], ...]:
    return tuple((*row, *[PAD_LABEL] * (width - len(row))) for row in tokens)


def run_batch(
    model: BertModel | DecoderModel, texts: list[str], pair: str | None = None,
    strategy: str = "batched",
) -> BatchAttention:  # fmt: skip
    """Tokenize ``texts``, right-pad them and run them as one masked batch (see the module).

    TextError (a ValueError) for fewer than 2 or more than ``LIMITS.max_batch``
    sentences, a second sentence, or a sentence that is empty or too long.
    """
    _check_batch(texts, pair)
    if isinstance(model, DecoderModel):
        if strategy != "batched":
            raise ValueError(f"strategy: a decoder runs 'batched' attention, not {strategy!r}.")
        rows = []
        for number, text in enumerate(texts, 1):
            check_unicode(f"sentence {number}", text)
            rows.append(model.tokenizer.encode(text))
            model._check_ids(rows[-1], f"sentence {number}")
        eos = model.tokenizer.eos_id
        ids, lengths = _pad(rows, eos if eos is not None and eos < model.config.vocab_size else 0)
        keep = np.arange(ids.shape[1])[None, :] < np.array(lengths)[:, None]  # (B, T)
        out = forward_batch(model, ids, keep)
        return BatchAttention(
            tuple(texts), _labels([model.readable(r) for r in rows], ids.shape[1]), lengths,
            ids, out.query, out.key, out.value, out.scores, out.weights, out.hidden_states,
            out.scale, strategy, model.name, causal=True, kv_heads=model.kv_heads.copy(),
            truncated=(False,) * len(texts), layer_kinds=model.config.layer_kinds,
            window=model.config.sliding_window, notes=model.notes(), logits=out.logits,
        )  # fmt: skip
    encodings = [model.encode(text) for text in texts]
    pad_id = model.tokenizer.vocab.get(PAD_LABEL, 0)
    ids, lengths = _pad([e.input_ids for e in encodings], pad_id)
    c = model.config
    record = ids.size * ids.shape[1] * c.num_hidden_layers * c.num_attention_heads * 8
    if record > MAX_RECORD_BYTES:  # scores + weights, float32: (B, L, H, T, T) each
        raise TextError(
            f"{len(texts)} sentences of up to {ids.shape[1]} tokens would record {record:,} "
            f"bytes of attention, over {MAX_RECORD_BYTES:,}; use fewer or shorter sentences."
        )
    keep = np.arange(ids.shape[1])[None, :] < np.array(lengths)[:, None]  # (B, T)
    result = model.forward(ids, np.zeros_like(ids), keep.astype(np.int64), strategy=strategy)
    return BatchAttention(
        tuple(texts), _labels([e.tokens for e in encodings], ids.shape[1]), lengths, ids,
        result.query, result.key, result.value, result.scores, result.weights,
        result.hidden_states, result.scale, strategy, model.name,
        truncated=tuple(e.truncated for e in encodings),
    )  # fmt: skip


def batch_tokens(batch: BatchAttention) -> tuple[str, ...]:
    """One label per position for the explorer, whose B inputs share their token names:
    the sentences' tokens there, each once, joined by '/' (``cat/dog/[PAD]``)."""
    labels = []
    for position in range(batch.input_ids.shape[1]):
        seen = dict.fromkeys(row[position] for row in batch.tokens)
        labels.append("/".join(seen))
    return tuple(labels)


def batch_inputs(sentence: SentenceOfBatch, layer: int, head: int) -> Snapshot:
    """Head ``head`` of layer ``layer`` of every sentence: a (B, 1, T, d_head) snapshot.

    The padded positions carry the model's own Q, K, V there. The explorer has no
    padding mask: causal (a decoder) hides them from every real query anyway; an
    encoder's real queries see them there (the mistake the attention mask prevents).
    """
    batch = sentence.batch
    assert batch is not None
    layers, heads = batch.query.shape[1:3]
    if not (0 <= layer < layers and 0 <= head < heads):
        raise ValueError(f"layer {layer + 1}, head {head + 1} does not exist in this model")
    shared = sentence.kv_head(head)
    return Snapshot(
        batch_tokens(batch),
        batch.query[:, layer, head][:, None],  # (B, 1, T, d_head)
        batch.key[:, layer, shared][:, None],
        batch.value[:, layer, shared][:, None],
    )


def taken_inputs(attention: ModelAttention, layer: int, head: int) -> Snapshot:
    """What "Take into explorer" loads: every sentence of a batch (B, 1, T, d), else the one
    sentence's head (:func:`attn_explorer.models.take_head.explorer_inputs`)."""
    if isinstance(attention, SentenceOfBatch) and attention.batch is not None:
        return batch_inputs(attention, layer, head)
    return explorer_inputs(attention, layer, head)


def taken_note(attention: ModelAttention) -> str:
    """What the explorer does with a taken batch's padding, in one sentence ('' for no batch).

    The explorer has no padding mask: causal hides a right-padded sentence's padding from
    its real tokens, as the model's mask did; an encoder's real tokens see it there.
    """
    if not isinstance(attention, SentenceOfBatch) or attention.batch is None:
        return ""
    shown = f" Batch entry {attention.index + 1} of {attention.batch.size} is shown."
    if attention.causal:
        return shown + " Causal hides each sentence's padding from its tokens, as the mask did."
    return shown + (
        f" The explorer has no padding mask: shorter sentences' tokens also attend to their "
        f"{PAD_LABEL} keys here, which the model's mask hid."
    )


def taken_options(options: Options, attention: ModelAttention) -> Options:
    """The taken head's options (``explorer_options``), on the sentence the model view showed."""
    if isinstance(attention, SentenceOfBatch) and attention.batch is not None:
        return replace(options, batch_index=attention.index)
    return options


def taken_title(attention: ModelAttention, layer: int, head: int) -> str:
    """``tiny-bert layer 2 head 1``, and ``(batch of 3 sentences)`` for a batch."""
    return head_title(attention, layer, head) + taken_batch(attention)


def taken_batch(attention: ModelAttention) -> str:
    """`` (batch of 3 sentences)`` when a batch is taken, else ''."""
    if isinstance(attention, SentenceOfBatch) and attention.batch is not None:
        return f" (batch of {attention.batch.size} sentences)"
    return ""
