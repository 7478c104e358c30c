"""Every GGUF metadata value the app reads, with its declared type and range, checked once.

:data:`SPECS` is the table: one :class:`Spec` per key (``{arch}`` stands for the
file's ``general.architecture``). :func:`metadata_value` is the only way the
decoder reads metadata: it looks the key up in the table, checks the stored
value's type and range (an array's item type and count *before* its items are
read, so a lying vocabulary costs nothing) and returns it, or raises one
:class:`ModelError` sentence naming the file, the key, what it holds and what was
expected::

    model.gguf: metadata llama.block_count holds the float nan; expected a whole
    number from 1 to 1,024.

The table follows what llama.cpp's own converter writes (``convert_hf_to_gguf.py`` with
its ``gguf-py`` ``GGUFWriter``), not only the GGUF spec: a value it can write for a family
read here is never refused. So 0 means "none" where the converter writes 0 for none
(Phi-3's ``attention.sliding_window`` when the model has no window), a count may be one
value per layer (``GGUFWriter.add_head_count`` takes a list), and a special token id past
the vocabulary is read as no such token, as llama.cpp's loader does.

:func:`check_vocabulary_sizes` compares the declared sizes with each other
(``vocab_size``, the token list, token types, merges, bos / eos ids) from the
arrays' headers alone, before the vocabulary is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.gguf_file import ArrayAt

if TYPE_CHECKING:
    from attn_explorer.models.formats.gguf_file import GGUFFile

INTEGER, REAL, TEXT, FLAG, STRINGS, INTEGERS = (
    "integer", "real", "text", "flag", "strings", "integers",
)  # fmt: skip

#: Largest vocabulary read (real ones have 32 000 – 256 000 tokens).
MAX_VOCAB = 1 << 21
#: Merges per token at most (Llama 3 has 2.2, Qwen2 and SmolLM2 about 1).
MAX_MERGES_PER_TOKEN = 4
#: Longest chat template read (real ones are 1 – 20 KB).
MAX_TEMPLATE_CHARS = 200_000


@dataclass(frozen=True)
class Spec:
    """What one metadata key must hold.

    ``kind``: ``integer`` (a whole number, ``low``…``high``), ``real`` (a finite number
    over ``above``, at most ``high``), ``text`` (at most ``high`` characters), ``flag``
    (a bool), ``strings`` / ``integers`` (an array of ``low``…``high`` items; integer
    items within ``item_low``…``item_high``). ``default`` is used when the key is
    absent and not ``required``.

    How the converter's files are read: ``zero_is_none`` reads 0 as absent (the converter
    writes 0 for "none"); ``per_layer`` also takes an array of integers, one per layer,
    all equal (a model whose layers differ is refused, naming the values); ``token_id``
    reads an id at or past the token count as absent; ``read_at_most`` reads a larger
    (valid) value as that bound.
    """

    kind: str
    low: float | None = None
    high: float | None = None
    above: float | None = None
    required: bool = True
    default: Any = None
    item_low: int | None = None
    item_high: int | None = None
    zero_is_none: bool = False
    per_layer: bool = False
    token_id: bool = False
    read_at_most: int | None = None

    def expected(self) -> str:
        """The range in words, for a message."""
        if self.kind == INTEGER:
            words = f"a whole number from {self.low:,} to {self.high:,}"
            if self.zero_is_none:
                words += " (0 for none)"
            if self.per_layer:
                words += ", or one per layer, all equal"
            return words
        if self.kind == REAL:
            words = f"a finite number over {self.above:g}, at most {self.high:g}"
            return words + " (0 for none)" if self.zero_is_none else words
        if self.kind == TEXT:
            return f"text of at most {self.high:,} characters"
        if self.kind == FLAG:
            return "true or false"
        items = "strings" if self.kind == STRINGS else "whole numbers"
        if self.kind == INTEGERS:
            items += f" from {self.item_low} to {self.item_high}"
        return f"an array of {self.low:,} to {self.high:,} {items}"


_DIM = 1 << 17
#: The largest value a uint32 key holds: GGUFWriter writes counts and ids as uint32.
_U32 = (1 << 32) - 1
#: The context read at most: no text here comes near it; a model may declare more.
MAX_CONTEXT = 1 << 24
#: Each rule's reason, from llama.cpp's converter (``conversion/*.py`` in recent releases,
#: one ``convert_hf_to_gguf.py`` before) and loader (``src/llama-model.cpp``):
#: - context_length: ``add_context_length(max_position_embeddings)``, a uint32; a model may
#:   declare any length (Llama 4 Scout: 10 M); read as at most MAX_CONTEXT.
#: - feed_forward_length, head_count, head_count_kv: ``add_feed_forward_length`` /
#:   ``add_head_count`` / ``add_head_count_kv`` write a list as an array (one per layer) and
#:   llama.cpp reads either (``get_key_or_arr``).
#: - attention.sliding_window: Phi-3 writes 0 when the model has none ("use zero value of
#:   sliding_window to distinguish Phi-4"); llama.cpp's Gemma 3 and Phi-3 loaders treat 0
#:   as no window (``found_swa && n_swa > 0``).
#: - final/attn_logit_softcapping: Gemma 3's loader applies a final cap only when it is not
#:   0 (``if (hparams.f_final_logit_softcapping)``); a cap of 0 can only mean none.
#: - rope.scaling.type / factor: ``add_rope_scaling_type`` / ``_factor`` when config.json's
#:   rope_type is linear, yarn or longrope (Gemma 3 4B and up: linear 8 on global layers);
#:   rope.scale_linear is the key older converters wrote. llama.cpp reads a factor of 0 as
#:   none ("ropescale == 0.0f ? 1.0f : 1.0f/ropescale").
#: - bos/eos_token_id: ``SpecialVocab`` writes config.json's ids unchecked when it is not
#:   given the vocabulary size (the BPE path), as uint32; llama.cpp's vocabulary loader
#:   warns "bad special token" and keeps no such token when an id is past the vocabulary.
SPECS: dict[str, Spec] = {
    "general.architecture": Spec(TEXT, high=64),
    "general.name": Spec(TEXT, high=4096, required=False),
    "general.file_type": Spec(INTEGER, 0, 1 << 16, required=False),
    "{arch}.block_count": Spec(INTEGER, 1, 1024),
    "{arch}.context_length": Spec(INTEGER, 1, _U32, read_at_most=MAX_CONTEXT),
    "{arch}.embedding_length": Spec(INTEGER, 1, _DIM),
    "{arch}.feed_forward_length": Spec(INTEGER, 1, 1 << 20, per_layer=True),
    "{arch}.attention.head_count": Spec(INTEGER, 1, 1024, per_layer=True),
    "{arch}.attention.head_count_kv": Spec(INTEGER, 1, 1024, required=False, per_layer=True),
    "{arch}.rope.dimension_count": Spec(INTEGER, 2, _DIM, required=False),
    "{arch}.attention.key_length": Spec(INTEGER, 2, _DIM, required=False),
    "{arch}.attention.value_length": Spec(INTEGER, 1, _DIM, required=False),
    "{arch}.attention.sliding_window": Spec(INTEGER, 1, 1 << 24, required=False, zero_is_none=True),
    "{arch}.attention.scale": Spec(REAL, above=0, high=1e6, required=False),
    "{arch}.attn_logit_softcapping": Spec(
        REAL, above=0, high=1e6, required=False, zero_is_none=True
    ),
    "{arch}.final_logit_softcapping": Spec(
        REAL, above=0, high=1e6, required=False, zero_is_none=True
    ),
    "{arch}.rope.freq_base_swa": Spec(REAL, above=0, high=1e12, required=False),
    "{arch}.vocab_size": Spec(INTEGER, 1, MAX_VOCAB, required=False),
    "{arch}.rope.freq_base": Spec(REAL, above=0, high=1e12, required=False, default=10000.0),
    "{arch}.rope.scaling.type": Spec(TEXT, high=64, required=False, default=""),
    "{arch}.rope.scaling.factor": Spec(REAL, above=0, high=1e6, required=False, zero_is_none=True),
    "{arch}.rope.scale_linear": Spec(REAL, above=0, high=1e6, required=False, zero_is_none=True),
    "{arch}.attention.layer_norm_rms_epsilon": Spec(REAL, above=0, high=1),
    "tokenizer.ggml.model": Spec(TEXT, high=64),
    "tokenizer.ggml.pre": Spec(TEXT, high=256, required=False, default=""),
    "tokenizer.ggml.tokens": Spec(STRINGS, 1, MAX_VOCAB),
    "tokenizer.ggml.merges": Spec(STRINGS, 1, MAX_VOCAB * MAX_MERGES_PER_TOKEN),
    # llama.cpp's llama_token_type: 0 undefined … 6 byte
    "tokenizer.ggml.token_type": Spec(
        INTEGERS, 0, MAX_VOCAB, required=False, default=(), item_low=0, item_high=6
    ),
    "tokenizer.ggml.bos_token_id": Spec(INTEGER, 0, _U32, required=False, token_id=True),
    "tokenizer.ggml.eos_token_id": Spec(INTEGER, 0, _U32, required=False, token_id=True),
    "tokenizer.ggml.add_bos_token": Spec(FLAG, required=False, default=False),
    "tokenizer.chat_template": Spec(TEXT, high=MAX_TEMPLATE_CHARS, required=False, default=""),
}


def describe(value: Any, file: GGUFFile | None = None, key: str = "") -> str:
    """What a stored value is, in a message's words: 'the float nan', 'an array of 3 integers'."""
    if isinstance(value, ArrayAt):
        header = file.array_header(key) if file is not None else None
        if header is None:
            return "an array"
        kind, count = header
        return f"an array of {count:,} {kind} items"
    if isinstance(value, bool):
        return f"the flag {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value:,}"
    if isinstance(value, float):
        return f"the float {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return f"the text {shown!r} ({len(value):,} character{'' if len(value) == 1 else 's'})"
    return f"a {type(value).__name__}"


def refuse(file: GGUFFile, key: str, holds: str, expected: str) -> ModelError:
    """The one message shape: ``<file>: metadata <key> holds <what>; expected <what>.``"""
    return ModelError(f"{file.path}: metadata {key} holds {holds}; expected {expected}.")


def metadata_value(file: GGUFFile, key: str, arch: str = "") -> Any:
    """The value of metadata ``key`` (a :data:`SPECS` key, ``{arch}`` filled with ``arch``),
    checked against its spec; its default when absent and optional.

    Raises :class:`ModelError` naming the file, the key, what it holds and what was
    expected. Arrays are checked by their header (item type, count) before they are read.
    """
    spec = SPECS[key]
    name = key.format(arch=arch)
    stored = file.scalars.get(name)
    if stored is None:
        if spec.required:
            raise refuse(file, name, "nothing (the key is missing)", spec.expected())
        return spec.default
    if spec.kind in (STRINGS, INTEGERS):
        return _array(file, name, spec, stored)
    value = _one_per_layer(file, name, spec, arch) if spec.per_layer else stored
    if spec.zero_is_none and value == 0 and not isinstance(value, (bool, str, ArrayAt)):
        return spec.default
    ok = False
    if spec.kind == INTEGER:
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and spec.low is not None and spec.high is not None
        ok = ok and spec.low <= value <= spec.high
    elif spec.kind == REAL:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and value > spec.above and value <= spec.high
        value = float(value) if ok else value
    elif spec.kind == TEXT:
        ok = isinstance(value, str) and len(value) <= (spec.high or 0)
    elif spec.kind == FLAG:
        ok = isinstance(value, bool)
    if not ok:
        holds = describe(stored, file, name)
        if value is not stored:  # one value per layer, all equal: name it
            holds += f" (each {describe(value)})"
        raise refuse(file, name, holds, spec.expected())
    if spec.token_id and value >= array_count(file, "tokenizer.ggml.tokens"):
        return None  # llama.cpp: "bad special token", no such token
    if spec.read_at_most is not None:
        value = min(value, spec.read_at_most)
    return value


def _one_per_layer(file: GGUFFile, name: str, spec: Spec, arch: str) -> Any:
    """A per-layer key's one value: the scalar itself, or the value every item of an
    integer array with one item per layer holds (else one refusal naming the values)."""
    stored = file.scalars.get(name)
    if not isinstance(stored, ArrayAt):
        return stored
    header = file.array_header(name)
    layers = metadata_value(file, "{arch}.block_count", arch)
    if header is None or header[0] != "integer" or header[1] != layers:
        where = f" ({layers:,} layers)"
        raise refuse(file, name, describe(stored, file, name), spec.expected() + where)
    values = list(file.get(name))
    if len(set(values)) > 1:
        shown = ", ".join(f"{v:,}" for v in values[:8]) + (", …" if len(values) > 8 else "")
        raise refuse(
            file, name, f"different values per layer ({shown})",
            "the same value in every layer (layers of different sizes are not supported)",
        )  # fmt: skip
    return values[0]


def _array(file: GGUFFile, name: str, spec: Spec, stored: Any) -> list[Any]:
    header = file.array_header(name)
    want = "string" if spec.kind == STRINGS else "integer"
    if header is None or header[0] != want:
        raise refuse(file, name, describe(stored, file, name), spec.expected())
    count = header[1]
    if not (spec.low or 0) <= count <= (spec.high or 0):
        raise refuse(file, name, describe(stored, file, name), spec.expected())
    items = list(file.get(name))
    if spec.kind == INTEGERS and items:
        low, high = min(items), max(items)
        if low < (spec.item_low or 0) or high > (spec.item_high or 0):
            bad = low if low < (spec.item_low or 0) else high
            where = items.index(bad)
            raise refuse(
                file, name, f"{bad:,} at index {where:,} (of {count:,} items)", spec.expected()
            )
    return items


def array_count(file: GGUFFile, key: str) -> int:
    """How many items array ``key`` declares (0 when absent), type-checked, unread."""
    spec = SPECS[key]
    stored = file.scalars.get(key)
    if stored is None:
        return 0
    header = file.array_header(key)
    want = "string" if spec.kind == STRINGS else "integer"
    if header is None or header[0] != want:
        raise refuse(file, key, describe(stored, file, key), spec.expected())
    return header[1]


def check_vocabulary_sizes(file: GGUFFile, vocab_size: int | None) -> int:
    """Compare the vocabulary's declared sizes before it is built; return the token count.

    ``vocab_size`` is the model's (``<arch>.vocab_size``, or the embedding's rows):
    the token list must have exactly that many entries, the token types at most
    that many and the merges at most :data:`MAX_MERGES_PER_TOKEN` per token; the bos / eos
    ids are checked for type (an id past the tokens is read as none, as llama.cpp does).
    """
    tokens = array_count(file, "tokenizer.ggml.tokens")
    if tokens == 0:
        raise refuse(
            file, "tokenizer.ggml.tokens", "nothing (the key is missing or empty)",
            SPECS["tokenizer.ggml.tokens"].expected(),
        )  # fmt: skip
    if vocab_size is not None and tokens != vocab_size:
        raise refuse(
            file, "tokenizer.ggml.tokens", f"{tokens:,} tokens",
            f"{vocab_size:,}, the model's vocabulary size (the file is inconsistent)",
        )  # fmt: skip
    types = array_count(file, "tokenizer.ggml.token_type")
    if types > tokens:
        raise refuse(
            file, "tokenizer.ggml.token_type", f"{types:,} entries",
            f"at most one per token ({tokens:,})",
        )  # fmt: skip
    merges = array_count(file, "tokenizer.ggml.merges")
    if merges > MAX_MERGES_PER_TOKEN * tokens:
        raise refuse(
            file, "tokenizer.ggml.merges", f"{merges:,} merges",
            f"at most {MAX_MERGES_PER_TOKEN} per token ({MAX_MERGES_PER_TOKEN * tokens:,})",
        )  # fmt: skip
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        metadata_value(file, key)  # type and range; an id past the tokens reads as none
    return tokens


def embedding_shape_error(file: GGUFFile, arch: str, hidden: int, vocab: int | None) -> ModelError:
    """The embedding table is not (vocabulary, width): name the tensor, its shape and the
    shape expected, and say when its two dimensions are swapped (a converter's mistake),
    rather than blame the vocabulary size its rows were compared with."""
    shape = file.shape("token_embd.weight")
    rows = vocab or array_count(file, "tokenizer.ggml.tokens") or None
    expected = f"({rows}, {hidden})" if rows else f"(vocabulary, {hidden})"
    swapped = len(shape) == 2 and shape[0] == hidden and (rows is None or shape[1] == rows)
    return ModelError(
        f"{file.path}: tensor 'token_embd.weight' has shape {shape}; expected {expected}, one "
        f"row of {arch}.embedding_length = {hidden} values per token"
        + (
            ": its two dimensions are swapped; convert the model again (llama.cpp's "
            "convert_hf_to_gguf.py writes it as the model has it)."
            if swapped
            else "; the file is inconsistent."
        )
    )
