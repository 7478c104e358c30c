"""``config.json`` and ``tokenizer_config.json`` of a Hugging Face BERT folder.

Only the fields the forward pass and the tokenizer need are kept, in a frozen
dataclass; each is checked so that a wrong or unsupported model fails here with
one clear sentence instead of deep inside a matrix product.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attn_explorer.compute import LIMITS
from attn_explorer.models.errors import ModelError
from attn_explorer.state.storage.safe_files import FileRefused, parse_json, read_user_file

#: ``model_type`` values whose weights follow BertModel's names and whose forward
#: pass this package implements.
BERT_MODEL_TYPES = ("bert",)
#: Activations the feed-forward block can use.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
#: Largest config.json / tokenizer_config.json read (a real one is about 1 KB).
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class BertConfig:
    """The architecture of a BERT encoder, as read from ``config.json``."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    model_type: str = "bert"

    @property
    def head_size(self) -> int:
        """d_head = hidden_size / heads."""
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class TokenizerConfig:
    """How the text is normalised before WordPiece (``tokenizer_config.json``)."""

    do_lower_case: bool = True
    strip_accents: bool | None = None  # None: follow do_lower_case, as BertTokenizerFast does
    tokenize_chinese_chars: bool = True
    model_max_length: int | None = None


def read_model_text(path: Path, limit: int, what: str) -> str:
    """A text file of a model folder (UTF-8, a BOM allowed, at most ``limit`` bytes).

    ModelError names the file and says what is wrong: missing, not a regular
    file, too big, or not UTF-8 text.
    """
    try:
        data = read_user_file(path, limit, what)
    except FileRefused as exc:
        if str(exc) == "no such file":
            raise ModelError(f"{path.parent}: no {path.name} ({what}) in this folder.") from None
        raise ModelError(f"{path}: {exc}.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not UTF-8 text (byte {exc.start}); is this {what}?") from None


def _read_json(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; ModelError naming the file for anything else."""
    text = read_model_text(path, MAX_CONFIG_BYTES, what)
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    except RecursionError:
        raise ModelError(f"{path}: not valid JSON (nested too deeply).") from None
    if not isinstance(value, dict):
        raise ModelError(f"{path}: expected a JSON object.")
    for key in getattr(value, "duplicates", ()):
        raise ModelError(f'{path}: field "{key}" appears more than once; keep one.')
    return value


def read_config(folder: Path) -> BertConfig:
    """Parse and check ``folder/config.json``; ``ModelError`` if it is not a usable BERT."""
    path = folder / "config.json"
    raw = _read_json(path, "the model's configuration")
    model_type = raw.get("model_type")
    if model_type not in BERT_MODEL_TYPES:
        raise ModelError(
            f"{path}: model_type is {model_type!r}; only BERT-family encoders "
            f"({', '.join(BERT_MODEL_TYPES)}) are supported."
        )

    def integer(name: str, default: int | None = None, minimum: int = 1) -> int:
        value = raw.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ModelError(f"{path}: {name} is {value!r}; expected an integer ≥ {minimum}.")
        return value

    position_type = raw.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ModelError(
            f"{path}: position_embedding_type {position_type!r} is not supported "
            "(only 'absolute' position embeddings)."
        )
    if raw.get("is_decoder", False):
        raise ModelError(f"{path}: is_decoder is true; only encoders are supported.")
    act = raw.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ModelError(
            f"{path}: hidden_act {act!r} is not supported; use one of {', '.join(ACTIVATIONS)}."
        )
    eps = raw.get("layer_norm_eps", 1e-12)
    # 1e309 reads as inf: every LayerNorm would divide by it and every weight become 0.25.
    if (
        not isinstance(eps, int | float)
        or isinstance(eps, bool)
        or not (0 < eps < 1 and math.isfinite(eps))
    ):
        raise ModelError(
            f"{path}: layer_norm_eps is {eps!r}; expected a small positive number "
            "(BERT uses 1e-12)."
        )
    config = BertConfig(
        vocab_size=integer("vocab_size"),
        hidden_size=integer("hidden_size"),
        num_hidden_layers=integer("num_hidden_layers"),
        num_attention_heads=integer("num_attention_heads"),
        intermediate_size=integer("intermediate_size"),
        max_position_embeddings=integer("max_position_embeddings", minimum=3),
        type_vocab_size=integer("type_vocab_size", 2),
        layer_norm_eps=float(eps),
        hidden_act=act,
        pad_token_id=integer("pad_token_id", 0, minimum=0),
        model_type=model_type,
    )
    if config.hidden_size % config.num_attention_heads:
        raise ModelError(
            f"{path}: hidden_size {config.hidden_size} is not a multiple of "
            f"num_attention_heads {config.num_attention_heads}."
        )
    # The explorer's own limits (attn_explorer.compute.LIMITS) apply to every head.
    if config.num_attention_heads > LIMITS.max_heads:
        raise ModelError(
            f"{path}: num_attention_heads is {config.num_attention_heads}, over the "
            f"explorer's limit of {LIMITS.max_heads} heads."
        )
    if config.head_size > LIMITS.max_dim:
        raise ModelError(
            f"{path}: hidden_size {config.hidden_size} / num_attention_heads "
            f"{config.num_attention_heads} = {config.head_size} per head, over the "
            f"explorer's limit of {LIMITS.max_dim} (vector size d)."
        )
    return config


def read_tokenizer_config(folder: Path) -> TokenizerConfig:
    """Parse ``folder/tokenizer_config.json`` if present; defaults are bert-base-uncased's."""
    path = folder / "tokenizer_config.json"
    if not path.exists():
        return TokenizerConfig()
    raw = _read_json(path, "the tokenizer's configuration")
    strip = raw.get("strip_accents")
    max_len = raw.get("model_max_length")
    return TokenizerConfig(
        do_lower_case=bool(raw.get("do_lower_case", True)),
        strip_accents=None if strip is None else bool(strip),
        tokenize_chinese_chars=bool(raw.get("tokenize_chinese_chars", True)),
        model_max_length=max_len if isinstance(max_len, int) and max_len < 10**9 else None,
    )
