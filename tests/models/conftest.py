"""A tiny random BERT in Hugging Face layout, written fresh for each test that asks."""

import pytest

from attn_explorer.models.testing import write_tiny_bert


@pytest.fixture
def tiny_model_dir(tmp_path):
    """Folder with config.json, tokenizer_config.json, vocab.txt and model.safetensors."""
    return write_tiny_bert(tmp_path / "tiny-bert")


@pytest.fixture
def tiny_model(tiny_model_dir):
    from attn_explorer.models import load_model

    return load_model(tiny_model_dir)
