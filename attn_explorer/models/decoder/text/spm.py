"""A GGUF's SentencePiece tokenizer (``tokenizer.ggml.model = "llama"``: Gemma), built with
Hugging Face ``tokenizers``.

SentencePiece BPE spells a space as "▁" and falls back to byte tokens (``<0x0A>``) for any
character outside the vocabulary. A GGUF stores the vocabulary, a score and a type per token,
but no merges, so they are rebuilt from the vocabulary as transformers' GGUF loader does for
Gemma (``gemma_tokenizer`` in its ``gguf_tokenizer_mapping.py``): every token cut into two
tokens of the vocabulary, ranked by the token's position in the file (Gemma's scores do not
follow its merge order), and tokens of several real spaces respelled with "▁" first. The model
is a BPE with byte fallback behind a normalizer that replaces spaces with "▁"; control tokens
(``<start_of_turn>``) stay whole.

:class:`SentencePieceTokenizer` has the interface of ``bpe.GGUFTokenizer``, so the decoder
takes either.
"""

from __future__ import annotations

import re

from attn_explorer.models.decoder.text.bpe import CONTROL, USER_DEFINED, TokenizerCalls
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import check_vocabulary_sizes, metadata_value

#: SentencePiece's space.
SPACE = "\u2581"
_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def rebuilt_merges(tokens: list[str]) -> list[tuple[str, str]]:
    """Merges implied by a SentencePiece vocabulary, earliest token first (see module doc)."""
    vocab = {token: index for index, token in enumerate(tokens)}
    merges: list[tuple[int, int, int, str, str]] = []
    for index, token in enumerate(tokens):
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab:
                # (rank, then as transformers' generate_merges breaks ties)
                merges.append((index, len(left), len(right), left, right))
    merges.sort(key=lambda m: (m[0], -m[1], -m[2]))
    return [(left, right) for _, _, _, left, right in merges]


class SentencePieceTokenizer(TokenizerCalls):
    """SentencePiece BPE from a GGUF's own vocabulary (``tokenizers`` does the work)."""

    def __init__(
        self,
        tokens: list[str],
        token_types: list[int],
        bos_id: int | None = None,
        eos_id: int | None = None,
        add_bos: bool = True,
        unk_token: str = "<unk>",
    ) -> None:
        from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
        from tokenizers.models import BPE

        spelled = [SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
        vocab = {token: index for index, token in enumerate(spelled)}
        model = BPE(
            vocab=vocab,
            merges=rebuilt_merges(spelled),
            fuse_unk=True,
            unk_token=unk_token if unk_token in vocab else None,
            byte_fallback=True,
        )
        self._tokenizer = Tokenizer(model)
        self._tokenizer.normalizer = normalizers.Replace(" ", SPACE)
        self._tokenizer.pre_tokenizer = pre_tokenizers.Split(
            pattern=" ", behavior="merged_with_previous", invert=False
        )
        self._tokenizer.decoder = decoders.Sequence(
            [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
        )
        kinds = list(token_types) + [1] * (len(tokens) - len(token_types))
        self._tokenizer.add_special_tokens(
            [
                AddedToken(t, normalized=False, special=True)
                for t, kind in zip(spelled, kinds, strict=True)
                if kind == CONTROL
            ]
        )
        self._tokenizer.add_tokens(
            [
                AddedToken(t, normalized=False, special=False)
                for t, kind in zip(spelled, kinds, strict=True)
                if kind == USER_DEFINED
            ]
        )
        self.vocab_size = len(tokens)
        self.id_to_token = spelled
        self.control_ids = frozenset(i for i, kind in enumerate(kinds) if kind == CONTROL)
        self.bos_id, self.eos_id, self.add_bos = bos_id, eos_id, add_bos

    @classmethod
    def from_gguf(cls, file: GGUFFile) -> SentencePieceTokenizer:
        """The SentencePiece tokenizer a GGUF describes (every key checked by its spec)."""
        check_vocabulary_sizes(file, None)  # counts compared before any array is read
        tokens = metadata_value(file, "tokenizer.ggml.tokens")
        if not tokens:
            raise ModelError(f"{file.path}: the tokenizer's vocabulary is missing.")
        # llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise.
        says = "tokenizer.ggml.add_bos_token" in file.scalars
        return cls(
            tokens,
            metadata_value(file, "tokenizer.ggml.token_type") or [],
            bos_id=metadata_value(file, "tokenizer.ggml.bos_token_id"),
            eos_id=metadata_value(file, "tokenizer.ggml.eos_token_id"),
            add_bos=bool(metadata_value(file, "tokenizer.ggml.add_bos_token")) if says else True,
        )

    def readable(self, token_id: int) -> str:
        """One token as a person reads it: '▁cat' -> ' cat', '<0x0A>' -> a newline."""
        piece = self.id_to_token[token_id]
        if token_id in self.control_ids:
            return piece
        byte = _BYTE_TOKEN.match(piece)
        if byte is not None:
            value = int(byte[1], 16)
            return chr(value) if value < 0x80 else f"<{value:02X}>"
        return piece.replace(SPACE, " ")
