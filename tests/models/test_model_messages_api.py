"""Every class of refusal the Python API raises names the argument (or the file and the
tensor) in the API's own words, and carries the fields each entry point phrases (issue 36):
model file errors, text errors, size and limit errors, pair errors. The CLI's and the
window's phrasings of the same refusals are tested in tests/cli/test_model_messages_cli.py
and tests/ui/test_model_messages.py."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.cli.model_export import run_head_export, run_model_export
from attn_explorer.models import ModelError, TextError, load_model
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.errors import LimitError, Refusal, phrase
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.testing.hostile_gguf import rewrite_gguf
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.state.storage.tensor_inputs import explorer_inputs

LONG = "the cat sat on the mat " * 4  # 34 tokens of the tiny vocabulary


@pytest.fixture(scope="module")
def decoder_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("decoder") / "tiny.gguf"
    write_tiny_gguf(path, context_length=16)
    return path


@pytest.fixture(scope="module")
def decoder(decoder_path):
    return load_gguf(decoder_path)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return load_model(write_tiny_bert(tmp_path_factory.mktemp("bert") / "bert"))


def refusal(call) -> Refusal:
    with pytest.raises(ValueError) as caught:
        call()
    assert isinstance(caught.value, Refusal), repr(caught.value)
    return caught.value


# -- model file errors ------------------------------------------------------------------------
def test_a_swapped_embedding_names_the_tensor_its_shape_and_the_shape_expected(
    decoder_path, tmp_path
):
    table = GGUFFile(decoder_path).dequantize("token_embd.weight")  # (269, 32)
    swapped = rewrite_gguf(
        decoder_path, tmp_path / "s.gguf", tensors={"token_embd.weight": table.T}
    )
    error = refusal(lambda: load_gguf(swapped))
    assert isinstance(error, ModelError)
    assert str(error) == (
        f"{swapped}: tensor 'token_embd.weight' has shape (32, 269); expected (269, 32), one "
        "row of llama.embedding_length = 32 values per token: its two dimensions are swapped; "
        "convert the model again (llama.cpp's convert_hf_to_gguf.py writes it as the model "
        "has it)."
    )
    assert "vocab_size" not in str(error)
    # a file's fault names the file in every entry point's words alike
    assert phrase(error, "cli") == phrase(error, "window") == str(error)


# -- text errors --------------------------------------------------------------------------------
def test_text_errors_name_the_argument(decoder, bert):
    error = refusal(lambda: decoder.generate(""))
    assert isinstance(error, TextError) and error.what == "prompt"
    assert str(error) == "prompt: the text is empty; type at least one word."
    error = refusal(lambda: bert.attention("\u200b"))
    assert (error.what, str(error)) == (
        "text", "text: the text is empty (no tokens in it); type some words."
    )  # fmt: skip
    error = refusal(lambda: decoder.attention(3))  # not a str
    assert (error.what, error.value, str(error)) == (
        "text", "int", "text: expected text (a str), got int."
    )  # fmt: skip


# -- size and limit errors ----------------------------------------------------------------------
def test_size_errors_name_the_argument_its_size_and_the_limit(decoder):
    error = refusal(lambda: decoder.attention(LONG))
    assert str(error) == "text: 34 tokens, over this model's limit of 16 for one pass; shorten it."
    error = refusal(lambda: decoder.attention("a" * 100_001))
    assert isinstance(error, LimitError)
    assert (error.what, error.value, error.expected) == ("text", 100_001, 100_000)
    assert str(error) == (
        "text: 100,001 characters, over the limit of 100,000; a model reads at most a few "
        "thousand, so shorten it."
    )
    with pytest.raises(ValueError) as caught:  # the tensor API: the declared shape, unread
        explorer_inputs(Huge(), Huge())
    assert str(caught.value) == (
        "query: shape (8, 64, 4096, 512) holds 1,073,741,824 values, over the limit of "
        "67,108,864; reduce B, H, T or d."
    )


class Huge:
    """A tensor that declares a shape over the limits and must never be converted."""

    shape, dtype, ndim = (8, 64, 4096, 512), np.dtype("float32"), 4

    def __array__(self, *_: object, **__: object) -> np.ndarray:
        raise AssertionError("converted before its shape was checked")


def test_a_head_out_of_range_names_the_argument_with_its_value(decoder_path, tmp_path):
    error = refusal(lambda: run_head_export(decoder_path, "the cat", tmp_path, layer=9, head=1))
    assert str(error) == "layer=9: the model has layers 1 to 2."
    assert phrase(error, "cli") == "--layer 9: the model has layers 1 to 2."


def test_a_text_too_long_for_every_head_says_how_in_each_entry_points_words(tmp_path):
    path = tmp_path / "roomy.gguf"
    write_tiny_gguf(path, context_length=8192)
    text = "the cat sat on the mat. " * 480
    tokens = len(load_gguf(path).tokenizer.encode(text))
    error = refusal(lambda: run_model_export(path, text, tmp_path / "out", "npz"))
    assert isinstance(error, LimitError) and (error.value, error.expected) == (tokens, 4096)
    assert str(error).startswith(f"text: {tokens:,} tokens are too many to export every head")
    assert str(error).endswith(
        "; export one head with run_head_export(layer=, head=), the montage with fmt='png', "
        "or a text of at most 4,096 tokens."
    )
    cli = phrase(error, "cli", {"text": "--text-file"})
    assert cli.startswith(f"--text-file: {tokens:,} tokens are too many")
    assert "export one head with --layer L --head H (L from 1 to 2, H from 1 to 4)" in cli
    assert not (tmp_path / "out").exists()  # refused before the pass and before any file


# -- pair errors --------------------------------------------------------------------------------
def test_pair_errors_name_text_pair(decoder, bert):
    error = refusal(lambda: decoder.attention("the cat", "on the mat"))
    assert (error.what, str(error)) == (
        "text_pair", "text_pair: a decoder reads one text; join the two."
    )  # fmt: skip
    assert phrase(error, "cli") == "--text-pair: a decoder reads one text; join the two."
    assert phrase(error, "window") == "Second sentence: a decoder reads one text; join the two."
    error = refusal(lambda: bert.attention("the cat", "\x00\u200b"))
    assert str(error) == (
        "text_pair: the second text has no tokens; type some words or leave it out."
    )
