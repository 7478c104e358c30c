"""A real model's head taken into the explorer: every explorer view then shows its numbers."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models.testing.tiny_bert import write_tiny_bert


@pytest.mark.slow
def test_take_head_loads_real_q_k_v_and_undo_restores(qtbot, window, tmp_path):
    folder = tmp_path / "tiny"
    write_tiny_bert(folder)
    view = window.open_model_view()
    assert window.model_dock.isVisible()
    view.set_model_folder(folder)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    result = view.result
    view.select_head(1, 0)
    view.take_head()
    q = result.query[1, 0]
    assert window.session.tokens == list(result.tokens)
    np.testing.assert_allclose(window.session.head_matrix("query"), q, rtol=1e-6)
    np.testing.assert_allclose(window.session.head_matrix("key"), result.key[1, 0], rtol=1e-6)
    # the explorer's softmax weights equal the model's attention for that head
    np.testing.assert_allclose(window.results.result.weights[0, 0], result.weights[1, 0], atol=1e-5)
    assert "layer 2 head 1" in window.statusBar().currentMessage()
    window.commands.undo.trigger()
    assert window.session.tokens == ["t1", "t2", "t3"]


def test_bad_head_payload_keeps_the_session(window):
    before = window.session.snapshot()
    bad = {
        "tokens": ["a", "b"],
        "query": np.zeros((3, 2)),
        "key": np.zeros((3, 2)),
        "value": np.zeros((3, 2)),
        "layer": 0,
        "head": 0,
        "model_name": "x",
    }
    assert not window.take_model_head(bad)
    assert window.session.tokens == list(before.tokens)
    np.testing.assert_array_equal(window.session.matrix("query"), before.query)
