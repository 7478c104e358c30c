"""The Model dock with a GGUF decoder (the tiny random one): shared KV heads, causal, Generate."""

import time

import numpy as np
import pytest
from PySide6.QtCore import Qt

from attn_explorer.models import discovery
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.ui.model.model_grid import GROUP_BAND_PX, HEAD_LABEL_PX
from attn_explorer.ui.model.model_view import ModelView


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())  # SmolLM2, if installed, stays out
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())  # and Gemma 3
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(700, 800)
    widget.show()
    yield widget
    widget.shutdown()


def show_decoder(qtbot, view, path, text="the cat sat"):
    view.set_model_folder(path)
    view.set_sentence(text)
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)


@pytest.mark.slow
def test_decoder_grid_is_causal_and_brackets_heads_that_share_keys(qtbot, view, tiny_gguf):
    show_decoder(qtbot, view, tiny_gguf)
    result = view.result
    assert result.causal and len(view._thumbnails) == 8  # 2 layers × 4 query heads
    _, item = view._thumbnails[(1, 3)]
    assert np.all(np.triu(item.image, k=1) == 0)  # the causal triangle, from the weights
    header = view.grid._head_header
    assert header.groups() == [(0, 1, "KV 1"), (2, 3, "KV 2")]
    assert header.height() == HEAD_LABEL_PX + GROUP_BAND_PX
    # the band is painted: its colours are in the header's pixels
    image = header.grab().toImage()
    colours = {image.pixelColor(x, image.height() - 6).name() for x in range(image.width())}
    assert {"#d6e6f5", "#fae0c4"} <= colours
    assert view.sharing_label.isVisible()
    assert view.sharing_label.text().startswith("4 query heads share 2 key/value heads")
    assert not view.pair_edit.isEnabled() and not view.strategy_combo.isEnabled()


@pytest.mark.slow
def test_generate_writes_tokens_and_shows_the_growing_rows(qtbot, view, tiny_gguf):
    show_decoder(qtbot, view, tiny_gguf)
    panel = view.generation
    panel.max_spin.setValue(5)
    counts = []
    view.session.events.generation.connect(
        lambda: counts.append(
            len(view.session.generation.tokens) if view.session.generation else None
        )
    )
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    assert view.lower_tabs.currentWidget() is panel
    qtbot.waitUntil(lambda: not panel.busy, timeout=10_000)
    state = view.session.generation
    assert state.done and len(state.tokens) == 5
    assert counts[0] is None and counts[1:6] == [1, 2, 3, 4, 5]  # one update per token
    assert panel.output.toPlainText() == "the cat sat" + state.text
    assert panel.progress.value() == 5 and panel.progress.maximum() == 5
    layer, head = view.selected_head
    np.testing.assert_array_equal(panel.image.image, state.matrix(layer, head))
    assert panel.image.image.shape == (5, len(state.prompt_tokens) + 4)
    assert "Wrote 5 tokens" in view.status_label.text()
    assert panel.generate_button.isEnabled() and not panel.stop_button.isEnabled()


@pytest.mark.slow
def test_stop_keeps_what_was_written_and_frees_the_window(qtbot, view, tiny_gguf, monkeypatch):
    show_decoder(qtbot, view, tiny_gguf)
    forward = DecoderModel.forward

    def slow_forward(self, *args, **kwargs):
        time.sleep(0.05)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(DecoderModel, "forward", slow_forward)
    panel = view.generation
    panel.max_spin.setValue(50)
    qtbot.mouseClick(panel.generate_button, Qt.MouseButton.LeftButton)
    assert panel.stop_button.isEnabled()
    qtbot.waitUntil(lambda: view.session.generation is not None, timeout=10_000)
    dropped = panel._runner.dropped
    qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    written = len(view.session.generation.tokens)
    assert 1 <= written < 50
    assert "stopped by you" in view.status_label.text()
    assert panel.generate_button.isEnabled() and not panel.busy
    # The job's own end arrives after any token it computed before the stop, and is dropped.
    qtbot.waitUntil(lambda: panel._runner.dropped > dropped, timeout=10_000)
    assert len(view.session.generation.tokens) == written


@pytest.mark.slow
def test_generate_with_an_encoder_says_it_reads_only(qtbot, view, tmp_path):
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    show_decoder(qtbot, view, write_tiny_bert(tmp_path / "bert"))
    qtbot.mouseClick(view.generation.generate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.generation.busy, timeout=10_000)
    assert "encoder" in view.status_label.text()
    assert view.grid._head_header.groups() == [] and not view.sharing_label.isVisible()
