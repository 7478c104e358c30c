"""The Model dock on a long text (the long pass forced on a tiny decoder): block previews in
the thumbnails over token units, the enlarged head recomputed, progress and Stop."""

import numpy as np
import pytest

from attn_explorer.models import discovery
from attn_explorer.models.decoder import long_pass
from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.long_context import PassProgress
from attn_explorer.ui.model.model_view import ModelView

TEXT = " the cat sat on the mat," * 50


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)  # every text runs as a long pass
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, context_length=1024)
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(760, 900)
    widget.show()
    widget.set_model_folder(path)
    widget.set_sentence(TEXT)
    qtbot.waitUntil(lambda: widget.result is not None and not widget.busy, timeout=20_000)
    yield widget
    widget.shutdown()


def test_thumbnails_show_block_previews_over_token_units(view):
    result = view.result
    assert isinstance(result.weights, HeadStack)
    tokens = len(result.tokens)
    assert tokens > 256  # previews in blocks of 2 × 2 tokens
    _, item = view.grid.thumbnails[(1, 2)]
    n = -(-tokens // 2)
    assert item.image.shape == (n, n)
    np.testing.assert_array_equal(item.image, result.long.weights_preview[1, 2])
    assert (
        item.boundingRect().width() == n
        and item.mapRectToParent(item.boundingRect()).width() == tokens
    )
    assert "by query blocks" in view.status_label.text()


def test_the_enlarged_head_is_recomputed_whole(qtbot, view):
    view.select_head(1, 3)
    qtbot.waitUntil(lambda: view.detail.showing == "full", timeout=10_000)
    shown = view.detail.image.image
    np.testing.assert_array_equal(shown, view.result.weights[1, 3])
    assert view.detail.image.image.shape == (len(view.result.tokens),) * 2


def test_stop_keeps_the_previous_result(qtbot, view):
    before = view.result
    progress = view.findChild(PassProgress)
    assert progress is not None and not progress.isVisible()
    view.set_sentence(TEXT + " and the dog")
    view.compute_now()
    progress.stop()
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    assert view.result is before
    assert view.status_label.text() == "Stopped; the previous result stays."


class Hover:
    """A hover at ``pos`` in the image's own pixels (what pyqtgraph hands the item)."""

    def __init__(self, x, y):
        from PySide6.QtCore import QPointF

        self._pos = QPointF(x, y)

    def isExit(self):
        return False

    def pos(self):
        return self._pos


def test_a_hover_on_a_preview_pixel_names_the_tokens_under_it(view):
    _, item = view.grid.thumbnails[(0, 1)]
    item.hoverEvent(Hover(10.5, 20.5))  # pixel (row 20, column 10): tokens 40-41, 20-21
    text = view.hover_label.text()
    assert "layer 1 · head 2" in text and "(i=42)" in text and "(j=22)" in text
    expected = float(view.result.weights[0, 1, 41, 21])
    assert f"softmax weight {expected:.4f}" in text
