"""A Llama-family decoder's configuration and weights, read from a GGUF file.

``DecoderConfig.from_gguf`` reads the sizes from the file's metadata and checks
them against its tensors before anything is allocated. ``DecoderWeights`` hands
out one layer at a time as float32 (PyTorch layout, a Linear's weight is (out, in)):
dequantized on first use and kept while the layers kept so far fit a memory
budget; past it, a layer is dequantized again each time (streamed), so a model
larger than the budget still runs in about file size + one layer of float32.

**The RoPE trap.** llama.cpp's converter permutes the rows of Q and K of a
``llama`` model so that its rotary embedding can rotate *adjacent* pairs
(dims 2i, 2i+1). We undo that permutation here, as transformers does when it
reads a GGUF, so every head's query and key are in Hugging Face's layout, where
RoPE rotates *halves* (dim i with dim i + d/2). ``qwen2`` and ``qwen3`` files are not
permuted (llama.cpp rotates halves for them), so they are read as stored.

**Llama 3's RoPE scaling** is not metadata in a GGUF: llama.cpp's converter stores the
per-frequency factors as a ``rope_freqs.weight`` tensor (d/2 values; frequency i is divided
by factor i), which :attr:`DecoderWeights.rope_factors` reads when the file has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attn_explorer.models.decoder.families import FAMILIES, layer_kinds
from attn_explorer.models.decoder.file_settings import rope_scaling, window_and_caps
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.dequantize import dequantize_fast, finite_by_scales
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.gguf_metadata import (
    check_vocabulary_sizes,
    describe,
    embedding_shape_error,
    metadata_value,
    refuse,
)
from attn_explorer.models.formats.qk_permutation import join_rows, unpermute_rows

#: Every architecture the reader runs (``families.py`` says what each one changes).
ARCHITECTURES = FAMILIES

#: Default budget for dequantized layers kept in memory (float32 bytes).
DEFAULT_BUDGET_BYTES = 2 << 30


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


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer in float32, PyTorch layout, Q and K in the halves RoPE layout.

    Q, K and V are stored as one (H·d + 2·H_kv·d, hidden) matrix; ``query``, ``key``
    and ``value`` are row slices of it (views, no copies). A one-token decode step
    runs one matmul for the three (bitwise equal for one row, 1.2 ms instead of 2.0 ms
    over SmolLM2's 30 layers); a longer pass runs the three slices, whose rounding is
    then that of three separate matmuls, as before.
    """

    attn_norm: np.ndarray
    qkv: np.ndarray  # (H·d + 2·H_kv·d, hidden): query rows, then key rows, then value rows
    attn_output: np.ndarray
    ffn_norm: np.ndarray
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray
    query_rows: int  # H·d
    kv_rows: int  # H_kv·d
    qkv_bias: np.ndarray | None = None  # (H·d + 2·H_kv·d,)
    q_norm: np.ndarray | None = None  # (d,): Qwen3's per-head RMSNorm of q, before RoPE
    k_norm: np.ndarray | None = None  # (d,): the same for k
    post_attn_norm: np.ndarray | None = None  # (hidden,): Gemma's norm of the attention output
    post_ffn_norm: np.ndarray | None = None  # (hidden,): and of the MLP output

    @classmethod
    def fuse(
        cls,
        attn_norm: np.ndarray,
        qkv: np.ndarray,
        kv_rows: int,
        attn_output: np.ndarray,
        ffn_norm: np.ndarray,
        gate: np.ndarray,
        up: np.ndarray,
        down: np.ndarray,
        biases: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        qk_norms: tuple[np.ndarray, np.ndarray] | None = None,
        post_norms: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> LayerWeights:
        """The layer from its weights (PyTorch layout): Q, K and V already joined in ``qkv``
        (Q and K in the halves layout, see :meth:`DecoderWeights.layer`), their biases joined
        here, the optional norms unpacked."""
        return cls(
            attn_norm=attn_norm,
            qkv=qkv,
            attn_output=attn_output,
            ffn_norm=ffn_norm,
            gate=gate,
            up=up,
            down=down,
            query_rows=qkv.shape[0] - 2 * kv_rows,
            kv_rows=kv_rows,
            qkv_bias=None if biases is None else np.concatenate(biases),
            q_norm=None if qk_norms is None else qk_norms[0],
            k_norm=None if qk_norms is None else qk_norms[1],
            post_attn_norm=None if post_norms is None else post_norms[0],
            post_ffn_norm=None if post_norms is None else post_norms[1],
        )

    def _qkv_slices(self) -> tuple[slice, slice, slice]:
        q, kv = self.query_rows, self.kv_rows
        return slice(0, q), slice(q, q + kv), slice(q + kv, q + 2 * kv)

    @property
    def query(self) -> np.ndarray:
        return self.qkv[self._qkv_slices()[0]]

    @property
    def key(self) -> np.ndarray:
        return self.qkv[self._qkv_slices()[1]]

    @property
    def value(self) -> np.ndarray:
        return self.qkv[self._qkv_slices()[2]]

    def bias(self, index: int) -> np.ndarray | None:
        """Query (0), key (1) or value (2) bias, or None when the layer has none."""
        return None if self.qkv_bias is None else self.qkv_bias[self._qkv_slices()[index]]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))


class DecoderWeights:
    """Layers on demand: kept while they fit ``budget_bytes``, dequantized anew past it."""

    def __init__(
        self, file: GGUFFile, config: DecoderConfig, budget_bytes: int = DEFAULT_BUDGET_BYTES
    ) -> None:
        self.file = file
        self.config = config
        self.budget_bytes = budget_bytes
        self._layers: dict[int, LayerWeights] = {}
        self.kept_bytes = 0
        self.dequantized = 0  # how many times a layer was dequantized (tests read this)
        self.final_norm = file.dequantize("output_norm.weight")
        #: Llama 3's per-frequency RoPE divisors (d/2,), or None (see the module doc).
        self.rope_factors: np.ndarray | None = (
            file.dequantize("rope_freqs.weight") if file.has("rope_freqs.weight") else None
        )
        if config.rope_scale != 1.0:  # linear scaling: every global frequency divided too
            ones = np.ones(config.head_dim // 2, dtype=np.float32)
            factors = ones if self.rope_factors is None else self.rope_factors
            self.rope_factors = factors * np.float32(config.rope_scale)
        embedding_bytes = config.vocab_size * config.hidden_size * 4
        self._embedding: np.ndarray | None = None
        if embedding_bytes <= budget_bytes // 2:
            self._embedding = self.dequantize("token_embd.weight")  # (vocab, hidden)
            self.kept_bytes += embedding_bytes
        self.head_name = "output.weight" if file.has("output.weight") else "token_embd.weight"
        self.tied = self.head_name == "token_embd.weight"
        self._head: np.ndarray | None = self._embedding if self.tied else None
        if not self.tied and self.kept_bytes + embedding_bytes <= budget_bytes // 2:
            self._head = self.dequantize(self.head_name)
            self.kept_bytes += embedding_bytes

    def dequantize(self, name: str, out: np.ndarray | None = None, heads: int = 0) -> np.ndarray:
        """A whole tensor as float32 (out, in), in big chunks of blocks (``formats.dequantize``).

        ``out``: written there (a C-contiguous float32 array of the tensor's shape) and
        returned. ``heads`` > 0: a query or key weight in llama.cpp's permuted layout, whose
        rows come out in the halves layout (``unpermute_rows``), written in place as they are
        dequantized when the fast path takes the type.
        """
        fast = None
        if getattr(self.file, "llama_cpp_layout", True):  # a GGUF: its blocks, in big chunks
            data = self.file.tensors[name].data
            fast = dequantize_fast(data, self.file.type_name(name), out=out, heads=heads)
        if fast is None:
            values = self.file.dequantize(name)  # checked finite there
            if heads:
                values = unpermute_rows(values, heads)
            if out is not None:
                out[...] = values
                values = out
        elif finite_by_scales(data, self.file.type_name(name)):
            values = fast  # every value finite, known from the blocks' scales
        else:
            values = self.file.refuse_non_finite(name, fast)  # by name, never NaN downstream
        self.file.release(name)  # its quantized pages: read, not needed resident any more
        return values

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """(T,) ids -> (T, hidden) rows of the embedding (only those rows are dequantized)."""
        if self._embedding is not None:
            kept: np.ndarray = self._embedding[ids]
            return kept
        rows = self.file.dequantize("token_embd.weight", ids)
        self.file.release("token_embd.weight")
        return rows

    def logits(self, x: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """(T, hidden) -> (T, vocab): the output head, in row chunks when it is not kept."""
        if self._head is not None:
            logits: np.ndarray = x @ self._head.T  # (T, hidden) @ (hidden, vocab)
            return logits
        out = np.empty((x.shape[0], self.config.vocab_size), dtype=np.float32)
        for start in range(0, self.config.vocab_size, chunk):
            rows = np.arange(start, min(start + chunk, self.config.vocab_size))
            out[:, rows] = x @ self.file.dequantize(self.head_name, rows).T
            self.file.release(self.head_name)
        return out

    def layer(self, index: int) -> LayerWeights:
        """Layer ``index`` in float32; kept if it fits the budget."""
        if index in self._layers:
            return self._layers[index]
        c = self.config
        prefix = f"blk.{index}."
        kv_rows = c.num_kv_heads * c.head_dim

        def tensor(name: str) -> np.ndarray:
            return self.dequantize(prefix + name)

        if c.fused:  # Phi-3: rows of Q, then K, then V; gate rows, then up rows
            qkv, gate_up = tensor("attn_qkv.weight"), tensor("ffn_up.weight")
            if c.permuted_qk:  # no such family today; kept as the separate weights have it
                q, k, v = np.split(qkv, [c.num_heads * c.head_dim, qkv.shape[0] - kv_rows])
                qkv = join_rows([(q, c.num_heads), (k, c.num_kv_heads), (v, 0)])
            gate, up = np.split(gate_up, 2)
        else:  # Q, K and V dequantized straight into their rows of one matrix
            qkv = np.empty((c.num_heads * c.head_dim + 2 * kv_rows, c.hidden_size), np.float32)
            q_end, k_end = qkv.shape[0] - 2 * kv_rows, qkv.shape[0] - kv_rows
            heads = (c.num_heads, c.num_kv_heads) if c.permuted_qk else (0, 0)
            self.dequantize(prefix + "attn_q.weight", qkv[:q_end], heads[0])
            self.dequantize(prefix + "attn_k.weight", qkv[q_end:k_end], heads[1])
            self.dequantize(prefix + "attn_v.weight", qkv[k_end:])
            gate, up = tensor("ffn_gate.weight"), tensor("ffn_up.weight")
        biases = None
        if c.qkv_bias:
            biases = (tensor("attn_q.bias"), tensor("attn_k.bias"), tensor("attn_v.bias"))
        if c.permuted_qk and biases is not None:  # as the weights are
            biases = (
                unpermute_rows(biases[0], c.num_heads),
                unpermute_rows(biases[1], c.num_kv_heads),
                biases[2],
            )
        weights = LayerWeights.fuse(
            attn_norm=tensor("attn_norm.weight"),
            qkv=qkv,
            kv_rows=kv_rows,
            attn_output=tensor("attn_output.weight"),
            ffn_norm=tensor("ffn_norm.weight"),
            gate=gate,
            up=up,
            down=tensor("ffn_down.weight"),
            biases=biases,
            qk_norms=(
                (tensor("attn_q_norm.weight"), tensor("attn_k_norm.weight")) if c.qk_norm else None
            ),
            post_norms=(
                (tensor("post_attention_norm.weight"), tensor("post_ffw_norm.weight"))
                if c.sandwich_norms
                else None
            ),
        )
        self.dequantized += 1
        if self.kept_bytes + weights.nbytes <= self.budget_bytes:
            self._layers[index] = weights
            self.kept_bytes += weights.nbytes
        return weights
