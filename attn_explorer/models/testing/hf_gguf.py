"""Write a Hugging Face decoder's weights as a GGUF the way llama.cpp's converter does.

For reference tests: a test builds a tiny random model with transformers, hands its
``state_dict`` here as numpy arrays (HF names, (out, in) layout), and reads the file back
with the app's own loader. What ``convert_hf_to_gguf.py`` does per family is repeated:

- tensor names (``model.layers.0.self_attn.q_proj.weight`` -> ``blk.0.attn_q.weight``);
- ``llama``: Q and K rows permuted for adjacent-pair RoPE (its ``LlamaModel.permute``);
  ``qwen2`` / ``qwen3`` are written as they are (llama.cpp rotates halves for them);
- Llama 3 ``rope_type: llama3``: the per-frequency factors written as ``rope_freqs.weight``
  (``LlamaModel.generate_extra_tensors``), since a GGUF has no key for that scaling;
- ``qwen3``: ``q_norm`` / ``k_norm`` as ``attn_q_norm`` / ``attn_k_norm``, the head size as
  ``attention.key_length`` / ``value_length``;
- ``gemma2`` / ``gemma3``: every norm weight stored with Gemma's "1 +" added (its
  ``Gemma2Model.modify_tensors``), the four norms of a layer by Gemma's names
  (``post_attention_layernorm`` is ``post_attention_norm`` there, not ``ffn_norm``), the
  sliding window and (Gemma 2) the soft-capping values as metadata; no layer pattern and no
  local RoPE base, which llama.cpp fixes by convention;
- ``phi3``: the fused ``qkv_proj`` and ``gate_up_proj`` kept fused (``attn_qkv``, ``ffn_up``).

The vocabulary is the tiny byte-level one of :mod:`.tiny_gguf`, so the app's tokenizer
works on any text. No torch here: arrays in, a file out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.models.formats.hf_folder import LAYER_TENSORS, llama3_rope_factors
from attn_explorer.models.testing.tiny_gguf import (
    CONTROL_TOKENS,
    TINY_MERGES,
    TINY_TEMPLATE,
    llama_cpp_permute,
    tiny_vocabulary,
)


def write_hf_decoder_gguf(
    path: Path, architecture: str, config: Mapping[str, Any], state: Mapping[str, np.ndarray]
) -> None:
    """Write ``state`` (HF names -> float32 arrays) of a ``config`` (HF config dict) to ``path``."""
    import gguf

    heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    hidden = int(config["hidden_size"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    rope = dict(config.get("rope_parameters") or {})
    rope = dict(rope.get("full_attention", rope))  # Gemma 3: per kind of layer; global here
    theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    tokens = tiny_vocabulary()
    if int(config["vocab_size"]) != len(tokens):
        raise ValueError(f"vocab_size must be {len(tokens)} (the tiny byte-level vocabulary)")

    gemma = architecture.startswith("gemma")
    tensors: dict[str, np.ndarray] = {
        "token_embd.weight": state["model.embed_tokens.weight"],
        "output_norm.weight": state["model.norm.weight"] + np.float32(1 if gemma else 0),
    }
    if "lm_head.weight" in state and not config.get("tie_word_embeddings", False):
        tensors["output.weight"] = state["lm_head.weight"]
    for name, values in state.items():
        parts = name.split(".")
        if parts[:2] != ["model", "layers"]:
            continue
        layer, rest = parts[2], ".".join(parts[3:])
        gguf_name = LAYER_TENSORS[rest]
        if gemma and rest == "post_attention_layernorm.weight":
            gguf_name = "post_attention_norm.weight"  # Gemma's norm after attention
        if gemma and rest.endswith("norm.weight"):
            values = values + np.float32(1)
        if architecture == "llama" and gguf_name in ("attn_q.weight", "attn_q.bias"):
            values = llama_cpp_permute(values, heads)
        elif architecture == "llama" and gguf_name in ("attn_k.weight", "attn_k.bias"):
            values = llama_cpp_permute(values, kv_heads)
        tensors[f"blk.{layer}.{gguf_name}"] = values
    if rope.get("rope_type") == "llama3":
        tensors["rope_freqs.weight"] = llama3_rope_factors(head_dim, theta, rope)

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name(f"tiny-hf-{architecture}")
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    if gemma:
        writer.add_sliding_window(int(config["sliding_window"]))
        if architecture == "gemma2":
            writer.add_attn_logit_softcapping(float(config["attn_logit_softcapping"]))
            writer.add_final_logit_softcapping(float(config["final_logit_softcapping"]))
    if head_dim != hidden // heads or architecture in ("qwen3", "gemma2", "gemma3"):
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS)))
    writer.add_token_merges(TINY_MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(TINY_TEMPLATE)
    for name, values in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(values, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
