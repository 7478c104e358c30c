"""A user opens a GGUF decoder by hand, sees its shared KV heads, generates and takes a head."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.mark.slow
def test_open_a_gguf_file_generate_and_take_a_shared_key_head(user, tmp_path):
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    user.press(Qt.Key.Key_M, CTRL, widget=user.window)
    view = user.window.model_view
    user.pick_file(path)
    user.choose("Model", "Open model file…")
    assert view.model_combo.currentText() == "tiny-llama.gguf (file)"
    user.click(view.sentence_edit)
    user.type_text("the cat sat", widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    assert "4 query heads share 2 key/value heads" in view.sharing_label.text()
    assert view.grid._head_header.groups()[1] == (2, 3, "KV 2")

    user.click(view.generation.generate_button)
    user.qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    written = view.session.generation
    assert written.done and len(written.tokens) == 20
    assert view.generation.output.toPlainText() == "the cat sat" + written.text
    assert "Wrote 20 tokens" in view.status_label.text()

    box, _ = view._thumbnails[(1, 3)]  # layer 2, head 4: it reads KV head 2
    user.click(user.window.model_view.grid.canvas.viewport(),
               user.window.model_view.grid.canvas.mapFromScene(
                   box.mapRectToScene(box.boundingRect()).center().toPoint()))  # fmt: skip
    assert view.selected_head == (1, 3)
    tabs = view.lower_tabs.tabBar()
    user.click(tabs, tabs.tabRect(0).center())  # back to "Selected head"
    assert view.lower_tabs.currentIndex() == 0
    user.click(view.take_button)
    result = view.result
    session = user.window.session
    assert session.tokens == list(result.tokens)
    assert session.options.causal  # a decoder's head: later keys hidden in the explorer too
    np.testing.assert_allclose(session.head_matrix("query"), result.query[1, 3], rtol=1e-6)
    np.testing.assert_allclose(session.head_matrix("key"), result.key[1, 1], rtol=1e-6)
    np.testing.assert_allclose(
        user.window.results.result.weights[0, 0], result.weights[1, 3], atol=1e-5
    )
    user.assert_grid_is_the_result()
    assert user.dialogs_seen == ["Open a GGUF model file"]
