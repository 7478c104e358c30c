"""A Llama-family decoder's weights, read from a GGUF file.

Its sizes come first, read and checked by ``DecoderConfig.from_gguf`` (``config.py``)
before anything is allocated. ``DecoderWeights`` hands out one layer at a time as float32
(PyTorch layout, a Linear's weight is (out, in)): dequantized on first use and kept while
the layers kept so far fit a memory budget; past it, a layer is dequantized again each time
(streamed), so a model larger than the budget still runs in about file size + one layer of
float32. The first forward reads every layer it will keep before its first product
(:meth:`DecoderWeights.read_ahead`).

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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.models.decoder.config import DecoderConfig, layer_shapes
from attn_explorer.models.formats.dequantize import dequantize_fast, finite_by_scales
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.formats.qk_permutation import join_rows, unpermute_rows

#: Default budget for dequantized layers kept in memory (float32 bytes).
DEFAULT_BUDGET_BYTES = 2 << 30


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
        self._read_ahead_done = False  # read_ahead has read every layer it will keep
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

    def layer_bytes(self, index: int) -> int:
        """What layer ``index`` takes in float32 (its tensors' values × 4), from the shapes."""
        shapes = layer_shapes(self.config, index).values()
        return 4 * sum(int(np.prod(shape, dtype=np.int64)) for shape in shapes)

    def read_ahead(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Dequantize now, in order, every layer the budget will keep and not yet read.

        A forward calls this before its arithmetic. Reading a layer between two layers'
        matmuls costs more than reading it beforehand, with the same bits. BLAS's threads
        spin for a while after each product. The dequantization's two threads then share
        the cores with them. SmolLM2's first forward, measured: 0.53 s of wall time and
        1.0 s of CPU interleaved, 0.40 s and 0.63 s read ahead.

        Layers past the budget are not read ahead: they stream, dequantized in the loop
        as before. ``should_stop()`` is heard between layers; true ends the reading
        early, and the caller's own check then stops. Call it under the model's lock
        (``one_call_at_a_time``) as the forward does: ``layer`` keeps what it reads.
        """
        if self._read_ahead_done:
            return
        for index in range(self.config.num_layers):
            if index in self._layers:
                continue
            if self.kept_bytes + self.layer_bytes(index) > self.budget_bytes:
                break  # every layer is this size: none after it fits either
            self.layer(index)
            if should_stop is not None and should_stop():
                return
        self._read_ahead_done = True

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
