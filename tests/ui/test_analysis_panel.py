"""The Model dock's Analysis tab on tiny models: scores heatmap, click a head, ablate it,
the next-token bars change; the scan with progress; the lens table; BERT says why not."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from attn_explorer.analysis import DECODER_ONLY, Ablation, head_scores, rollout
from attn_explorer.models import discovery
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.model_view import ModelView

TEXT = " the cat sat on the mat, the cat sat on"


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(760, 900)
    widget.show()
    yield widget
    widget.shutdown()


def open_model(qtbot, view, path, text):
    view.set_model_folder(path)
    view.set_sentence(text)
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)


def click_tab(qtbot, tabs, title):
    bar = tabs.tabBar()
    index = next(i for i in range(bar.count()) if bar.tabText(i) == title)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert tabs.currentIndex() == index


def click_cell(qtbot, panel, layer, head):
    """A left click on the score heatmap's cell (layer, head), where the user sees it."""
    box = panel._scores_item.getViewBox()
    scene = box.mapViewToScene(QPointF(head + 0.5, layer + 0.5))
    widget_pos = panel.scores_plot.mapFromScene(scene)
    qtbot.mouseClick(panel.scores_plot.viewport(), Qt.MouseButton.LeftButton, pos=widget_pos)


def test_journey_scores_click_a_head_ablate_it_and_the_bars_change(qtbot, view, tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=3)
    open_model(qtbot, view, path, TEXT)
    click_tab(qtbot, view.lower_tabs, "Analysis")
    panel = view.analysis
    qtbot.waitUntil(lambda: panel.lens is not None, timeout=10_000)
    result = view.result
    expected = head_scores(result.weights, result.input_ids)
    panel.score_combo.setCurrentIndex(3)  # induction
    shown = panel.scores_image.image
    np.testing.assert_allclose(shown, expected["induction"])
    assert "induction" in panel._scores_item.titleLabel.text
    np.testing.assert_allclose(panel.rollout_image.image, rollout(result.weights))

    # click layer 2, head 4 (0-based (1, 3)): the model view opens that head
    qtbot.wait(50)
    click_cell(qtbot, panel, 1, 3)
    assert view.session.selected_head == (1, 3)
    assert view.lower_tabs.currentIndex() == 0  # "Selected head"
    click_tab(qtbot, view.lower_tabs, "Analysis")
    click_tab(qtbot, panel.pages, "Next token")
    bars = [i for i in panel._bars_item.items if hasattr(i, "opts") and "width" in i.opts]
    assert len(bars) == 1
    clean = np.array(bars[0].opts["width"])
    assert clean[0] == pytest.approx(panel.top[0].prob)
    qtbot.mouseClick(panel.ablate_button, Qt.MouseButton.LeftButton)
    effect = Ablation(view.session.cache.loaded(str(path)), result.hidden_states, result.logits)
    effect = effect.ablate([(1, 3)])
    bars = [i for i in panel._bars_item.items if hasattr(i, "opts") and "width" in i.opts]
    assert len(bars) == 2
    ablated = np.array(bars[1].opts["width"])
    np.testing.assert_allclose(ablated, effect.probs[[c.id for c in panel.top]])
    assert not np.allclose(ablated, clean)
    assert "layer 2 · head 4 ablated" in panel.effect_label.text()
    assert f"{effect.logit_change:+.3f}" in panel.effect_label.text()

    # the scan: progress, then the heatmap of target-logit changes
    qtbot.mouseClick(panel.scan_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.scan is not None, timeout=20_000)
    assert panel.progress.value() == 1000
    assert panel.score_combo.currentData() == "ablation"
    np.testing.assert_allclose(panel.scores_image.image, panel.scan.logit_change)
    assert panel.scan.logit_change[1, 3] == pytest.approx(effect.logit_change, abs=1e-4)
    assert "Scan done" in panel.status.text()


def test_logit_lens_table_shows_each_layers_top_token(qtbot, view, tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    open_model(qtbot, view, path, TEXT)
    panel = view.analysis
    qtbot.waitUntil(lambda: panel.lens is not None, timeout=10_000)
    table = panel.lens_table
    model = view.session.cache.loaded(str(path))
    assert table.rowCount() == 3 and table.columnCount() == len(view.result.tokens)
    last = table.item(2, table.columnCount() - 1).text()
    assert last == model.tokenizer.readable(int(view.result.logits[-1].argmax()))
    assert table.verticalHeaderItem(0).text() == "embeddings"


def test_probe_button_types_a_repeated_word_sequence(qtbot, view, tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    open_model(qtbot, view, path, TEXT)
    panel = view.analysis
    seen = []
    panel.probeRequested.connect(seen.append)
    qtbot.mouseClick(panel.probe_button, Qt.MouseButton.LeftButton)
    # the tiny byte-level vocabulary has too few whole words: one clear message naming the
    # button and what to do (not the API's probe_text), no crash
    assert not seen
    status = panel.status.text()
    assert status.startswith("Repeated tokens: no probe for this model (")
    assert status.endswith("; type a sentence that repeats itself instead.")
    assert "probe_text" not in status


def test_an_encoder_shows_scores_and_says_why_the_rest_is_absent(qtbot, view, tmp_path):
    open_model(qtbot, view, write_tiny_bert(tmp_path / "tiny-bert"), "the cat sat on the mat")
    panel = view.analysis
    assert panel.status.text() == DECODER_ONLY
    assert not panel.ablate_button.isEnabled() and not panel.scan_button.isEnabled()
    assert panel.scores_image.image is not None
    assert panel.lens_table.rowCount() == 0
