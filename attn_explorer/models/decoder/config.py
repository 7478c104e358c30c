"""A decoder's configuration, read from its file: ``DecoderConfig.from_gguf`` reads the sizes
from the metadata's ``<arch>.*`` keys and checks them, and every tensor they call for
(:func:`check_tensors`), before anything is allocated.

What a GGUF may leave out or set to 0 is read as llama.cpp reads it: the sliding window, the
soft-caps and the RoPE scaling of a decoder's file.

llama.cpp's converter (``convert_hf_to_gguf.py`` and its ``conversion/`` classes) writes 0 for
"none" in some keys and leaves others out, and llama.cpp's loader (``src/models/<family>.cpp``)
then takes a default per family. :func:`window_and_caps` and :func:`rope_scaling` follow it,
so a file the converter wrote runs here as it runs in llama.cpp:

- ``attention.sliding_window``: 0 is no window (Phi-3's converter writes 0 when the model has
  none; Gemma 3's loader enables its window only when ``n_swa > 0``). Absent from a Gemma 2
  file (the first converters wrote none), llama.cpp's 4 096 (``families.Family.default_window``).
- ``attn_logit_softcapping`` / ``final_logit_softcapping``: 0 is no cap; absent from a Gemma 2
  file, 50 and 30 (``llama-hparams.h``). Gemma 3 caps its final logits when the file says so.
- ``rope.scaling.type`` / ``rope.scaling.factor`` (older files: ``rope.scale_linear``): linear
  scaling divides the global layers' frequencies by the factor (Gemma 3 4B and up: 8).

A Hugging Face folder (``llama_cpp_layout`` False) has no llama.cpp defaults: its config says
None when it means none, so an absent key is none there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attn_explorer.models.decoder.families import FAMILIES, Family, layer_kinds
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import (
    check_vocabulary_sizes,
    describe,
    embedding_shape_error,
    metadata_value,
    refuse,
)

#: Keys a GGUF may lack, then read as llama.cpp's default for the family.
LLAMA_CPP_DEFAULTS = (
    "attention.sliding_window",
    "attn_logit_softcapping",
    "final_logit_softcapping",
)


def window_and_caps(
    file: GGUFFile, arch: str, family: Family, gguf: bool
) -> tuple[int | None, float, float]:
    """(declared sliding window or None, attention soft-cap, final soft-cap; 0.0: none)."""

    def number(key: str) -> float | None:
        value: float | None = metadata_value(file, "{arch}." + key, arch)  # 0 reads as None
        return value

    default = {key: gguf and f"{arch}.{key}" not in file.scalars for key in LLAMA_CPP_DEFAULTS}
    window = number("attention.sliding_window")
    if default["attention.sliding_window"]:
        window = family.default_window or None
    softcap = final_cap = 0.0
    if family.softcap:
        softcap = (
            50.0 if default["attn_logit_softcapping"] else number("attn_logit_softcapping") or 0.0
        )
    if family.final_softcap:
        final_cap = number("final_logit_softcapping") or 0.0
        final_cap = 30.0 if default["final_logit_softcapping"] and family.softcap else final_cap
    return (None if window is None else int(window)), float(softcap), float(final_cap)


def rope_scaling(file: GGUFFile, arch: str) -> tuple[float, tuple[str, ...]]:
    """The linear RoPE scale a file asks for (1.0: none), and what it asks that is not applied.

    llama.cpp's converter writes ``rope.scaling.type`` and ``rope.scaling.factor`` (older ones
    ``rope.scale_linear``) from config.json's rope_type; llama.cpp divides the frequencies of
    the global layers by the factor. YaRN and LongRoPE (Phi-3's ``rope_factors_long`` /
    ``_short`` tensors) change more than the frequencies and are not implemented here: the
    file still opens, and the caveat says its attention is not llama.cpp's.
    """
    kind = metadata_value(file, "{arch}.rope.scaling.type", arch)
    factor = metadata_value(file, "{arch}.rope.scaling.factor", arch)
    if factor is None:
        factor = metadata_value(file, "{arch}.rope.scale_linear", arch)
    caveats = []
    if kind not in ("", "none", "linear"):
        caveats.append(
            f"RoPE scaling {kind!r} (factor {factor or 1:g}) is not applied here: attention "
            "differs from llama.cpp's and transformers'."
        )
    if file.has("rope_factors_long.weight") or file.has("rope_factors_short.weight"):
        caveats.append(
            "LongRoPE factors (rope_factors_long / rope_factors_short) are not applied here: "
            "attention differs from llama.cpp's and transformers'."
        )
    scale = float(factor) if factor and kind in ("", "none", "linear") else 1.0
    return scale, tuple(caveats)


#: Every architecture the reader runs (``families.py`` says what each one changes).
ARCHITECTURES = FAMILIES


@dataclass(frozen=True)
class DecoderConfig:
    """Sizes of a decoder, from the GGUF metadata ``<arch>.*`` keys."""

    architecture: str
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    context_length: int
    rope_theta: float
    rms_norm_eps: float
    permuted_qk: bool
    qkv_bias: bool
    qk_norm: bool = False
    sandwich_norms: bool = False
    embedding_scale: float = 1.0  # Gemma: √width
    activation: str = "silu"
    #: Keys a local layer's query sees, itself included (0: no sliding window).
    sliding_window: int = 0
    #: "local" or "global" per layer, and where that came from ("the file" or a convention).
    layer_kinds: tuple[str, ...] = ()
    layer_pattern_source: str = ""
    local_rope_theta: float = 0.0
    #: The attention scale when the family fixes one (Gemma: 1/√key_length); 0: 1/√d.
    attention_scale: float = 0.0
    attn_softcap: float = 0.0  # Gemma 2: logits → cap · tanh(logits / cap); 0: none
    final_softcap: float = 0.0
    fused: bool = False  # Phi-3: one attn_qkv and one gate + up ffn_up per layer
    #: Linear RoPE scaling of the global layers: frequencies divided by it (1: none).
    rope_scale: float = 1.0
    #: What the file asks for that is not applied here, one line each (shown with the notes).
    caveats: tuple[str, ...] = ()

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @classmethod
    def from_gguf(cls, file: GGUFFile) -> DecoderConfig:
        """Read and check the sizes; ModelError naming the key that does not fit."""
        path = file.path
        arch = metadata_value(file, "general.architecture")
        if arch not in ARCHITECTURES:
            raise ModelError(
                f"{path}: architecture {arch!r} is not supported; this app runs "
                f"{' and '.join(repr(a) for a in ARCHITECTURES)} models."
            )

        def number(key: str) -> Any:  # type and range from the table in gguf_metadata
            return metadata_value(file, "{arch}." + key, arch)

        hidden = number("embedding_length")
        heads = number("attention.head_count")
        kv_heads = number("attention.head_count_kv") or heads
        if hidden % heads or heads % kv_heads:
            raise ModelError(
                f"{path}: {heads} heads and {kv_heads} key/value heads do not divide "
                f"the width {hidden}; the metadata is inconsistent."
            )
        # Qwen3 and Gemma give the head size apart from the width (key_length); others don't.
        head_dim = number("attention.key_length") or hidden // heads
        rotary = number("rope.dimension_count") or head_dim
        if rotary != head_dim or head_dim % 2:
            raise ModelError(
                f"{path}: rope.dimension_count {rotary} is not the head size "
                f"{head_dim}; partial rotary embeddings are not supported."
            )
        if (number("attention.value_length") or head_dim) != head_dim:
            raise ModelError(
                f"{path}: attention.value_length differs from key_length {head_dim}; "
                "values of another size than keys are not supported."
            )
        declared_vocab = number("vocab_size")
        gguf = getattr(file, "llama_cpp_layout", True)  # False: a Hugging Face folder
        embedding = getattr(file, "infos", {}).get("token_embd.weight")
        if embedding is not None and (len(embedding.dims) != 2 or embedding.dims[0] != hidden):
            raise embedding_shape_error(file, arch, hidden, declared_vocab)  # before its rows
        if embedding is not None and declared_vocab and declared_vocab != embedding.dims[-1]:
            raise refuse(
                file, f"{arch}.vocab_size", describe(declared_vocab),
                f"{embedding.dims[-1]:,}, the rows of token_embd.weight (the file is inconsistent)",
            )  # fmt: skip
        # sizes compared from the headers before any vocabulary is read
        tokens = (
            check_vocabulary_sizes(
                file, declared_vocab or (embedding.dims[-1] if embedding is not None else None)
            )
            if gguf  # a folder's tokenizer is its tokenizer.json, checked when it is read
            else 0
        )
        family = ARCHITECTURES[arch]
        layers = number("block_count")
        pattern = file.get(f"{arch}.attention.sliding_window_pattern")  # an int or flags
        declared_window, softcap, final_cap = window_and_caps(file, arch, family, gguf)
        windowed = family.global_every or pattern is not None  # Phi-3's window: see families
        window = declared_window if declared_window is not None and windowed else 0
        kinds, source = layer_kinds(layers, family.global_every, window), "llama.cpp's convention"
        if window and isinstance(pattern, list) and len(pattern) == layers:
            kinds, source = tuple("local" if bool(p) else "global" for p in pattern), "the file"
        elif window and isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
            kinds, source = layer_kinds(layers, pattern, window), "the file"
        rope_scale, caveats = rope_scaling(file, arch)
        scale = number("attention.scale")
        if scale is None:
            scale = 1.0 / float(np.sqrt(float(head_dim))) if family.scaled_embedding else 0.0
        config = cls(
            architecture=arch,
            num_layers=layers,
            hidden_size=hidden,
            intermediate_size=number("feed_forward_length"),
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=declared_vocab or tokens,
            context_length=number("context_length"),
            rope_theta=number("rope.freq_base"),
            rms_norm_eps=number("attention.layer_norm_rms_epsilon"),
            # A Hugging Face folder holds Q/K in the halves layout already.
            permuted_qk=family.permuted_qk and getattr(file, "llama_cpp_layout", True),
            qkv_bias=family.qkv_bias,
            qk_norm=family.qk_norm,
            sandwich_norms=family.sandwich_norms,
            embedding_scale=float(np.sqrt(np.float32(hidden))) if family.scaled_embedding else 1.0,
            activation=family.activation,
            sliding_window=window,
            layer_kinds=kinds,
            layer_pattern_source=source if window else "",
            local_rope_theta=float(number("rope.freq_base_swa") or family.local_rope_theta),
            attention_scale=float(scale),
            attn_softcap=float(softcap),
            final_softcap=float(final_cap),
            fused=family.fused,
            rope_scale=rope_scale,
            caveats=caveats,
        )
        check_tensors(file, config)
        return config


def layer_shapes(config: DecoderConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of one layer, by GGUF name, with its (out, in) shape."""
    d, ff = config.hidden_size, config.intermediate_size
    q_out, kv_out = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
    shapes = {
        "attn_norm.weight": (d,),
        "attn_q.weight": (q_out, d),
        "attn_k.weight": (kv_out, d),
        "attn_v.weight": (kv_out, d),
        "attn_output.weight": (d, q_out),
        "ffn_norm.weight": (d,),
        "ffn_gate.weight": (ff, d),
        "ffn_up.weight": (ff, d),
        "ffn_down.weight": (d, ff),
    }
    if config.fused:  # Phi-3: what three and two matrices hold elsewhere, in one each
        for name in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight"):
            del shapes[name]
        shapes |= {"attn_qkv.weight": (q_out + 2 * kv_out, d), "ffn_up.weight": (2 * ff, d)}
    if config.qkv_bias:
        shapes |= {"attn_q.bias": (q_out,), "attn_k.bias": (kv_out,), "attn_v.bias": (kv_out,)}
    if config.sandwich_norms:
        shapes |= {"post_attention_norm.weight": (d,), "post_ffw_norm.weight": (d,)}
    if config.qk_norm:
        shapes |= {
            "attn_q_norm.weight": (config.head_dim,),
            "attn_k_norm.weight": (config.head_dim,),
        }
    return {f"blk.{layer}.{name}": shape for name, shape in shapes.items()}


def check_tensors(file: GGUFFile, config: DecoderConfig) -> None:
    """Every tensor the config calls for is present with its shape; else one ModelError."""
    present = sum(1 for name in file.tensors if name.startswith("blk."))
    if present < config.num_layers:  # checked before listing per-layer names
        raise ModelError(
            f"{file.path}: block_count is {config.num_layers} but the file holds only "
            f"{present} layer tensors; the metadata does not match the weights."
        )
    expected = {
        "token_embd.weight": (config.vocab_size, config.hidden_size),
        "output_norm.weight": (config.hidden_size,),
    }
    if file.has("output.weight"):
        expected["output.weight"] = (config.vocab_size, config.hidden_size)
    if file.has("rope_freqs.weight"):
        expected["rope_freqs.weight"] = (config.head_dim // 2,)
    for layer in range(config.num_layers):
        expected |= layer_shapes(config, layer)
    for name, shape in expected.items():
        if not file.has(name):
            raise ModelError(
                f"{file.path}: tensor {name!r} is missing; it is not a complete model."
            )
        if file.shape(name) != shape:
            raise ModelError(
                f"{file.path}: tensor {name!r} has shape {file.shape(name)} but the metadata "
                f"implies {shape}; the file is inconsistent."
            )
        if not file.can_dequantize(name):
            raise ModelError(
                f"{file.path}: tensor {name!r} is stored as {file.type_name(name)}, which cannot "
                "be read as weights; expected F32, F16 or a quantized type."
            )
