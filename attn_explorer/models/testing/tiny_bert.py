"""A tiny random BERT in Hugging Face layout, for tests and demos (no download, no torch).

``write_tiny_bert(folder)`` writes ``config.json``, ``tokenizer_config.json``,
``vocab.txt`` and ``model.safetensors`` (2 layers, 2 heads, hidden 8 by default)
with seeded random weights large enough that every head attends differently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.models.encoder.bert import expected_shapes
from attn_explorer.models.formats.config import BertConfig
from attn_explorer.models.formats.safetensors import save_safetensors

#: A vocabulary that exercises WordPiece: whole words, ## pieces, punctuation, a CJK ideograph.
TINY_VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + list(".,!?'-()$")
    + list("abcdefghijklmnopqrstuvwxyz")
    + ["the", "cat", "sat", "on", "mat", "dog", "ran", "man", "is", "eating", "food"]
    + ["un", "##aff", "##able", "##s", "##ing", "##ed", "cafe", "naive", "hello", "world"]
    + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    + ["中", "国"]
)


def tiny_config(**overrides: object) -> dict[str, Any]:
    """The tiny model's ``config.json`` as a dict; ``overrides`` replace fields."""
    config: dict[str, Any] = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": len(TINY_VOCAB),
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
    }
    config.update(overrides)
    return config


def write_tiny_bert(
    folder: str | Path,
    *,
    seed: int = 0,
    config: dict[str, Any] | None = None,
    bf16: bool = False,
    weight_prefix: str = "",
) -> Path:
    """Write a tiny random BERT into ``folder`` (created if needed) and return the folder.

    ``bf16`` stores the weights as bfloat16; ``weight_prefix`` (e.g. ``"bert."``)
    names them as a pre-training checkpoint would.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    raw = config or tiny_config()
    (out / "config.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}), encoding="utf-8"
    )
    (out / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    shapes = expected_shapes(
        BertConfig(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            num_hidden_layers=raw["num_hidden_layers"],
            num_attention_heads=raw["num_attention_heads"],
            intermediate_size=raw["intermediate_size"],
            max_position_embeddings=raw["max_position_embeddings"],
            type_vocab_size=raw["type_vocab_size"],
        )
    )
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith("LayerNorm.weight"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            value = 0.1 * rng.standard_normal(shape)
        else:
            value = 0.7 * rng.standard_normal(shape)
        tensors[weight_prefix + name] = value.astype(np.float32)
    save_safetensors(
        out / "model.safetensors",
        tensors,
        metadata={"format": "pt"},
        bf16=list(tensors) if bf16 else (),
    )
    return out
