"""Each decoder family against transformers, on tiny random models written as llama.cpp writes them.

A test builds a 2-layer model with transformers (4 query heads sharing 2 key/value heads,
query and key weights scaled up so attention is far from uniform), writes its weights as a
GGUF the way ``convert_hf_to_gguf.py`` does (``models/testing/hf_gguf.py``: the Q/K
permutation of llama-style RoPE, Llama 3's ``rope_freqs``, Qwen3's q/k norms) and reads it
back with the app's loader. Our attention weights must be within 1e-4 of transformers'
eager ones, our logits within 2e-3 with the same argmax at every position, and 20 greedy
tokens identical. Skipped without torch and transformers (the reference extra).
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.testing.hf_gguf import write_hf_decoder_gguf
from attn_explorer.models.testing.tiny_gguf import tiny_vocabulary

torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

pytestmark = pytest.mark.reference

TEXTS = [
    "the cat sat on the mat, the cat sat on the mat",
    "Grüße aus Köln — naïve café, 東京 🙂",
]

COMMON = {
    "vocab_size": len(tiny_vocabulary()),
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}

#: family -> (GGUF architecture, transformers config class, model class, extra config)
FAMILIES = {
    "llama": ("llama", "LlamaConfig", "LlamaForCausalLM", {"head_dim": 8}),
    "llama3-rope": (
        "llama",
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "head_dim": 8,
            # Every frequency scaled or smoothed at this small original context.
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    # llama.cpp's converter writes Mistral as "llama" and records no sliding window, so
    # llama.cpp (and we, following the file) run it with full attention: the reference is
    # transformers' Mistral with the window off.
    "mistral": (
        "llama",
        "MistralConfig",
        "MistralForCausalLM",
        {"head_dim": 8, "sliding_window": None},
    ),
    "qwen2": ("qwen2", "Qwen2Config", "Qwen2ForCausalLM", {}),
    # head_dim 16 > hidden / heads = 8: the head size comes from attention.key_length.
    "qwen3": ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    # Fused QKV and gate-up; no sliding window (not written to GGUF by llama.cpp for Phi-3).
    "phi3": ("phi3", "Phi3Config", "Phi3ForCausalLM", {"sliding_window": None, "pad_token_id": 0}),
    # Six layers: five local (window 5, shorter than the texts) and the sixth global, with
    # llama.cpp's fixed local RoPE base 10 000 and global 1e6; the scale 1/√head_dim.
    "gemma3": (
        "gemma3",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            "head_dim": 16,
            "num_hidden_layers": 6,
            "sliding_window": 5,
            "query_pre_attn_scalar": 16,
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            },
            "final_logit_softcapping": None,
            "attn_logit_softcapping": None,
        },
    ),
    # Layer 0 local (window 5), layer 1 global; attention and final logits soft-capped.
    "gemma2": (
        "gemma2",
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            "head_dim": 16,
            "sliding_window": 5,
            "query_pre_attn_scalar": 16,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
        },
    ),
}


def build(family: str, seed: int = 0):
    architecture, config_class, model_class, extra = FAMILIES[family]
    config = getattr(transformers, config_class)(
        **{**COMMON, **extra}, attn_implementation="eager", dtype=torch.float32
    )
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.copy_(1 + 0.1 * torch.randn_like(parameter))
            elif name.endswith("bias"):
                parameter.copy_(0.3 * torch.randn_like(parameter))
            elif "q_proj" in name or "k_proj" in name:
                parameter.mul_(20.0)  # sharp attention: far from uniform
            elif "qkv_proj" in name:  # Phi-3: the Q and K rows of the fused matrix
                rows = config.num_attention_heads * 8 + config.num_key_value_heads * 8
                parameter[:rows].mul_(20.0)
                parameter[rows:].mul_(3.0)
            else:
                parameter.mul_(3.0)
    return architecture, config, model


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tmp_path_factory):
    architecture, config, theirs = build(request.param)
    path = tmp_path_factory.mktemp(request.param) / f"tiny-{request.param}.gguf"
    state = {name: tensor.detach().numpy() for name, tensor in theirs.state_dict().items()}
    write_hf_decoder_gguf(path, architecture, config.to_dict(), state)
    return request.param, theirs, load_gguf(path)


def test_weights_and_logits_match_transformers(pair):
    family, theirs, ours = pair
    for text in TEXTS:
        mine = ours.attention(text)
        with torch.no_grad():
            out = theirs(torch.from_numpy(mine.input_ids[None, :]), output_attentions=True)
        for layer, attention in enumerate(out.attentions):
            reference = attention[0].numpy()
            uniform = float(np.mean(1 / np.arange(1, reference.shape[-1] + 1)))  # causal, flat
            assert reference.max(axis=-1).mean() > 1.5 * uniform, "attention is nearly uniform"
            np.testing.assert_allclose(mine.weights[layer], reference, atol=1e-4, err_msg=family)
        logits = out.logits[0].numpy()
        np.testing.assert_allclose(mine.logits, logits, atol=2e-3, err_msg=family)
        assert (logits.argmax(-1) == mine.logits.argmax(-1)).all(), (family, text)


def test_twenty_greedy_tokens_match_transformers_generate(pair):
    family, theirs, ours = pair
    mine = ours.generate("the cat", max_new_tokens=20)
    with torch.no_grad():
        out = theirs.generate(
            torch.tensor([list(mine.prompt_ids)]),
            max_new_tokens=len(mine.token_ids),
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    assert out[0, len(mine.prompt_ids) :].tolist() == mine.token_ids, family
    assert len(mine.token_ids) >= 5, family


def test_llama3_scaling_changes_the_attention():
    """Not a tautology: the same weights without rope_freqs give other weights."""
    _, _, theirs = build("llama3-rope")
    plain = transformers.LlamaConfig(
        **COMMON, head_dim=8, attn_implementation="eager", dtype=torch.float32
    )
    unscaled = transformers.LlamaForCausalLM(plain).eval()
    unscaled.load_state_dict(theirs.state_dict())
    ids = torch.tensor([list(range(3, 40))])
    with torch.no_grad():
        a = theirs(ids, output_attentions=True).attentions[-1]
        b = unscaled(ids, output_attentions=True).attentions[-1]
    assert float((a - b).abs().max()) > 1e-2


# -- the same families from Hugging Face folders (config.json + safetensors + tokenizer.json) --

#: Folder variants: the window is config.json's here (Mistral's on every layer; transformers
#: runs it), one model saved as BF16 in three shards, Qwen2 with its window switched off.
HF_VARIANTS = {
    "llama3-rope": ("llama3-rope", {}, {}),
    "mistral-window": ("mistral", {"sliding_window": 5}, {}),
    "qwen2-bf16-sharded": ("qwen2", {"use_sliding_window": False}, {"bf16": True}),
    "qwen3": ("qwen3", {}, {}),
    "phi3": ("phi3", {}, {}),
    "gemma3": ("gemma3", {}, {}),
    "gemma2": ("gemma2", {}, {}),
}


def tiny_tokenizer_json(path) -> None:
    """The tiny byte-level vocabulary as a tokenizer.json (the same tokenizer as the GGUFs')."""
    from attn_explorer.models.decoder.text.bpe import GGUFTokenizer
    from attn_explorer.models.testing.tiny_gguf import CONTROL_TOKENS, TINY_MERGES

    tokens = tiny_vocabulary()
    types = [3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS))
    tokenizer = GGUFTokenizer(tokens, TINY_MERGES, types, pre="smollm")
    path.write_text(tokenizer._tokenizer.to_str(), encoding="utf-8")


@pytest.fixture(scope="module", params=list(HF_VARIANTS))
def hf_pair(request, tmp_path_factory):
    from attn_explorer.models.loading import load_model

    family, overrides, how = HF_VARIANTS[request.param]
    _, config_class, model_class, extra = FAMILIES[family]
    base = {**COMMON, **extra, **overrides}
    config = getattr(transformers, config_class)(
        **base, attn_implementation="eager", dtype=torch.float32
    )
    _, _, built = build(family)
    theirs = getattr(transformers, model_class)(config).eval()
    theirs.load_state_dict(built.state_dict())
    folder = tmp_path_factory.mktemp(request.param)
    if how.get("bf16"):
        theirs.to(torch.bfloat16).save_pretrained(folder, max_shard_size="20KB")
        theirs = (
            getattr(transformers, model_class)
            .from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
            .eval()
        )
        assert (folder / "model.safetensors.index.json").is_file()
    else:
        theirs.save_pretrained(folder)
    tiny_tokenizer_json(folder / "tokenizer.json")
    return request.param, theirs, load_model(folder)


def test_hf_folders_match_transformers(hf_pair):
    variant, theirs, ours = hf_pair
    for text in TEXTS:
        mine = ours.attention(text)
        with torch.no_grad():
            out = theirs(torch.from_numpy(mine.input_ids[None, :]), output_attentions=True)
        for layer, attention in enumerate(out.attentions):
            np.testing.assert_allclose(
                mine.weights[layer], attention[0].numpy(), atol=1e-4, err_msg=variant
            )
        logits = out.logits[0].numpy()
        np.testing.assert_allclose(mine.logits, logits, atol=2e-3, err_msg=variant)
        assert (logits.argmax(-1) == mine.logits.argmax(-1)).all(), (variant, text)
    if variant == "mistral-window":  # the band: nothing further back than the window
        weights = ours.attention(TEXTS[0]).weights  # (L, H, T, T)
        t = weights.shape[-1]
        far = np.tril(np.ones((t, t), dtype=bool), -5)  # i − j ≥ 5
        assert (weights[..., far] == 0).all() and ours.config.layer_kinds == ("local", "local")


def test_hf_folders_generate_as_transformers(hf_pair):
    variant, theirs, ours = hf_pair
    mine = ours.generate("the cat", max_new_tokens=20)
    with torch.no_grad():
        out = theirs.generate(
            torch.tensor([list(mine.prompt_ids)]),
            max_new_tokens=len(mine.token_ids),
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    assert out[0, len(mine.prompt_ids) :].tolist() == mine.token_ids, variant
