"""A tiny random decoder written as a GGUF with llama.cpp's own ``gguf.GGUFWriter``.

``write_tiny_gguf(path, architecture="llama")`` writes 2 layers, 4 query heads
sharing 2 key/value heads, head size 8, a byte-level vocabulary of 256 bytes,
a few merges and three ChatML control tokens. It returns the weights as a
:class:`TinyDecoder` **in the layout the file stores them**, so a test can compute
an independent reference: for ``llama`` the Q and K rows are permuted exactly as
llama.cpp's converter does (RoPE on adjacent pairs), for ``qwen2`` they are not
(RoPE on halves) and Q/K/V carry biases. ``token_embd`` is stored as Q8_0,
everything else as F32, so the reference sees the same (dequantized) numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attn_explorer.models.decoder.text.bpe import byte_alphabet

TINY_MERGES = ["Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "Ġ s", "Ġs at", "o n", "Ġ on"]
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are tiny.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
)


@dataclass(frozen=True)
class TinyDecoder:
    """What was written: sizes, vocabulary and float32 tensors by GGUF name, (out, in)."""

    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    context_length: int
    rope_theta: float
    rms_norm_eps: float
    tokens: list[str]
    tensors: dict[str, np.ndarray]


def llama_cpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute``, as its convert script writes it."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def tiny_vocabulary() -> list[str]:
    """Control tokens, the 256 byte characters, then one token per merge."""
    merged = ["".join(m.split(" ")) for m in TINY_MERGES]
    return [*CONTROL_TOKENS, *byte_alphabet().values(), *merged]


def write_tiny_gguf(
    path: Path,
    architecture: str = "llama",
    seed: int = 0,
    context_length: int = 64,
    num_layers: int = 2,
) -> TinyDecoder:
    """Write a tiny random decoder GGUF to ``path``; return what it holds (see module doc)."""
    import gguf
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(seed)
    tokens = tiny_vocabulary()
    vocab, hidden, heads, kv_heads, head_dim, ff = len(tokens), 32, 4, 2, 8, 64
    theta, eps = 10000.0, 1e-5

    def random(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    hf: dict[str, np.ndarray] = {
        "token_embd.weight": random(vocab, hidden, scale=1.0),
        "output_norm.weight": 1 + random(hidden, scale=0.1),
    }
    for layer in range(num_layers):
        p = f"blk.{layer}."
        hf |= {
            p + "attn_norm.weight": 1 + random(hidden, scale=0.1),
            p + "attn_q.weight": random(heads * head_dim, hidden),
            p + "attn_k.weight": random(kv_heads * head_dim, hidden),
            p + "attn_v.weight": random(kv_heads * head_dim, hidden),
            p + "attn_output.weight": random(hidden, heads * head_dim),
            p + "ffn_norm.weight": 1 + random(hidden, scale=0.1),
            p + "ffn_gate.weight": random(ff, hidden),
            p + "ffn_up.weight": random(ff, hidden),
            p + "ffn_down.weight": random(hidden, ff),
        }
        if architecture == "qwen2":
            hf |= {
                p + "attn_q.bias": random(heads * head_dim),
                p + "attn_k.bias": random(kv_heads * head_dim),
                p + "attn_v.bias": random(kv_heads * head_dim),
            }
    stored = dict(hf)
    if architecture == "llama":  # what convert_hf_to_gguf.py does to a Llama checkpoint
        for name in stored:
            if ".attn_q." in name:
                stored[name] = llama_cpp_permute(stored[name], heads)
            elif ".attn_k." in name:
                stored[name] = llama_cpp_permute(stored[name], kv_heads)

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny-" + architecture)
    writer.add_block_count(num_layers)
    writer.add_context_length(context_length)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(eps)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(CONTROL_TOKENS) + [1] * (vocab - len(CONTROL_TOKENS)))
    writer.add_token_merges(TINY_MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(TINY_TEMPLATE)
    q8 = gguf.GGMLQuantizationType.Q8_0
    for name, values in stored.items():
        if name == "token_embd.weight":
            packed = quantize(values, q8)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=q8)
            stored[name] = dequantize(packed, q8).astype(np.float32)
        else:
            writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyDecoder(
        architecture, num_layers, hidden, heads, kv_heads, head_dim, ff, context_length,
        theta, eps, tokens, stored,
    )  # fmt: skip
