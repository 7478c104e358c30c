"""The tiny BERT end to end: loading, shapes, dtypes, strategies, padding, summaries, bad input."""

import json
import math

import numpy as np
import pytest

from attn_explorer.models import expected_shapes, load_model, save_safetensors
from attn_explorer.models.encoder.layers import gelu, layer_norm
from attn_explorer.models.formats.safetensors import SafetensorsFile
from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert


def test_attention_shapes_and_float32(tiny_model):
    result = tiny_model.attention("the cat sat on the mat.")
    L, H, T, d = 2, 2, len(result.tokens), 4
    assert result.tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    for name in ("query", "key", "value"):
        array = getattr(result, name)
        assert array.shape == (L, H, T, d) and array.dtype == np.float32, name
    for name in ("scores", "weights"):
        array = getattr(result, name)
        assert array.shape == (L, H, T, T) and array.dtype == np.float32, name
    assert result.hidden_states.shape == (L + 1, T, 8)
    assert result.hidden_states.dtype == np.float32
    assert result.last_hidden_state.shape == (T, 8)
    np.testing.assert_allclose(result.weights.sum(-1), 1, atol=1e-6)
    assert result.scale == pytest.approx(1 / math.sqrt(d))
    assert not result.truncated and result.notice == ""


def reference_forward(model_dir, ids, types):
    """An independent float64 forward pass written from the BERT paper's equations."""
    config = json.loads((model_dir / "config.json").read_text())
    file = SafetensorsFile(model_dir / "model.safetensors")
    w = {name: file.get(name).astype(np.float64) for name in file.names()}
    H = config["num_attention_heads"]
    d = config["hidden_size"] // H
    eps = config["layer_norm_eps"]
    T = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:T]
        + w["embeddings.token_type_embeddings.weight"][types]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    weights = []
    for n in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{n}."

        def lin(v, name, p=p):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin(x, f"attention.self.{m}") for m in ("query", "key", "value"))
        heads_out, layer_weights = [], []
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)
            s = q[:, cols] @ k[:, cols].T / math.sqrt(d)
            e = np.exp(s - s.max(axis=1, keepdims=True))
            a = e / e.sum(axis=1, keepdims=True)
            layer_weights.append(a)
            heads_out.append(a @ v[:, cols])
        weights.append(layer_weights)
        attn = lin(np.concatenate(heads_out, axis=1), "attention.output.dense")
        x = layer_norm(
            x + attn,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        ff = lin(gelu(lin(x, "intermediate.dense")), "output.dense")
        x = layer_norm(
            x + ff, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps
        )
    return np.array(weights), x


def test_forward_matches_an_independent_float64_reference(tiny_model_dir, tiny_model):
    result = tiny_model.attention("the cat sat", "on the mat")
    weights, last = reference_forward(tiny_model_dir, result.input_ids, result.token_type_ids)
    np.testing.assert_allclose(result.weights, weights, atol=1e-5)
    np.testing.assert_allclose(result.last_hidden_state, last, atol=1e-4)


def test_fused_qkv_equals_separate_projections_to_float32_rounding(
    tiny_model_dir, tiny_model, separate_projections
):
    """Q, K and V come from one (3·hidden, hidden) matmul: the same as three Linears."""
    result = tiny_model.attention("the cat sat on the mat.")
    separate, weights = separate_projections(tiny_model_dir, result)
    for name, expected in separate.items():
        assert expected.dtype == getattr(result, name).dtype == np.float32
        np.testing.assert_allclose(getattr(result, name), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(result.weights, weights, atol=1e-6)
    file = SafetensorsFile(tiny_model_dir / "model.safetensors")
    for name in ("query", "key", "value"):  # the fused matrix's row blocks are the file's
        stored = file.get(f"encoder.layer.1.attention.self.{name}.weight")
        np.testing.assert_array_equal(getattr(tiny_model.layers[1], name), stored)


@pytest.mark.parametrize("strategy", ["loop", "matmul"])
def test_strategies_agree_with_batched(tiny_model, strategy):
    text = "unaffable hello, world!"
    batched = tiny_model.attention(text)
    other = tiny_model.attention(text, strategy=strategy)
    assert other.strategy == strategy
    for name in ("query", "key", "value", "scores", "weights", "hidden_states"):
        np.testing.assert_allclose(getattr(other, name), getattr(batched, name), atol=1e-5)


def test_padding_mask_makes_a_padded_batch_equal_the_single_sentences(tiny_model):
    short = tiny_model.encode("the cat")
    long = tiny_model.encode("the dog ran on the mat")
    T = len(long.input_ids)
    pad = T - len(short.input_ids)
    ids = np.array([short.input_ids + [0] * pad, long.input_ids])
    mask = np.array([[1] * len(short.input_ids) + [0] * pad, [1] * T])
    batch = tiny_model.forward(ids, np.zeros_like(ids), mask)
    alone = tiny_model.attention("the cat")
    n = len(short.input_ids)
    np.testing.assert_allclose(batch.weights[0, :, :, :n, :n], alone.weights, atol=1e-6)
    np.testing.assert_array_equal(batch.weights[0, :, :, :, n:], 0)  # nobody looks at padding
    np.testing.assert_allclose(batch.hidden_states[0, -1, :n], alone.last_hidden_state, atol=1e-5)


def test_a_mask_without_padding_equals_no_mask(tiny_model):
    """All-ones attention_mask (what attention() passes) hides nothing; a 0 still hides."""
    encoding = tiny_model.encode("the dog ran on the mat")
    ids = np.array([encoding.input_ids])
    types = np.zeros_like(ids)
    ones = tiny_model.forward(ids, types, np.ones_like(ids))
    unmasked = tiny_model.forward(ids, types)
    for name in ("scores", "weights", "hidden_states"):
        np.testing.assert_array_equal(getattr(ones, name), getattr(unmasked, name))
    hide_last = np.ones_like(ids)
    hide_last[0, -1] = 0
    np.testing.assert_array_equal(tiny_model.forward(ids, types, hide_last).weights[..., -1], 0)


def test_head_for_the_explorer(tiny_model):
    result = tiny_model.attention("the cat sat")
    head = result.head(1, 0)
    assert head["tokens"] == result.tokens and head["layer"] == 1 and head["head"] == 0
    assert head["model_name"] == "tiny-bert"
    for name in ("query", "key", "value"):
        assert head[name].dtype == np.float64 and head[name].shape == (5, 4)
        np.testing.assert_array_equal(head[name], getattr(result, name)[1, 0])


def test_summaries(tiny_model):
    result = tiny_model.attention("the cat sat on the mat")
    s = result.summaries()
    w = result.weights.astype(np.float64)
    assert s.entropy.shape == (2, 2)
    expected = -(w * np.log(w)).sum(-1).mean(-1)
    np.testing.assert_allclose(s.entropy, expected, rtol=1e-5)
    np.testing.assert_allclose(s.cls, w[..., 0].mean(-1), rtol=1e-5)
    np.testing.assert_allclose(s.sep, w[..., -1].mean(-1), rtol=1e-5)
    T = w.shape[-1]
    prev = np.mean([w[..., i, i - 1] for i in range(1, T)], axis=0)
    np.testing.assert_allclose(s.previous, prev, rtol=1e-5)
    assert np.all((s.entropy >= 0) & (s.entropy <= np.log(T) + 1e-6))
    with pytest.raises(ValueError, match="unknown"):
        s.get("nope")


def test_summaries_of_one_hot_attention():
    from attn_explorer.models import head_summaries

    weights = np.zeros((1, 1, 3, 3), np.float32)
    weights[0, 0, :, 0] = 1  # every query on [CLS]
    s = head_summaries(weights, ["[CLS]", "x", "[SEP]"])
    assert s.entropy[0, 0] == 0 and s.cls[0, 0] == 1 and s.sep[0, 0] == 0
    assert s.previous[0, 0] == pytest.approx(0.5)  # row 1 looks at row 0; row 2 does not


def test_long_sentence_is_truncated_with_a_notice(tiny_model):
    result = tiny_model.attention("the cat sat on the mat " * 5)
    assert result.truncated
    assert len(result.tokens) == 16 and result.tokens[-1] == "[SEP]"
    assert "truncated" in result.notice and "30" in result.notice.replace("32", "30")


def test_empty_sentence(tiny_model):
    with pytest.raises(ValueError, match="empty"):
        tiny_model.attention("  ")


def test_bf16_weights_and_bert_prefixed_names_load(tmp_path):
    plain = load_model(write_tiny_bert(tmp_path / "plain"))
    folder = write_tiny_bert(tmp_path / "bf16", bf16=True, weight_prefix="bert.")
    model = load_model(folder)
    assert model.word_embeddings.dtype == np.float32
    a = plain.attention("the cat").weights
    b = model.attention("the cat").weights
    np.testing.assert_allclose(a, b, atol=0.05)  # bfloat16 keeps about 3 digits


def test_gamma_beta_names_load(tiny_model_dir):
    file = SafetensorsFile(tiny_model_dir / "model.safetensors")
    renamed = {
        n.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): (np.array(file.get(n)))
        for n in file.names()
    }
    save_safetensors(tiny_model_dir / "model.safetensors", renamed)
    assert load_model(tiny_model_dir).attention("the cat").weights.shape == (2, 2, 4, 4)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["config.json", "vocab.txt", "model.safetensors"])
def test_missing_file(tiny_model_dir, missing):
    (tiny_model_dir / missing).unlink()
    with pytest.raises(ValueError, match=missing.replace(".", r"\.")):
        load_model(tiny_model_dir)


def test_not_a_folder(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        load_model(tmp_path / "nowhere")


def test_pytorch_bin_only_is_explained(tiny_model_dir):
    (tiny_model_dir / "model.safetensors").rename(tiny_model_dir / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model\.bin.*only safetensors"):
        load_model(tiny_model_dir)


@pytest.mark.parametrize("model_type", ["gpt2", "roberta", None])
def test_non_bert_model_type(tmp_path, model_type):
    config = tiny_config(model_type=model_type)
    folder = write_tiny_bert(tmp_path / "m", config=config)
    with pytest.raises(ValueError, match="only BERT-family"):
        load_model(folder)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"hidden_size": 9}, "not a multiple"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"hidden_act": "swish"}, "hidden_act"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"layer_norm_eps": -1}, "layer_norm_eps"),
        ({"vocab_size": "many"}, "vocab_size"),
    ],
)
def test_bad_config_fields(tiny_model_dir, override, message):
    (tiny_model_dir / "config.json").write_text(json.dumps(tiny_config(**override)))
    with pytest.raises(ValueError, match=message):
        load_model(tiny_model_dir)


def test_config_that_is_not_json(tiny_model_dir):
    (tiny_model_dir / "config.json").write_text("{model_type: bert")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_model(tiny_model_dir)


def test_truncated_safetensors(tiny_model_dir):
    path = tiny_model_dir / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated"):
        load_model(tiny_model_dir)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"intermediate_size": 32}, r"shape \(16, 8\) but config\.json implies \(32, 8\)"),
        ({"max_position_embeddings": 64}, "implies"),
        ({"num_hidden_layers": 3}, "missing"),
    ],
)
def test_config_and_weights_disagree(tiny_model_dir, override, message):
    (tiny_model_dir / "config.json").write_text(json.dumps(tiny_config(**override)))
    with pytest.raises(ValueError, match=message):
        load_model(tiny_model_dir)


def test_vocab_larger_than_config(tiny_model_dir):
    with open(tiny_model_dir / "vocab.txt", "a", encoding="utf-8") as handle:
        handle.write("extra\n")
    with pytest.raises(ValueError, match="vocab_size"):
        load_model(tiny_model_dir)


def test_integer_weight_is_refused(tiny_model_dir):
    config = tiny_config()
    shapes = expected_shapes(load_model(tiny_model_dir).config)
    tensors = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
    tensors["embeddings.LayerNorm.bias"] = np.zeros(config["hidden_size"], np.int32)
    save_safetensors(tiny_model_dir / "model.safetensors", tensors)
    with pytest.raises(ValueError, match="floating point"):
        load_model(tiny_model_dir)


def test_forward_rejects_bad_ids(tiny_model):
    with pytest.raises(ValueError, match="ids must lie"):
        tiny_model.forward(np.array([[2, 9999, 3]]))
    with pytest.raises(ValueError, match="over the model's limit"):
        tiny_model.forward(np.full((1, 17), 5))
