"""A GGUF model's byte-level BPE tokenizer, built with Hugging Face ``tokenizers``.

A GGUF carries no ``tokenizer.json``: it stores the vocabulary
(``tokenizer.ggml.tokens``), the merges, each token's type and the name of the
pre-tokenizer (``tokenizer.ggml.pre``). We build the same tokenizer transformers
builds from them (a BPE model, byte-level pre-tokenizer and decoder, control
tokens added as special tokens so ``<|im_start|>`` stays whole) — with one
deliberate difference: where llama.cpp first splits every digit on its own
(``smollm``, ``starcoder`` and friends, as the models were trained), so do we;
transformers' GGUF loader skips that split.

``readable(id)`` is a token as a person reads it: its bytes decoded (``Ġ`` shown
as a space, ``Ċ`` as a newline); a piece of a multi-byte character shows its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from attn_explorer.models.errors import ModelError, TextError
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import check_vocabulary_sizes, metadata_value

#: ``tokenizer.ggml.token_type`` values (llama.cpp's llama_token_type).
CONTROL, USER_DEFINED = 3, 4

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: ``tokenizer.ggml.pre`` -> the regex that splits text before byte-level BPE (as llama.cpp).
SPLITS = {
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
}
#: Pre-tokenizers that split each digit off before the GPT-2 regex (llama.cpp's ``\p{N}``).
DIGIT_SPLIT = ("smollm", "starcoder", "refact", "codeshell", "command-r", "exaone")


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table (byte 32, a space, is 'Ġ')."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def check_unicode(name: str, text: object) -> str:
    """``text`` if it is a str UTF-8 can encode; else TextError (a ValueError) naming ``name``.

    A lone surrogate comes from invalid UTF-8 bytes on a command line (Python keeps
    them as U+DC80…U+DCFF) or a ``"\\ud800"`` in JSON; ``tokenizers`` would raise
    ``TypeError`` on it.
    """
    if not isinstance(text, str):
        raise TextError(f"{name}: expected text (a str), got {type(text).__name__}.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        what = (
            f"the byte 0x{ord(bad) - 0xDC00:02X}, which is not UTF-8"
            if 0xDC80 <= ord(bad) <= 0xDCFF
            else f"U+{ord(bad):04X}, a lone surrogate"
        )
        raise TextError(
            f"{name}: character {exc.start + 1:,} is {what}; give the text as valid UTF-8."
        ) from None
    return text


def check_merges(merges: list[str], vocab: dict[str, int], source: str) -> list[tuple[str, str]]:
    """Each merge as a pair, checked: text ``"left right"`` whose two parts and their
    join are tokens. ModelError naming ``source`` and the first merge that is not."""
    pairs: list[tuple[str, str]] = []
    for index, merge in enumerate(merges):
        left, space, right = merge.partition(" ") if isinstance(merge, str) else ("", "", "")
        problem = ""
        if not space or not left or not right:
            problem = "is not two tokens separated by a space"
        elif left not in vocab or right not in vocab:
            problem = f"names {left if left not in vocab else right!r}, which is not a token"
        elif left + right not in vocab:
            problem = f"makes {left + right!r}, which is not a token"
        if problem:
            shown = repr(merge) if len(repr(merge)) <= 60 else repr(merge)[:60] + "…"
            raise ModelError(
                f"{source}: tokenizer.ggml.merges entry {index:,} ({shown}) {problem}; "
                "the tokenizer is damaged."
            )
        pairs.append((left, right))
    return pairs


def _bpe_model(bpe: Any, vocab: dict[str, int], merges: list[str], source: str) -> Any:
    """``tokenizers``' BPE model of ``vocab`` and ``merges``; ModelError naming ``source``.

    The usual file is split and built at once. ``tokenizers`` refuses a merge whose two
    tokens or their join are not in the vocabulary, as :func:`check_merges` does. Only
    when it refuses, or when a merge is not two non-empty parts, does
    :func:`check_merges` walk the list to name the entry. SmolLM2's 48 900 merges:
    0.015 s split, against 0.08–0.1 s checked one by one in Python.
    """
    try:
        pairs = [tuple(merge.split(" ")) for merge in merges]
        whole = all(len(pair) == 2 and pair[0] and pair[1] for pair in pairs)
    except AttributeError:  # an entry that is not text
        whole = False
    try:
        if whole:
            return bpe(vocab=vocab, merges=pairs, fuse_unk=False)
    except Exception as exc:  # tokenizers' own words, unless the check names the entry
        check_merges(merges, vocab, source)
        raise ModelError(f"{source}: the tokenizer cannot be built ({exc}).") from None
    checked = check_merges(merges, vocab, source)  # names the first entry that is not a pair
    try:
        return bpe(vocab=vocab, merges=checked, fuse_unk=False)
    except Exception as exc:  # tokenizers' own words, as one sentence naming the file
        raise ModelError(f"{source}: the tokenizer cannot be built ({exc}).") from None


@dataclass(frozen=True)
class TokenizedText:
    """Ids and readable tokens of one text."""

    ids: list[int]
    tokens: list[str]


class TokenizerCalls:
    """What the decoder calls on a GGUF's tokenizer, over a ``tokenizers.Tokenizer`` the
    subclass builds (``_tokenizer``), with ``bos_id``, ``add_bos`` and ``readable``."""

    _tokenizer: Any
    bos_id: int | None
    add_bos: bool

    def token_id(self, token: str) -> int | None:
        """The id of a token spelled as in the vocabulary, or None."""
        found: int | None = self._tokenizer.token_to_id(token)
        return found

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, after BOS when the file asks for it; control tokens written in it
        (``<|im_start|>``, ``<start_of_turn>``) stay whole."""
        ids: list[int] = self._tokenizer.encode(
            check_unicode("text", text), add_special_tokens=False
        ).ids
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return ids

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        """Text of ``ids``, as the tokenizer's decoder joins them."""
        text: str = self._tokenizer.decode(list(ids), skip_special_tokens=skip_special)
        return text

    def readable(self, token_id: int) -> str:
        raise NotImplementedError


class GGUFTokenizer(TokenizerCalls):
    """Byte-level BPE from a GGUF's own vocabulary and merges (``tokenizers`` does the work)."""

    def __init__(
        self,
        tokens: list[str],
        merges: list[str],
        token_types: list[int],
        pre: str = "",
        bos_id: int | None = None,
        eos_id: int | None = None,
        add_bos: bool = False,
        source: str = "tokenizer",
    ) -> None:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
        from tokenizers.models import BPE

        alphabet = byte_alphabet()
        letters = set(alphabet.values())
        if set("".join(tokens)) <= letters:  # the usual GGUF: spelled in the alphabet already
            spelled = tokens  # (each token's letters are among all tokens' letters)
        else:
            spelled = [
                t if set(t) <= letters else "".join(alphabet[b] for b in t.encode("utf-8"))
                for t in tokens
            ]
        vocab = {token: index for index, token in enumerate(spelled)}
        if len(token_types) > len(tokens):
            raise ModelError(
                f"{source}: tokenizer.ggml.token_type has {len(token_types):,} entries for "
                f"{len(tokens):,} tokens; expected at most one per token."
            )
        for name, token in (("bos_token_id", bos_id), ("eos_token_id", eos_id)):
            if token is not None and not 0 <= token < len(tokens):
                raise ModelError(
                    f"{source}: tokenizer.ggml.{name} is {token}; expected a token id "
                    f"from 0 to {len(tokens) - 1:,}."
                )
        model = _bpe_model(BPE, vocab, merges, source)
        self._tokenizer = Tokenizer(model)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre not in SPLITS)
        if pre in SPLITS:
            split = pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated")
            self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
        elif pre in DIGIT_SPLIT:
            digits = pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated")
            self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence([digits, byte_level])
        else:
            self._tokenizer.pre_tokenizer = byte_level
        self._tokenizer.decoder = decoders.ByteLevel()
        kinds = list(token_types) + [1] * (len(tokens) - len(token_types))
        control = [
            AddedToken(t, normalized=False, special=True)
            for t, kind in zip(tokens, kinds, strict=True)
            if kind == CONTROL and set(t) <= letters
        ]
        self._tokenizer.add_special_tokens(control)
        user = [
            AddedToken(t, normalized=False, special=False)
            for t, kind in zip(tokens, kinds, strict=True)
            if kind == USER_DEFINED and t in vocab
        ]
        self._tokenizer.add_tokens(user)
        self.vocab_size = len(tokens)
        self.id_to_token = tokens
        self.control_ids = frozenset(i for i, kind in enumerate(kinds) if kind == CONTROL)
        self.bos_id, self.eos_id, self.add_bos = bos_id, eos_id, add_bos
        self._byte_of = {c: b for b, c in alphabet.items()}

    @classmethod
    def from_gguf(cls, file: GGUFFile) -> GGUFTokenizer:
        """The tokenizer a GGUF describes; ModelError if it is not byte-level BPE."""
        kind = metadata_value(file, "tokenizer.ggml.model")
        if kind != "gpt2":
            raise ModelError(
                f"{file.path}: tokenizer.ggml.model is {kind!r}; only byte-level BPE ('gpt2', "
                "as in SmolLM2, Llama 3 and Qwen2) is supported."
            )
        check_vocabulary_sizes(file, None)  # counts compared before any array is read
        return cls(
            metadata_value(file, "tokenizer.ggml.tokens"),
            metadata_value(file, "tokenizer.ggml.merges"),
            metadata_value(file, "tokenizer.ggml.token_type"),
            pre=metadata_value(file, "tokenizer.ggml.pre"),
            bos_id=metadata_value(file, "tokenizer.ggml.bos_token_id"),
            eos_id=metadata_value(file, "tokenizer.ggml.eos_token_id"),
            add_bos=metadata_value(file, "tokenizer.ggml.add_bos_token"),
            source=str(file.path),
        )

    def readable(self, token_id: int) -> str:
        """One token as a person reads it: 'Ġcat' -> ' cat'; a partial character as bytes."""
        piece = self.id_to_token[token_id]
        if token_id in self.control_ids or not all(c in self._byte_of for c in piece):
            return piece
        raw = bytes(self._byte_of[c] for c in piece)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(f"<{b:02X}>" for b in raw)

    def tokenize(self, text: str) -> TokenizedText:
        ids = self.encode(text)
        return TokenizedText(ids, [self.readable(i) for i in ids])
