"""A model's head as the explorer's inputs: which arrays, no copy, its options and name."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models import load_model
from attn_explorer.models.take_head import explorer_inputs, explorer_options, head_title
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.state import Options


@pytest.fixture(scope="module")
def bert_attention(tmp_path_factory):
    folder = write_tiny_bert(tmp_path_factory.mktemp("bert") / "tiny-bert")
    return load_model(folder).attention("the cat sat")


def test_the_inputs_are_views_of_the_models_head(bert_attention):
    a = bert_attention
    snapshot = explorer_inputs(a, 1, 0)
    assert snapshot.tokens == tuple(a.tokens)
    assert snapshot.shape == (1, 1, len(a.tokens), a.query.shape[-1])
    for name in ("query", "key", "value"):
        taken, model = getattr(snapshot, name), getattr(a, name)
        np.testing.assert_array_equal(taken[0, 0], model[1, 0])
        assert np.shares_memory(taken, model)  # no copy here: Session.load makes the one copy


def test_a_head_that_shares_its_keys_takes_the_shared_key_and_value(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    a = load_model(path).attention("hello world")
    assert a.kv_heads is not None
    head = int(np.flatnonzero(a.kv_heads != np.arange(len(a.kv_heads)))[0])
    snapshot = explorer_inputs(a, 0, head)
    np.testing.assert_array_equal(snapshot.query[0, 0], a.query[0, head])
    np.testing.assert_array_equal(snapshot.key[0, 0], a.key[0, a.kv_heads[head]])
    np.testing.assert_array_equal(snapshot.value[0, 0], a.value[0, a.kv_heads[head]])
    assert explorer_options(Options(), a).causal  # a decoder's head sees no later key


@pytest.mark.parametrize(
    ("layer", "head", "message"),
    [(2, 0, "layer 3 does not exist"), (-1, 0, "layer 0 does not exist"),
     (0, 4, "head 5 does not exist"), (0, -1, "head 0 does not exist")],
)  # fmt: skip
def test_a_head_the_model_does_not_have_is_refused(bert_attention, layer, head, message):
    with pytest.raises(ValueError, match=message):
        explorer_inputs(bert_attention, layer, head)


def test_options_show_the_weights_as_the_model_computed_them(bert_attention):
    current = Options(stage="scores", scale=False, head=3, batch_index=1, step=7, causal=True)
    options = explorer_options(current, bert_attention)
    assert (options.stage, options.scale, options.head, options.batch_index) == (
        "weights", True, 0, 0,
    )  # fmt: skip
    assert options.step == -1 and not options.causal
    assert options.strategy == current.strategy  # the user's other choices stay
    assert head_title(bert_attention, 1, 0) == "tiny-bert layer 2 head 1"
