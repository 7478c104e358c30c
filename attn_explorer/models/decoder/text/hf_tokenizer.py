"""A Hugging Face folder's own ``tokenizer.json``, with the interface of ``bpe.GGUFTokenizer``.

A folder carries the exact tokenizer its model was trained with, so nothing is rebuilt:
``tokenizers`` reads the file (read first with a size bound, never from a path it opens
itself) and its post-processor adds what the model expects at the start (Llama 3's
``<|begin_of_text|>``). The end-of-text id comes from ``config.json`` or
``generation_config.json`` (``eos_token_id``, an id or a list).
"""

from __future__ import annotations

from pathlib import Path

from attn_explorer.models.decoder.text.bpe import TokenizedText
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.config import read_model_text

#: Largest tokenizer.json read (Gemma 3's is 33 MB).
MAX_TOKENIZER_BYTES = 64 * 2**20


class HFTokenizer:
    """The tokenizer of ``folder/tokenizer.json`` (see the module doc)."""

    def __init__(self, folder: Path, eos_id: int | None, bos_id: int | None = None) -> None:
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        text = read_model_text(path, MAX_TOKENIZER_BYTES, "tokenizer")
        try:
            self._tokenizer = Tokenizer.from_str(text)
        except Exception as exc:  # tokenizers raises its own Exception subclass
            raise ModelError(f"{path}: not a tokenizer file this app reads ({exc}).") from None
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.eos_id, self.bos_id, self.add_bos = eos_id, bos_id, False
        self.control_ids = frozenset(
            index
            for index, token in self._tokenizer.get_added_tokens_decoder().items()
            if token.special
        )

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` with the model's own start tokens (its post-processor's)."""
        return list(self._tokenizer.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special)

    def readable(self, token_id: int) -> str:
        """One token as a person reads it: its own text (special tokens as written)."""
        if token_id in self.control_ids:
            return self._tokenizer.id_to_token(token_id) or ""
        return self._tokenizer.decode([token_id], skip_special_tokens=False)

    def tokenize(self, text: str) -> TokenizedText:
        ids = self.encode(text)
        return TokenizedText(ids, [self.readable(i) for i in ids])
