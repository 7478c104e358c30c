"""Every class of refusal the Model dock can show names the window's own field or the file
(issue 36): a broken model file names the file and the tensor, a text over the model's
limit names the Sentence box, a second sentence for a decoder names the Second sentence
box, a prompt for Generate names the Sentence box it continues. Never the Python API's
argument names (``text:``, ``text_pair:``, ``prompt:``) nor an exception's class."""

import pytest
from PySide6.QtCore import Qt

from attn_explorer.models import discovery
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.testing.hostile_gguf import rewrite_gguf
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.model_view import ModelView

API_WORDS = ("text:", "text_pair:", "prompt:", "TextError", "ModelError", "ValueError")


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())  # SmolLM2, if installed, stays out
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(700, 800)
    widget.show()
    yield widget
    widget.shutdown()


@pytest.fixture
def decoder(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, context_length=16)  # 16 tokens at most in one pass
    return path


def error_shown(qtbot, view, start: str) -> str:
    """Wait for the dock's status line to show an error starting with ``start``; return it."""
    qtbot.waitUntil(lambda: view.status_label.text().startswith(start), timeout=10_000)
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    text = view.status_label.text()
    assert not any(word in text for word in API_WORDS), text
    return text


def test_a_model_file_with_a_swapped_embedding_names_the_file_and_the_tensor(
    qtbot, view, decoder, tmp_path
):
    table = GGUFFile(decoder).dequantize("token_embd.weight")  # (269, 32)
    swapped = rewrite_gguf(
        decoder, tmp_path / "swapped.gguf", tensors={"token_embd.weight": table.T}
    )
    view.set_model_folder(swapped)
    view.set_sentence("the cat sat")
    text = error_shown(qtbot, view, str(swapped))
    assert text == (
        f"{swapped}: tensor 'token_embd.weight' has shape (32, 269); expected (269, 32), one "
        "row of llama.embedding_length = 32 values per token: its two dimensions are swapped; "
        "convert the model again (llama.cpp's convert_hf_to_gguf.py writes it as the model "
        "has it)."
    )
    assert "vocab_size" not in text


def test_a_sentence_over_the_models_limit_names_the_sentence_box(qtbot, view, decoder):
    view.set_model_folder(decoder)
    qtbot.keyClicks(view.sentence_edit, "the cat sat on the mat " * 4)  # 24 words: > 16 tokens
    text = error_shown(qtbot, view, "Sentence:")
    assert text.endswith("tokens, over this model's limit of 16 for one pass; shorten it.")
    assert view.result is None


def test_a_second_sentence_for_a_decoder_names_the_second_sentence_box(qtbot, view, decoder):
    view.set_model_folder(decoder)
    qtbot.keyClicks(view.pair_edit, "on the mat")
    qtbot.keyClicks(view.sentence_edit, "the cat")
    text = error_shown(qtbot, view, "Second sentence:")
    assert text == "Second sentence: a decoder reads one text; join the two."


def test_a_prompt_over_the_models_limit_names_the_sentence_box_it_came_from(qtbot, view, decoder):
    view.set_model_folder(decoder)
    qtbot.keyClicks(view.sentence_edit, "the cat sat on the mat " * 4)
    error_shown(qtbot, view, "Sentence:")  # the attention pass refuses it first
    panel = view.generation
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    assert view.status_label.text() == "Generating…"
    text = error_shown(qtbot, view, "Sentence:")  # Generate continues the Sentence box
    qtbot.waitUntil(lambda: not panel.busy, timeout=10_000)
    assert text.endswith("tokens, over this model's limit of 16 for one pass; shorten it.")
