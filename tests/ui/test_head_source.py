"""A taken grouped-query head names its model, layer, query head and KV head (issue 23, #8)."""

from __future__ import annotations

import json

import numpy as np

from attn_explorer.models import ModelAttention
from attn_explorer.models.take_head import head_source, head_title
from attn_explorer.render.figure import export_heatmaps
from attn_explorer.state.storage.export import PNG_SOURCE_KEY, png_text, read_csv
from attn_explorer.state.types import HeadSource, number_list
from attn_explorer.state.views.figure import build_figure


def grouped_attention(heads=6, kv=(0, 0, 0, 1, 1, 1), t=3, d=4):
    """A decoder's attention with ``heads`` query heads over len(set(kv)) key/value heads."""
    rng = np.random.default_rng(0)
    tokens = ["the", "cat", "sat"][:t]
    query = rng.standard_normal((2, heads, t, d)).astype(np.float32)
    key, value = (rng.standard_normal((2, len(set(kv)), t, d)).astype(np.float32) for _ in "kv")
    return ModelAttention(
        tokens=tokens, input_ids=np.zeros(t, np.int64), token_type_ids=np.zeros(t, np.int64),
        query=query, key=key, value=value, scores=np.zeros((2, heads, t, t), np.float32),
        weights=np.zeros((2, heads, t, t), np.float32), hidden_states=np.zeros((3, t, 4)),
        scale=1.0, strategy="batched", model_name="tiny-llama", causal=True,
        kv_heads=np.array(kv),
    )  # fmt: skip


def test_the_source_of_a_shared_key_head_in_words():
    source = head_source(grouped_attention(), 1, 4)
    assert (source.layer, source.query_head, source.kv_head) == (1, 4, 1)
    assert source.shared_by == (3, 4, 5)
    assert source.describe() == (
        "tiny-llama layer 2 query head 5 (K, V: key/value head 2, shared by query heads 4–6)"
    )
    assert source.short_title() == "layer 2 query head 5 · K, V: head 2"
    assert head_title(grouped_attention(), 1, 4) == "tiny-llama layer 2 query head 5 (KV head 2)"
    own = head_source(grouped_attention(kv=(0, 1, 2, 3, 4, 5)), 0, 2)
    assert not own.grouped and own.describe() == "tiny-llama layer 1 head 3" and not own.kv_text()
    assert number_list([4, 5, 6]) == "4–6" and number_list([1, 4, 7]) == "1, 4, 7"
    assert HeadSource("m", 0, 0, 0, (0, 1), ("a",), 2).kv_text() == (
        "K, V: key/value head 1, shared by query heads 1, 2"
    )


def test_titles_hover_exports_and_undo_follow_the_taken_head(window, tmp_path):
    attention = grouped_attention()
    assert window.commands.take_model_head(1, 4, attention)
    kv = "K, V: key/value head 2, shared by query heads 4–6"
    assert window.state.document.source == head_source(attention, 1, 4)
    assert window.score_grid.source_label.text() == kv
    assert "tiny-llama layer 2 query head 5" in window.score_grid.title.text()
    assert "query head 5" in window.statusBar().currentMessage()
    heatmaps = window.heatmaps
    assert heatmaps.plots[0].titleLabel.text == "layer 2 query head 5 · K, V: head 2"
    assert heatmaps.describe(0, 1, 0).startswith(f"tiny-llama layer 2 query head 5 ({kv}) · ")
    assert window.state.vectors.caption().startswith("layer 2 query head 5 · K, V: head 2")
    figure = build_figure(window.state, "weights", [0])
    assert figure.panels[0].title == "layer 2 query head 5 · K, V: head 2"
    assert figure.subtitle.endswith(f"({kv})")
    (png,) = export_heatmaps(window.state, tmp_path / "h.png")
    meta = json.loads(png_text(png.read_bytes())[PNG_SOURCE_KEY])
    assert meta["kv_head"] == 2 and meta["kv_shared_by_query_heads"] == [4, 5, 6]
    (csv,) = export_heatmaps(window.state, tmp_path / "h.csv", stage="weights")
    labels, columns, matrix = read_csv(csv)  # the corner cell does not disturb the reader
    assert labels == columns == ["the", "cat", "sat"]
    np.testing.assert_allclose(matrix, window.results.result.weights[0, 0])
    assert csv.read_text(encoding="utf-8").startswith('"query \\ key · tiny-llama layer 2 query')
    window.menu_actions.undo.trigger()
    assert window.state.document.source is None  # the worked example again
    assert window.score_grid.title.text().endswith("head 1")
    assert not window.score_grid.source_label.isVisible()
    assert heatmaps.plots[0].titleLabel.text == "head 1"
    assert "source" not in np.load(export_heatmaps(window.state, tmp_path / "a.npz")[0])
    window.menu_actions.redo.trigger()
    assert window.score_grid.source_label.text() == kv


def test_an_encoder_head_keeps_its_short_name(window):
    attention = grouped_attention(kv=(0, 1, 2, 3, 4, 5))
    assert window.commands.take_model_head(0, 2, attention)
    assert window.score_grid.title.text().endswith("tiny-llama layer 1 head 3")
    assert not window.score_grid.source_label.isVisible()
    assert window.windowTitle().startswith("tiny-llama layer 1 head 3")
