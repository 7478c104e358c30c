"""A real model's head taken into the explorer: every explorer view then shows its numbers."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models import ModelAttention
from attn_explorer.models.testing.tiny_bert import write_tiny_bert


@pytest.mark.slow
def test_take_head_loads_real_q_k_v_and_undo_restores(qtbot, window, tmp_path):
    folder = tmp_path / "tiny"
    write_tiny_bert(folder)
    view = window.commands.open_model_view()
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
    window.menu_actions.undo.trigger()
    assert window.session.tokens == ["t1", "t2", "t3"]


def attention_of(tokens, query, key, value):
    """A ModelAttention with just the fields a taken head reads (L = H = 1)."""
    t = query.shape[-2]
    return ModelAttention(
        tokens=list(tokens), input_ids=np.zeros(len(tokens), np.int64),
        token_type_ids=np.zeros(len(tokens), np.int64), query=query, key=key, value=value,
        scores=np.zeros((1, 1, t, t), np.float32), weights=np.zeros((1, 1, t, t), np.float32),
        hidden_states=np.zeros((2, t, 4), np.float32), scale=1.0, strategy="batched",
        model_name="x",
    )  # fmt: skip


def test_bad_head_payload_keeps_the_session(window):
    before = window.session.snapshot()
    # two token names for three rows of Q, K, V: the session refuses it, with one message
    bad = attention_of(["a", "b"], *(np.zeros((1, 1, 3, 2), np.float32) for _ in range(3)))
    assert not window.commands.take_model_head(0, 0, bad)
    assert "2 token names for T = 3 rows" in window.statusBar().currentMessage()
    assert not window.commands.take_model_head(0, 5, bad)  # a head the model does not have
    assert "head 6 does not exist" in window.statusBar().currentMessage()
    assert not window.commands.take_model_head(0, 0)  # no Model dock, no result yet
    assert "Nothing to take yet" in window.statusBar().currentMessage()
    assert window.session.tokens == list(before.tokens)
    np.testing.assert_array_equal(window.session.matrix("query"), before.query)


def test_the_taken_head_is_copied_once_into_float64_tables(window):
    rng = np.random.default_rng(0)
    query, key, value = (rng.standard_normal((1, 1, 3, 2)).astype(np.float32) for _ in range(3))
    attention = attention_of(["a", "b", "c"], query, key, value)
    assert window.commands.take_model_head(0, 0, attention)
    taken = window.session.matrix("query")
    assert taken.dtype == np.float64 and not np.shares_memory(taken, query)
    np.testing.assert_array_equal(taken, query.astype(np.float64))
    query[0, 0, 0, 0] = 99.0  # the model's arrays are the model's: the tables keep their copy
    assert window.session.matrix("query")[0, 0, 0, 0] != 99.0
    assert window.session.options.stage == "weights" and not window.session.options.causal
