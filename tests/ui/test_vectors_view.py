"""The vectors view's export: PNG and SVG bytes written atomically, bad names refused."""

from __future__ import annotations

import pytest

from attn_explorer.state.app_state import AppState
from attn_explorer.ui.vectors.vectors_view import VectorsView


def test_export_writes_png_and_svg(qtbot, tmp_path):
    state = AppState()
    view = VectorsView(state.vectors)
    qtbot.addWidget(view)
    view.resize(420, 520)
    view.show()
    state.vectors.select_cell(1, 2)
    view.redraw()
    png = view.export(tmp_path / "v.png")
    svg = view.export(tmp_path / "v.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "q2 (t2) · k3 (t3)" in text  # the dot-product words are text in the SVG
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        view.export(tmp_path / "v.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.png", "v.svg"]  # no temp left


def test_dimension_boxes_follow_the_plot_after_d_shrinks_and_grows(qtbot):
    """d = 5 → 1 → 5: the boxes come back to what the plot shows (d1 and d2), not d1, d1."""
    state = AppState()
    view = VectorsView(state.vectors)
    qtbot.addWidget(view)
    view.show()
    session = state.session
    for d in (5, 1, 5):
        assert session.resize(dim=d)
        view.redraw()
    assert state.vectors.dims == (0, 1)
    assert (view.first_dim.value(), view.second_dim.value()) == (1, 2)


def test_arrowheads_and_labels_follow_the_tokens_and_the_selection(qtbot):
    """Every arrow labelled while there are few tokens; past MAX_DECORATED only the chosen."""
    from attn_explorer.ui.vectors.arrow_plot import MAX_DECORATED

    state = AppState()
    view = VectorsView(state.vectors)
    qtbot.addWidget(view)
    view.show()
    session = state.session
    state.vectors.select_cell(0, 1)
    view.redraw()
    tokens = session.tokens
    shown = [item for item in view.decorations.labels if item.isVisible()]
    expected = [f"q{n + 1} {t}" for n, t in enumerate(tokens)]
    expected += [f"k{n + 1} {t}" for n, t in enumerate(tokens)]
    assert [item.textItem.toPlainText() for item in shown] == expected
    bold = [item.textItem.toPlainText() for item in shown if item.textItem.font().bold()]
    assert bold == [f"q1 {tokens[0]}", f"k2 {tokens[1]}"]

    assert session.resize(tokens=MAX_DECORATED + 1)
    view.redraw()
    shown = [item for item in view.decorations.labels if item.isVisible()]
    assert len(shown) == 2  # only q_i and k_j keep their labels
    arrows = [item for item in view.decorations.arrows if item.isVisible()]
    assert 0 < len(arrows) <= 2
