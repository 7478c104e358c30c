"""The Model dock's Positions tab: a decoder head's q·k against distance; BERT says why not."""

import numpy as np
import pytest
from PySide6.QtCore import Qt

from attn_explorer.models import discovery
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.model_view import ModelView
from attn_explorer.ui.model.position_panel import BERT_MESSAGE


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())  # and Gemma 3
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(700, 800)
    widget.show()
    yield widget
    widget.shutdown()


def open_model(qtbot, view, path, text):
    view.set_model_folder(path)
    view.set_sentence(text)
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)


def click_tab(qtbot, view, title):
    bar = view.lower_tabs.tabBar()
    index = next(i for i in range(bar.count()) if bar.tabText(i) == title)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert view.lower_tabs.currentIndex() == index


@pytest.mark.slow
def test_positions_tab_plots_the_selected_decoder_heads_curve(qtbot, view, tmp_path):
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    open_model(qtbot, view, path, "the cat sat on the mat")
    click_tab(qtbot, view, "Positions")
    panel = view.positions
    assert panel.pages.currentIndex() == 1 and panel.plot.isVisible()
    x, y = panel.line.getData()
    assert x[0] == 0 and x[-1] == 256 and len(y) == 257
    assert np.ptp(y) > 0
    curve = panel.curve
    assert y[0] == pytest.approx(curve.unrotated, abs=1e-4)
    assert panel.unrotated_line.value() == pytest.approx(curve.unrotated)
    dot_x, dot_y = panel.pair_dot.getData()
    assert dot_x[0] == curve.actual_distance
    assert dot_y[0] == pytest.approx(y[curve.actual_distance], abs=1e-4)
    item = panel.plot.getPlotItem()
    assert item.getAxis("bottom").labelText == "relative distance Δ (tokens)"
    assert item.getAxis("left").labelText == "q·k after rotation"
    assert "depends only on Δ" in panel.caption.text()

    # another head, chosen in the grid, redraws the curve
    view.select_head(1, 3)
    assert (panel.curve.layer, panel.curve.head) == (1, 3)
    assert "layer 2 · head 4" in item.titleLabel.text
    _, y2 = panel.line.getData()
    assert not np.array_equal(y, y2)


@pytest.mark.slow
def test_positions_tab_says_bert_has_no_rotation(qtbot, view, tmp_path):
    open_model(qtbot, view, write_tiny_bert(tmp_path / "tiny-bert"), "the cat sat")
    click_tab(qtbot, view, "Positions")
    panel = view.positions
    assert panel.pages.currentWidget() is panel.message and panel.message.isVisible()
    assert panel.message.text() == BERT_MESSAGE
    assert panel.curve is None
