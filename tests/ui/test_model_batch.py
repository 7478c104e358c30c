"""A batch of sentences in the Model dock, through the user's hands, and into the explorer."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models.batch import PAD_LABEL, SentenceOfBatch, batch_tokens, run_batch
from attn_explorer.models.loading import load_model
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.ui.model.model_view import ModelView

SENTENCES = ["the cat sat on the mat", "a dog", "hello there"]


@pytest.fixture
def tiny_dir(tmp_path):
    return write_tiny_bert(tmp_path / "tiny-bert")


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.show()
    yield widget
    widget.shutdown()


def wait_for_batch(qtbot, view, size):
    qtbot.waitUntil(
        lambda: (
            isinstance(view.result, SentenceOfBatch)
            and view.result.batch.size == size
            and not view.busy
        ),
        timeout=10_000,
    )


def test_batch_box_selector_and_padding(qtbot, view, tiny_dir):
    controls = view.batch
    assert not controls.sentences_edit.isVisible() and view.sentence_edit.isVisible()
    view.set_model_folder(tiny_dir)
    controls.set_sentences(SENTENCES)
    assert controls.sentences_edit.isVisible() and not view.sentence_edit.isVisible()
    wait_for_batch(qtbot, view, 3)
    batch = view.result.batch
    expected = run_batch(load_model(tiny_dir), SENTENCES)
    np.testing.assert_allclose(batch.weights, expected.weights, atol=1e-6)
    assert [controls.selector.itemText(i) for i in range(3)] == [
        "1: the cat sat on the mat", "2: a dog", "3: hello there"
    ]  # fmt: skip
    assert controls.selector.isEnabled() and controls.selector.currentIndex() == 0
    layers, h, t = batch.weights.shape[1:4]
    assert controls.shape_label.text().startswith(f"B = 3 sentences (the selector) · H = {h}")
    assert f"weights (3, {h}, {t}, {t}) in each of {layers} layers" in controls.shape_label.text()

    controls.select_sentence(1)  # the user picks sentence 2: the grid shows its heads
    assert view.result.index == 1 and view.result.tokens == ["[CLS]", "a", "dog", "[SEP]"]
    _, item = view._thumbnails[(1, 1)]
    np.testing.assert_array_equal(item.image, batch.weights[1, 1, 1, :4, :4])
    assert "Sentence 2 of a batch of 3" in view.status_label.text()

    controls.set_show_padding(True)  # padded to T, the padding masked out: weight 0
    assert view.result.padded and view.result.tokens[4:] == [PAD_LABEL] * (t - 4)
    shown = view.detail.image.image
    assert shown.shape == (t, t)
    assert not shown[:, 4:].any() and not shown[4:, :].any()
    ticks = view.detail.getPlotItem().getAxis("bottom")._tickLevels[0]
    assert [label for _, label in ticks][4:] == [PAD_LABEL] * (t - 4)

    # a new batch keeps the user's sentence and padding choice
    controls.sentences_edit.setPlainText("the cat\na dog ran")
    qtbot.waitUntil(lambda: view.result.batch is not batch and not view.busy, timeout=10_000)
    assert view.result.index == 1 and view.result.padded and view.result.batch.size == 2
    assert controls.selector.count() == 2 and controls.selector.currentIndex() == 1


def test_batch_off_goes_back_to_the_one_sentence(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    view.batch.set_sentences(["the cat sat", "a dog"])
    wait_for_batch(qtbot, view, 2)
    view.batch.toggle.setChecked(False)
    qtbot.waitUntil(
        lambda: not isinstance(view.result, SentenceOfBatch) and not view.busy, timeout=10_000
    )
    assert view.result.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert not view.batch.selector.isVisible() and view.sentence_edit.isVisible()


def test_one_line_in_batch_mode_says_what_to_type(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.batch.set_sentences(["only one"])
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    assert not isinstance(view.result, SentenceOfBatch)
    assert "2 or more sentences" in view.batch.shape_label.text()
    assert not view.batch.selector.isEnabled()


def test_taking_a_head_of_a_decoder_batch_brings_every_sentence(qtbot, window, tiny_gguf):
    view = window.commands.open_model_view()
    view.set_model_folder(tiny_gguf)
    view.batch.set_sentences(SENTENCES)
    wait_for_batch(qtbot, view, 3)
    view.batch.select_sentence(2)
    view.select_head(1, 3)
    batch = view.result.batch
    view.take_head()
    b, t = batch.size, batch.input_ids.shape[1]
    session = window.session
    assert session.shape[:3] == (b, 1, t)
    assert session.options.batch_index == 2 and session.options.causal
    assert tuple(session.tokens) == batch_tokens(batch)
    assert "batch of 3 sentences" in window.statusBar().currentMessage()
    # causal hides the right padding from every real query: the explorer's weights of
    # each sentence's real rows are the model's
    weights = window.results.result.weights  # (B, 1, T, T)
    for index, n in enumerate(batch.lengths):
        np.testing.assert_allclose(
            weights[index, 0, :n, :n], batch.weights[index, 1, 3, :n, :n], atol=1e-5
        )


def test_the_dimension_rows_point_at_the_batch_head_and_token_axes(window):
    for name in ("model_sentences", "model_heads", "model_tokens"):
        window.commands.highlight(name, 0)
        target = window.commands.highlight_targets()[name]
        assert target.property("lessonHighlight"), name
    view = window.model_view
    targets = window.commands.highlight_targets()
    assert targets["model_sentences"] is view.batch
    assert targets["model_heads"] is view.grid and targets["model_tokens"] is view.detail


def test_an_encoder_batch_in_the_explorer_has_no_padding_mask_and_says_so(qtbot, window, tiny_dir):
    view = window.commands.open_model_view()
    view.set_model_folder(tiny_dir)
    view.batch.set_sentences(SENTENCES)
    wait_for_batch(qtbot, view, 3)
    batch = view.result.batch
    view.take_head()  # sentence 1, layer 1 head 1
    assert window.session.shape[:3] == (3, 1, batch.input_ids.shape[1])
    message = window.statusBar().currentMessage()
    assert "Batch entry 1 of 3 is shown" in message and "no padding mask" in message
    weights = window.results.result.weights  # (B, 1, T, T)
    longest = int(np.argmax(batch.lengths))  # no padding: the explorer equals the model
    np.testing.assert_allclose(weights[longest, 0], batch.weights[longest, 0, 0], atol=1e-5)
    n = batch.lengths[1]  # padded: its tokens now also attend to [PAD] keys
    assert (weights[1, 0, :n, n:] > 0).all() and not batch.weights[1, 0, 0, :n, n:].any()
