"""A tiny random BERT in Hugging Face layout, written fresh for each test that asks; and Q, K, V
projected one Linear at a time, to check the fused projection against."""

import numpy as np
import pytest

from attn_explorer.compute import attention
from attn_explorer.models.formats.safetensors import SafetensorsFile
from attn_explorer.models.testing.tiny_bert import write_tiny_bert


@pytest.fixture
def tiny_model_dir(tmp_path):
    """Folder with config.json, tokenizer_config.json, vocab.txt and model.safetensors."""
    return write_tiny_bert(tmp_path / "tiny-bert")


@pytest.fixture
def tiny_model(tiny_model_dir):
    from attn_explorer.models import load_model

    return load_model(tiny_model_dir)


def _separate_projections(folder, result):
    """Each layer's Q, K, V as three separate float32 Linears of the layer's input, and
    the attention weights they give: (L, H, T, d) ×3 and (L, H, T, T)."""
    file = SafetensorsFile(folder / "model.safetensors")
    L, H, T, d = result.query.shape
    projected = {name: [] for name in ("query", "key", "value")}
    weights = []
    for layer in range(L):
        x = result.hidden_states[layer]  # (T, hidden): the layer's input
        for name, out in projected.items():
            prefix = f"encoder.layer.{layer}.attention.self.{name}."
            y = x @ file.get(prefix + "weight").T + file.get(prefix + "bias")  # (T, H·d)
            out.append(y.reshape(T, H, d).transpose(1, 0, 2))  # (H, T, d)
        q, k = projected["query"][-1], projected["key"][-1]
        weights.append(attention(q, k, scale=True).weights)  # (H, T, T)
    return {name: np.array(arrays) for name, arrays in projected.items()}, np.array(weights)


@pytest.fixture
def separate_projections():
    """``(folder, result) -> ({"query"|"key"|"value": (L, H, T, d)}, weights (L, H, T, T))``."""
    return _separate_projections
