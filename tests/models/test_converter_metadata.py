"""Issue 36: metadata as llama.cpp's converter writes it opens; a bad value is still refused.

Each file here is written with ``gguf.GGUFWriter`` holding what ``convert_hf_to_gguf.py``
(llama-cpp-python 0.3.36's ``vendor/llama.cpp``) writes for some model, where our rules were
stricter than the converter: Phi-3's ``attention.sliding_window = 0`` for "no window"
(``Phi3MiniModel.set_gguf_parameters``), a count given per layer (``add_head_count`` takes
a list), a special token id that config.json names past the vocabulary (``SpecialVocab``
does not check it on the BPE path; llama.cpp reads it as no such token), a context length
past 16 M (a uint32), Gemma 3's final soft-cap (written when set), a Gemma 2 file from before
the converter wrote its window (llama.cpp assumes 4 096). The reference stage runs the real
converter on every family (``test_converter_reference.py``); these run in the fast loop.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attn_explorer.models import ModelError
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.formats.gguf_metadata import MAX_CONTEXT
from attn_explorer.models.testing.hf_gguf import write_hf_decoder_gguf
from attn_explorer.models.testing.hostile_gguf import DELETE, Typed, rewrite_gguf
from attn_explorer.models.testing.tiny_gguf import tiny_vocabulary, write_tiny_gguf

TEXT = "the cat sat on the mat, the cat sat"


def hf_state(arch: str, layers: int, head_dim: int) -> dict[str, np.ndarray]:
    """A random Hugging Face state dict of ``arch`` (Phi-3 or Gemma), tiny sizes."""
    rng = np.random.default_rng(1)
    hidden, heads, kv_heads, ff, vocab = 32, 4, 2, 64, len(tiny_vocabulary())

    def random(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    state = {
        "model.embed_tokens.weight": random(vocab, hidden),
        "model.norm.weight": random(hidden),
    }
    for layer in range(layers):
        p = f"model.layers.{layer}."
        state |= {
            p + "input_layernorm.weight": random(hidden),
            p + "self_attn.o_proj.weight": random(hidden, heads * head_dim),
            p + "post_attention_layernorm.weight": random(hidden),
            p + "mlp.down_proj.weight": random(hidden, ff),
        }
        if arch == "phi3":
            state |= {
                p + "self_attn.qkv_proj.weight": random((heads + 2 * kv_heads) * head_dim, hidden),
                p + "mlp.gate_up_proj.weight": random(2 * ff, hidden),
            }
            continue
        state |= {
            p + "self_attn.q_proj.weight": 3 * random(heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": 3 * random(kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": random(kv_heads * head_dim, hidden),
            p + "mlp.gate_proj.weight": random(ff, hidden),
            p + "mlp.up_proj.weight": random(ff, hidden),
            p + "pre_feedforward_layernorm.weight": random(hidden),
            p + "post_feedforward_layernorm.weight": random(hidden),
        }
        if arch == "gemma3":
            state |= {
                p + "self_attn.q_norm.weight": random(head_dim),
                p + "self_attn.k_norm.weight": random(head_dim),
            }
    return state


def family_file(folder, arch: str, layers: int = 2):
    """A tiny ``arch`` GGUF as write_hf_decoder_gguf writes it (window 3, Gemma 2's caps)."""
    head_dim = 8 if arch == "phi3" else 16
    config = {
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 32,
        "head_dim": head_dim,
        "intermediate_size": 64,
        "num_hidden_layers": layers,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "vocab_size": len(tiny_vocabulary()),
        "tie_word_embeddings": True,
        "sliding_window": 3,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
    }
    path = folder / f"{arch}.gguf"
    write_hf_decoder_gguf(path, arch, config, hf_state(arch, layers, head_dim))
    return path


class Files(dict):
    """Each family's file, written on first use (so no one test pays for all four)."""

    def __init__(self, folder) -> None:
        super().__init__()
        self.folder = folder

    def __missing__(self, arch: str):
        if arch == "llama":
            write_tiny_gguf(self.folder / "llama.gguf")
            self[arch] = self.folder / "llama.gguf"
        else:
            self[arch] = family_file(self.folder, arch)
        return self[arch]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return Files(tmp_path_factory.mktemp("converter-like"))


def variant(files, tmp_path, arch: str, **metadata):
    """``files[arch]`` with ``metadata`` keys set ("." written "__" in the names)."""
    changed = {key.replace("__", "."): value for key, value in metadata.items()}
    return rewrite_gguf(files[arch], tmp_path / f"{arch}-{len(changed)}.gguf", changed)


def refused(path, words: str) -> str:
    with pytest.raises(ModelError) as caught:
        load_gguf(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert re.search(words, message), message
    return message


# -- 0 means none --------------------------------------------------------------------------------
def test_phi3_with_the_converters_zero_window_opens_with_no_window(files, tmp_path):
    # Phi3MiniModel.set_gguf_parameters: "if sliding_window is None: sliding_window = 0"
    path = variant(
        files, tmp_path, "phi3",
        phi3__attention__sliding_window=Typed(0, "UINT32"),
        phi3__rope__scaling__original_context_length=Typed(4096, "UINT32"),
    )  # fmt: skip
    model = load_gguf(path)
    assert model.config.sliding_window == 0
    assert model.config.layer_kinds == ("global", "global")
    plain = load_gguf(files["phi3"])  # the same weights, no window key
    np.testing.assert_array_equal(model.attention(TEXT).weights, plain.attention(TEXT).weights)


def test_gemma3_with_a_zero_window_has_every_layer_global(files, tmp_path):
    # llama.cpp's Gemma 3 loader: SWA only when "found_swa && hparams.n_swa > 0"
    zero = load_gguf(variant(files, tmp_path, "gemma3", gemma3__attention__sliding_window=0))
    windowed = load_gguf(files["gemma3"])
    assert zero.config.sliding_window == 0 and set(zero.config.layer_kinds) == {"global"}
    assert windowed.config.layer_kinds == ("local", "local")  # (every 6th is global)
    far = zero.attention(TEXT).weights[0][:, -1, :-3]  # keys 3+ back from the last query
    assert far.max() > 1e-3  # seen without a window
    assert windowed.attention(TEXT).weights[0][:, -1, :-3].max() == 0.0


def test_a_gemma2_file_without_a_window_takes_llama_cpps_4096(files, tmp_path):
    # early Gemma 2 GGUFs lack the key; llama.cpp's Gemma 2 loader: "n_swa = 4096"
    model = load_gguf(variant(files, tmp_path, "gemma2", gemma2__attention__sliding_window=DELETE))
    assert model.config.sliding_window == 4096
    assert model.config.layer_kinds == ("local", "global")


def test_soft_caps_of_zero_are_none_and_absent_ones_llama_cpps(files, tmp_path):
    zero = variant(
        files, tmp_path, "gemma2",
        gemma2__attn_logit_softcapping=0.0, gemma2__final_logit_softcapping=0.0,
    )  # fmt: skip
    assert (load_gguf(zero).config.attn_softcap, load_gguf(zero).config.final_softcap) == (0, 0)
    absent = variant(
        files, tmp_path, "gemma2",
        gemma2__attn_logit_softcapping=DELETE, gemma2__final_logit_softcapping=DELETE,
    )  # fmt: skip
    config = load_gguf(absent).config
    assert (config.attn_softcap, config.final_softcap) == (50.0, 30.0)  # llama-hparams.h


def test_gemma3s_final_soft_cap_is_applied_when_the_file_has_one(files, tmp_path):
    # Gemma3Model.set_gguf_parameters writes final_logit_softcapping when it is set
    plain = load_gguf(files["gemma3"])
    capped = load_gguf(variant(files, tmp_path, "gemma3", gemma3__final_logit_softcapping=0.5))
    assert plain.config.final_softcap == 0.0 and capped.config.final_softcap == 0.5
    logits = plain.attention(TEXT).logits
    np.testing.assert_allclose(
        capped.attention(TEXT).logits, 0.5 * np.tanh(logits / 0.5), rtol=1e-5, atol=1e-6
    )


# -- one value per layer ---------------------------------------------------------------------------
def test_counts_written_per_layer_read_as_the_one_value(files, tmp_path):
    # GGUFWriter.add_head_count(list) -> an INT32 array; llama.cpp: get_key_or_arr
    path = variant(
        files, tmp_path, "llama",
        llama__attention__head_count=Typed([4, 4], "ARRAY", "INT32"),
        llama__attention__head_count_kv=Typed([2, 2], "ARRAY", "INT32"),
        llama__feed_forward_length=Typed([64, 64], "ARRAY", "UINT32"),
    )  # fmt: skip
    model, plain = load_gguf(path), load_gguf(files["llama"])
    assert (model.config.num_heads, model.config.num_kv_heads) == (4, 2)
    assert model.config.intermediate_size == 64
    np.testing.assert_array_equal(model.attention(TEXT).logits, plain.attention(TEXT).logits)


def test_counts_that_differ_per_layer_or_miss_a_layer_are_refused_by_name(files, tmp_path):
    path = variant(files, tmp_path, "llama", llama__attention__head_count=[4, 2])
    refused(
        path,
        r"metadata llama\.attention\.head_count holds different values per layer \(4, 2\); "
        r"expected the same value in every layer",
    )
    path = variant(files, tmp_path, "llama", llama__feed_forward_length=[64, 64, 64])
    refused(
        path,
        r"metadata llama\.feed_forward_length holds an array of 3 integer items; expected a "
        r"whole number from 1 to 1,048,576, or one per layer, all equal \(2 layers\)",
    )
    path = variant(files, tmp_path, "llama", llama__attention__head_count=[0, 0])
    refused(path, r"head_count holds an array of 2 integer items \(each the integer 0\)")


# -- what the vocabulary and the context may say --------------------------------------------------
def test_special_token_ids_past_the_vocabulary_are_no_such_token(files, tmp_path):
    # SpecialVocab._set_special_token keeps any id when it is not given n_vocab (BPE path);
    # llama-vocab.cpp: "bad special token ... using default id"
    path = variant(
        files, tmp_path, "llama",
        tokenizer__ggml__bos_token_id=5000, tokenizer__ggml__eos_token_id=2**32 - 1,
    )  # fmt: skip
    model = load_gguf(path)
    assert model.tokenizer.bos_id is None and model.tokenizer.eos_id is None
    assert model.generate("the cat", max_new_tokens=3).token_ids  # runs without a stop token


def test_a_context_past_what_is_read_is_read_as_the_most(files, tmp_path):
    path = variant(files, tmp_path, "llama", llama__context_length=2**32 - 1)  # a uint32
    assert load_gguf(path).max_tokens == MAX_CONTEXT


def test_keys_the_converter_leaves_out_take_their_defaults(files, tmp_path):
    # Qwen2 / Gemma / Phi-3 write no vocab_size; Qwen2 and Gemma no rope.dimension_count;
    # rope.freq_base only with rope_theta; a chat template, add_bos and the special ids
    # only when the tokenizer's files name them
    omitted = [
        "llama.vocab_size", "llama.rope.dimension_count", "llama.rope.freq_base",
        "tokenizer.chat_template", "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "general.name",
    ]  # fmt: skip
    path = rewrite_gguf(files["llama"], tmp_path / "bare.gguf", dict.fromkeys(omitted, DELETE))
    model, plain = load_gguf(path), load_gguf(files["llama"])
    assert model.config.rope_theta == 10000.0 and model.config.vocab_size == 269
    np.testing.assert_array_equal(model.attention(TEXT).logits, plain.attention(TEXT).logits)


# -- a truly bad value is still one message --------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "value", "holds", "expected"),
    [
        ("phi3.attention.sliding_window", Typed(-1, "INT32"), "the integer -1",
         r"a whole number from 1 to 16,777,216 \(0 for none\)"),
        ("phi3.attention.sliding_window", Typed(2**40, "UINT64"), "the integer 1,099,511,627,776",
         r"a whole number from 1 to 16,777,216 \(0 for none\)"),
        ("phi3.attention.sliding_window", Typed(4.0, "FLOAT32"), "the float 4.0",
         r"a whole number from 1 to 16,777,216 \(0 for none\)"),
        ("phi3.context_length", Typed(0, "UINT32"), "the integer 0",
         r"a whole number from 1 to 4,294,967,295"),
        ("tokenizer.ggml.bos_token_id", Typed(-1, "INT32"), "the integer -1",
         r"a whole number from 0 to 4,294,967,295"),
    ],
)  # fmt: skip
def test_a_value_the_converter_cannot_write_is_refused(
    files, tmp_path, key, value, holds, expected
):
    path = rewrite_gguf(files["phi3"], tmp_path / "bad.gguf", {key: value})
    refused(path, rf"metadata {re.escape(key)} holds {re.escape(holds)}; expected {expected}\.")


@pytest.mark.parametrize("value", [math.nan, -1.0, math.inf])
def test_a_soft_cap_that_is_not_a_cap_is_refused(files, tmp_path, value):
    path = variant(files, tmp_path, "gemma2", gemma2__final_logit_softcapping=value)
    refused(
        path,
        r"metadata gemma2\.final_logit_softcapping holds the float .*; expected a finite number "
        r"over 0, at most 1e\+06 \(0 for none\)\.",
    )


# -- RoPE scaling --------------------------------------------------------------------------------
def test_linear_rope_scaling_divides_the_frequencies_old_key_or_new(files, tmp_path):
    # TextModel.set_gguf_parameters: rope_type "linear" -> add_rope_scaling_type/_factor;
    # older converters wrote rope.scale_linear; llama.cpp reads a factor of 0 as none
    plain = load_gguf(files["llama"])
    new = load_gguf(
        variant(files, tmp_path, "llama", llama__rope__scaling__type="linear",
                llama__rope__scaling__factor=4.0)
    )  # fmt: skip
    old = load_gguf(variant(files, tmp_path, "llama", llama__rope__scale_linear=4.0))
    zero = load_gguf(
        variant(files, tmp_path, "llama", llama__rope__scaling__type="linear",
                llama__rope__scaling__factor=0.0)
    )  # fmt: skip
    assert plain.weights.rope_factors is None and zero.weights.rope_factors is None
    np.testing.assert_array_equal(new.weights.rope_factors, np.full(4, 4.0, np.float32))
    scaled = new.attention(TEXT).weights
    np.testing.assert_array_equal(old.attention(TEXT).weights, scaled)
    assert np.abs(scaled - plain.attention(TEXT).weights).max() > 1e-2


def test_scaling_not_implemented_here_opens_and_says_so(files, tmp_path):
    path = variant(
        files, tmp_path, "llama",
        llama__rope__scaling__type="yarn", llama__rope__scaling__factor=4.0,
    )  # fmt: skip
    model = load_gguf(path)
    assert model.config.rope_scale == 1.0
    assert any("RoPE scaling 'yarn' (factor 4) is not applied" in n for n in model.notes())
