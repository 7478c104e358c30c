"""WordPiece tokenization over ``vocab.txt``, matching ``BertTokenizerFast``.

Three steps, as in the Hugging Face ``tokenizers`` pipeline:

1. normalise (BertNormalizer): drop control characters, turn whitespace into
   spaces, put spaces around CJK ideographs, strip accents (NFD, drop non-spacing
   marks), lower-case — in that order;
2. pre-tokenise (BertPreTokenizer): split on whitespace, and cut every
   punctuation character out as a word of its own;
3. WordPiece: longest vocabulary match first, continuation pieces prefixed with
   ``##``; a word that cannot be covered, or is longer than 100 characters,
   becomes ``[UNK]``.

Then ``[CLS] A [SEP]`` (or ``[CLS] A [SEP] B [SEP]`` with token types 0…0 1…1).
Special tokens typed literally (``[MASK]``) are kept whole, as the fast tokenizer does.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from attn_explorer.models.errors import ModelError, TextError, check_text
from attn_explorer.models.formats.config import TokenizerConfig, read_model_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100
#: Largest vocab.txt read (bert-base's is 0.2 MB, multilingual BERT's 1 MB).
MAX_VOCAB_BYTES = 16 * 1024 * 1024

#: CJK Unified Ideographs and their extensions: the blocks BERT splits per character.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_cjk(char: str) -> bool:
    """True for a CJK ideograph (not Hiragana, Katakana or Hangul, which BERT keeps in words)."""
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def is_control(char: str) -> bool:
    """Unicode 'Other' (Cc, Cf, Cs, Co, Cn) apart from tab, newline and carriage return."""
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def is_punctuation(char: str) -> bool:
    """ASCII punctuation (including symbols like $ + < = > ^ ` |) or any Unicode P* character."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


@dataclass(frozen=True)
class Encoding:
    """A tokenized sentence (or pair), ready for the model."""

    tokens: list[str]
    input_ids: list[int]
    token_type_ids: list[int]
    truncated: bool = False
    #: wordpieces before truncation, special tokens included
    full_length: int = 0


class WordPieceTokenizer:
    """BERT's tokenizer over a ``vocab.txt`` (one token a line, id = line number)."""

    def __init__(self, vocab: list[str], config: TokenizerConfig | None = None) -> None:
        self.config = config or TokenizerConfig()
        self.vocab: dict[str, int] = {}
        for index, token in enumerate(vocab):
            self.vocab[token] = index  # a repeated token keeps its last id, as in transformers
        self.id_to_token = list(vocab)
        missing = [t for t in ("[UNK]", "[CLS]", "[SEP]") if t not in self.vocab]
        if missing:
            raise ModelError(f"vocab.txt: the special token(s) {', '.join(missing)} are missing.")
        specials = [re.escape(t) for t in SPECIAL_TOKENS if t in self.vocab]
        self._special_split = re.compile("(" + "|".join(specials) + ")")
        strip = self.config.strip_accents
        self._strip_accents = self.config.do_lower_case if strip is None else strip

    @classmethod
    def from_folder(cls, folder: Path, config: TokenizerConfig | None = None) -> WordPieceTokenizer:
        """Read ``folder/vocab.txt``."""
        text = read_model_text(folder / "vocab.txt", MAX_VOCAB_BYTES, "the WordPiece vocabulary")
        vocab = text.split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        return cls([line.rstrip("\r") for line in vocab], config)

    # -- the three steps -------------------------------------------------------------

    def normalize(self, text: str) -> str:
        """BertNormalizer: clean, pad CJK, strip accents, lower-case."""
        chars = []
        for char in text:
            if char in ("\x00", "\ufffd") or is_control(char):
                continue
            if char in "\t\n\r" or char.isspace():
                chars.append(" ")
            elif self.config.tokenize_chinese_chars and is_cjk(char):
                chars.extend((" ", char, " "))
            else:
                chars.append(char)
        text = "".join(chars)
        if self._strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        if self.config.do_lower_case:
            # per character, as the Rust normaliser does: no final-sigma rule (Σ -> σ, never ς)
            text = "".join(c.lower() for c in text)
        return text

    @staticmethod
    def pre_tokenize(text: str) -> list[str]:
        """BertPreTokenizer: whitespace-separated words, each punctuation mark on its own."""
        words: list[str] = []
        for chunk in text.split():
            current = ""
            for char in chunk:
                if is_punctuation(char):
                    if current:
                        words.append(current)
                        current = ""
                    words.append(char)
                else:
                    current += char
            if current:
                words.append(current)
        return words

    def wordpiece(self, word: str) -> list[str]:
        """Greedy longest-match-first split of one word; ``[UNK]`` if it cannot be covered."""
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            return ["[UNK]"]
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            piece = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Wordpieces of ``text`` without [CLS]/[SEP]."""
        pieces: list[str] = []
        for part in self._special_split.split(text):
            if part in self.vocab and part in SPECIAL_TOKENS:
                pieces.append(part)
                continue
            for word in self.pre_tokenize(self.normalize(part)):
                pieces.extend(self.wordpiece(word))
        return pieces

    # -- the model's input -----------------------------------------------------------

    def encode(
        self, text: str, text_pair: str | None = None, max_length: int | None = None
    ) -> Encoding:
        """``[CLS] text [SEP] (pair [SEP])`` with ids and token types, truncated to ``max_length``.

        Truncation is BertTokenizerFast's 'longest_first': drop the last wordpiece of
        the longer sentence until everything fits. Raises :class:`TextError` (a
        ``ValueError``) when a text is not a str, is over ``MAX_TEXT_CHARS`` or has
        no tokens at all.
        """
        text = check_text("text", text)
        text_pair = check_text("text_pair", text_pair, optional=True)
        first = self.tokenize(text)
        if not first:
            raise TextError("text", "the text is empty (no tokens in it)", "type some words")
        second: list[str] | None = None
        if text_pair is not None and text_pair.strip():
            second = self.tokenize(text_pair)
            if not second:
                raise TextError(
                    "text_pair", "the second text has no tokens", "type some words or leave it out"
                )
        specials = 2 if second is None else 3
        full_length = len(first) + (len(second) if second else 0) + specials
        truncated = False
        if max_length is not None and full_length > max_length:
            truncated = True
            budget = max_length - specials
            if second is None:
                first = first[:budget]
            else:
                while len(first) + len(second) > budget:
                    if len(first) > len(second):
                        first.pop()
                    else:
                        second.pop()
        tokens = ["[CLS]", *first, "[SEP]"]
        types = [0] * len(tokens)
        if second is not None:
            tokens += [*second, "[SEP]"]
            types += [1] * (len(second) + 1)
        ids = [self.vocab[t] for t in tokens]
        return Encoding(tokens, ids, types, truncated, full_length)
