"""The vectors view's export: PNG and SVG bytes written atomically, bad names refused."""

from __future__ import annotations

import pytest

from attn_explorer.state.app_state import AppState
from attn_explorer.ui.vectors_view import VectorsView


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
    assert "q·k" in text or "q&#183;k" in text or "q2" in text  # the words are vector text
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        view.export(tmp_path / "v.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.png", "v.svg"]  # no temp left
