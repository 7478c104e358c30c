"""A BERT encoder's forward pass in numpy, built on the explorer's own attention.

    embeddings = LayerNorm(word[id] + position[t] + token_type[type])
    for each layer:
        q, k, v = split into H heads (x · [W_q W_k W_v] + b): one matmul
        x = LayerNorm(x + W_o · merge(attention(q, k, v, padding mask)))
        x = LayerNorm(x + W_2 · GELU(W_1 · x))

Each layer's per-head Q, K, V, scores and weights are kept, so the model view
can show them and any head can be taken into the explorer. Everything is
float32: the weights are float32 views of the memory-mapped file, except each
layer's query, key and value, joined into one array at load (3·hidden² floats a
layer: 10 MB for MiniLM) so that one matmul projects all three.

One job: the forward pass and the weights it reads. What it returns (``ModelAttention``,
``ForwardResult``) is in :mod:`attn_explorer.models.results`; the layers, the tokenizer,
the weights file and the configuration have their own modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attn_explorer.compute import LIMITS, attention, merge_heads, split_heads
from attn_explorer.models.encoder.layers import ACTIVATION_FUNCTIONS, dense, layer_norm
from attn_explorer.models.encoder.tokenizer import Encoding, WordPieceTokenizer
from attn_explorer.models.errors import ModelError, check_text
from attn_explorer.models.formats.config import BertConfig, read_config, read_tokenizer_config
from attn_explorer.models.formats.safetensors import SafetensorsFile
from attn_explorer.models.formats.serial import OneCallAtATime, one_call_at_a_time
from attn_explorer.models.results import ForwardResult, ModelAttention

WEIGHTS_FILE = "model.safetensors"


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer's weights, PyTorch layout: a Linear's weight is (out, in).

    Query, key and value are one (3·hidden, hidden) matrix and one bias, so one
    matmul projects all three (``query``, ``key`` and ``value`` are its row blocks).
    """

    qkv: np.ndarray  # (3·H·d_head, hidden): query rows, then key rows, then value rows
    qkv_bias: np.ndarray  # (3·H·d_head,)
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: np.ndarray
    attention_norm_bias: np.ndarray
    intermediate: np.ndarray
    intermediate_bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    output_norm: np.ndarray
    output_norm_bias: np.ndarray

    @classmethod
    def fuse(cls, weights: dict[str, np.ndarray]) -> LayerWeights:
        """The layer from its separate weights by field name (see ``_LAYER_NAMES``)."""
        joined = {
            "qkv": np.concatenate([weights["query"], weights["key"], weights["value"]]),
            "qkv_bias": np.concatenate(
                [weights["query_bias"], weights["key_bias"], weights["value_bias"]]
            ),
        }
        rest = {f: w for f, w in weights.items() if not f.startswith(("query", "key", "value"))}
        return cls(**joined, **rest)

    @property
    def query(self) -> np.ndarray:
        return self.qkv[: self.qkv.shape[0] // 3]

    @property
    def key(self) -> np.ndarray:
        return self.qkv[self.qkv.shape[0] // 3 : 2 * self.qkv.shape[0] // 3]

    @property
    def value(self) -> np.ndarray:
        return self.qkv[2 * self.qkv.shape[0] // 3 :]


#: field of LayerWeights -> name under ``encoder.layer.N.``
_LAYER_NAMES = {
    "query": "attention.self.query.weight",
    "query_bias": "attention.self.query.bias",
    "key": "attention.self.key.weight",
    "key_bias": "attention.self.key.bias",
    "value": "attention.self.value.weight",
    "value_bias": "attention.self.value.bias",
    "attention_out": "attention.output.dense.weight",
    "attention_out_bias": "attention.output.dense.bias",
    "attention_norm": "attention.output.LayerNorm.weight",
    "attention_norm_bias": "attention.output.LayerNorm.bias",
    "intermediate": "intermediate.dense.weight",
    "intermediate_bias": "intermediate.dense.bias",
    "output": "output.dense.weight",
    "output_bias": "output.dense.bias",
    "output_norm": "output.LayerNorm.weight",
    "output_norm_bias": "output.LayerNorm.bias",
}


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every weight BertModel needs, by name, with the shape the config implies."""
    d, ff = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (config.vocab_size, d),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, d),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    per_layer = {
        "query": (d, d),
        "key": (d, d),
        "value": (d, d),
        "attention_out": (d, d),
        "intermediate": (ff, d),
        "intermediate_bias": (ff,),
        "output": (d, ff),
    }
    for layer in range(config.num_hidden_layers):
        for field, name in _LAYER_NAMES.items():
            shapes[f"encoder.layer.{layer}.{name}"] = per_layer.get(field, (d,))
    return shapes


def _canonical_name(name: str) -> str:
    """Map the names other exports use ('bert.' prefix, LayerNorm gamma/beta) to BertModel's."""
    if name.startswith("bert."):
        name = name[len("bert.") :]
    if "LayerNorm." in name:
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
        name = name.replace("LayerNorm.beta", "LayerNorm.bias")
    return name


#: The smallest floating-point weight (F16 / BF16) takes 2 bytes.
MIN_BYTES_PER_WEIGHT = 2


def weight_count(config: BertConfig) -> int:
    """How many numbers the weights of ``config`` hold: exact, from the sizes alone."""
    d, ff = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d
    # Q, K, V, O (d×d + d each), FFN (ff×d + ff, d×ff + d), two LayerNorms (2d each)
    per_layer = 4 * d * d + 4 * d + 2 * d * ff + ff + d + 4 * d
    return embeddings + 2 * d + config.num_hidden_layers * per_layer


def check_config_against_weights(
    config: BertConfig, tensors: SafetensorsFile, folder: Path
) -> None:
    """Refuse a config.json whose sizes the weights file cannot hold, before allocating anything.

    Compared with the header's real tensor list (names and byte count), so an
    absurd ``num_hidden_layers`` or ``hidden_size`` costs nothing: only then are
    the expected shapes listed and each weight checked.
    """
    config_path = folder / "config.json"
    layer_name = re.compile(r"encoder\.layer\.(\d{1,9})\.")
    present = {
        int(match[1])
        for name in tensors.names()
        if (match := layer_name.match(_canonical_name(name)))
    }
    needed = config.num_hidden_layers
    have = sum(1 for n in present if n < needed)  # never a loop over range(needed)
    if have < needed:
        missing = needed - have
        raise ModelError(
            f"{config_path}: num_hidden_layers is {needed} but {WEIGHTS_FILE} holds weights for "
            f"{len(present)} layers; the weights of {missing:,} layer(s) are missing."
        )
    need = weight_count(config) * MIN_BYTES_PER_WEIGHT
    if need > tensors.data_bytes:
        sizes = ", ".join(
            f"{name} {getattr(config, name):,}"
            for name in (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "intermediate_size",
                "max_position_embeddings",
                "type_vocab_size",
            )
        )
        raise ModelError(
            f"{config_path}: {sizes} call for at least {need:,} bytes of weights, but "
            f"{WEIGHTS_FILE} holds {tensors.data_bytes:,} bytes; the sizes do not match it."
        )


def read_weights(tensors: SafetensorsFile, config: BertConfig) -> dict[str, np.ndarray]:
    """Check every weight ``config`` needs in ``tensors`` (presence, shape, dtype); return them."""
    path = tensors.path
    by_name = {_canonical_name(n): n for n in tensors.names()}
    weights: dict[str, np.ndarray] = {}
    missing = []
    for name, shape in expected_shapes(config).items():
        if name not in by_name:
            missing.append(name)
            continue
        stored = by_name[name]
        if tensors.shape(stored) != shape:
            raise ModelError(
                f"{path}: weight {stored!r} has shape {tensors.shape(stored)} but config.json "
                f"implies {shape}; the weights do not belong to this configuration."
            )
        if tensors.dtype(stored) not in ("F32", "F16", "BF16", "F64"):
            raise ModelError(
                f"{path}: weight {stored!r} is {tensors.dtype(stored)}; expected floating point."
            )
        weights[name] = tensors.get(stored)
    if missing:
        shown = ", ".join(missing[:3])
        if len(missing) > 3:
            shown += f" and {len(missing) - 3} more"
        raise ModelError(
            f"{path}: {len(missing)} weight(s) that config.json calls for are missing ({shown}); "
            "is this a BertModel checkpoint with the same number of layers?"
        )
    return weights


class BertModel(OneCallAtATime):
    """A loaded BERT encoder: its config, tokenizer and (memory-mapped) weights."""

    def __init__(
        self,
        config: BertConfig,
        tokenizer: WordPieceTokenizer,
        weights: dict[str, np.ndarray],
        name: str = "",
        folder: Path | None = None,
    ) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.name = name
        self.folder = folder
        self.word_embeddings = weights["embeddings.word_embeddings.weight"]
        self.position_embeddings = weights["embeddings.position_embeddings.weight"]
        self.token_type_embeddings = weights["embeddings.token_type_embeddings.weight"]
        self.embedding_norm = weights["embeddings.LayerNorm.weight"]
        self.embedding_norm_bias = weights["embeddings.LayerNorm.bias"]
        self.layers = [
            LayerWeights.fuse(
                {f: weights[f"encoder.layer.{n}.{k}"] for f, k in _LAYER_NAMES.items()}
            )
            for n in range(config.num_hidden_layers)
        ]
        self._activation = ACTIVATION_FUNCTIONS[config.hidden_act]

    def __repr__(self) -> str:
        c = self.config
        return (
            f"BertModel({self.name!r}: {c.num_hidden_layers} layers × {c.num_attention_heads} "
            f"heads, hidden {c.hidden_size}, vocab {c.vocab_size})"
        )

    def encode(self, text: str, text_pair: str | None = None) -> Encoding:
        """Tokenize for this model, truncated to its ``max_position_embeddings``.

        Also to the explorer's token limit (``LIMITS.max_tokens``), which every
        attention head is held to.
        """
        length = min(self.config.max_position_embeddings, LIMITS.max_tokens)
        return self.tokenizer.encode(text, text_pair, length)

    @one_call_at_a_time
    def forward(
        self,
        input_ids: np.ndarray,
        token_type_ids: np.ndarray | None = None,
        attention_mask: np.ndarray | None = None,
        strategy: str = "batched",
    ) -> ForwardResult:
        """Run the encoder on (B, T) ids.

        ``attention_mask`` (B, T) is 1 for real tokens and 0 for padding: no query
        attends to a padding key. Attention arrays come back (B, L, H, …).
        """
        c = self.config
        ids = np.asarray(input_ids, dtype=np.int64)
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise ValueError(f"input_ids: expected (B, T) with T ≥ 1, got shape {ids.shape}.")
        length = ids.shape[1]
        if length > c.max_position_embeddings:
            raise ValueError(
                f"input_ids: {length} tokens is over the model's limit of "
                f"{c.max_position_embeddings}; truncate the input."
            )
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"input_ids: ids must lie in 0 … {c.vocab_size - 1}.")
        types = np.zeros_like(ids) if token_type_ids is None else np.asarray(token_type_ids)
        if types.shape != ids.shape or types.min() < 0 or types.max() >= c.type_vocab_size:
            raise ValueError("token_type_ids: must match input_ids' shape and the type vocabulary.")
        mask = None
        if attention_mask is not None:
            keep = np.asarray(attention_mask).astype(bool)
            if keep.shape != ids.shape:
                raise ValueError("attention_mask: must have input_ids' shape (B, T).")
            if not keep.all():  # without padding no key is hidden: the softmax skips masking
                mask = keep[:, None, None, :]  # (B, 1, 1, T): every head and query skips padding

        x = (
            self.word_embeddings[ids]  # (B, T, hidden)
            + self.position_embeddings[:length]  # (T, hidden), broadcast over B
            + self.token_type_embeddings[types]  # (B, T, hidden)
        )
        x = layer_norm(x, self.embedding_norm, self.embedding_norm_bias, c.layer_norm_eps)
        hidden = [x]
        per_layer: list[tuple[np.ndarray, ...]] = []
        scale = 1.0
        heads = c.num_attention_heads
        for w in self.layers:
            qkv = dense(x, w.qkv, w.qkv_bias)  # (B, T, 3·H·d_head): Q, K and V in one matmul
            q, k, v = (split_heads(part, heads) for part in np.split(qkv, 3, axis=-1))
            att = attention(q, k, v, strategy=strategy, mask=mask)  # each (B, H, T, …)
            assert att.output is not None
            scale = att.scale
            attended = dense(merge_heads(att.output), w.attention_out, w.attention_out_bias)
            x = layer_norm(x + attended, w.attention_norm, w.attention_norm_bias, c.layer_norm_eps)
            inner = self._activation(dense(x, w.intermediate, w.intermediate_bias))  # (B, T, ff)
            x = layer_norm(
                x + dense(inner, w.output, w.output_bias),
                w.output_norm,
                w.output_norm_bias,
                c.layer_norm_eps,
            )
            hidden.append(x)
            per_layer.append((q, k, v, att.scores, att.weights))
        # stack per-layer (B, H, …) arrays into (B, L, H, …)
        q, k, v, s, a = (np.stack(arrays, axis=1) for arrays in zip(*per_layer, strict=True))
        return ForwardResult(q, k, v, s, a, np.stack(hidden, axis=1), scale)

    @one_call_at_a_time
    def attention(
        self, text: str, text_pair: str | None = None, strategy: str = "batched"
    ) -> ModelAttention:
        """Tokenize ``text`` (and ``text_pair``), run the model, keep every head's attention.

        Raises :class:`TextError` (a ``ValueError``) for text that is not a str,
        too long or empty; a sentence longer than the model's
        ``max_position_embeddings`` is truncated and flagged (``truncated``, ``notice``).
        """
        check_text("text", text)
        check_text("text_pair", text_pair, optional=True)
        encoding = self.encode(text, text_pair)
        ids = np.array([encoding.input_ids], dtype=np.int64)  # (1, T)
        types = np.array([encoding.token_type_ids], dtype=np.int64)
        result = self.forward(ids, types, np.ones_like(ids), strategy=strategy)
        return ModelAttention(
            tokens=encoding.tokens,
            input_ids=ids[0],
            token_type_ids=types[0],
            query=result.query[0],
            key=result.key[0],
            value=result.value[0],
            scores=result.scores[0],
            weights=result.weights[0],
            hidden_states=result.hidden_states[0],
            scale=result.scale,
            strategy=strategy,
            model_name=self.name,
            truncated=encoding.truncated,
            full_length=encoding.full_length,
        )

    def embed(self, text: str) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence embedding (sentence-transformers' recipe)."""
        pooled = self.attention(text).last_hidden_state.mean(axis=0)
        embedding: np.ndarray = pooled / np.linalg.norm(pooled)
        return embedding


def model_name(folder: Path) -> str:
    """A readable name: 'org/name' for a hub snapshot, else the folder's name."""
    parts = folder.resolve().parts
    for index, part in enumerate(parts):
        in_snapshot = index + 2 < len(parts) and parts[index + 1] == "snapshots"
        if part.startswith("models--") and in_snapshot:
            return part[len("models--") :].replace("--", "/")
    if folder.name == "model" and folder.parent.name:
        return folder.parent.name  # a package that ships its model in <package>/model
    return folder.name


def load_model(folder: str | Path) -> BertModel:
    """Load a Hugging Face-layout BERT folder (config.json, model.safetensors, vocab.txt).

    Checks the configuration, the tokenizer files and every weight's name and
    shape before anything runs; raises :class:`ModelError` (a ``ValueError``) naming
    the file and the field if something is missing or does not fit.
    """
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ModelError(f"{path}: not a folder; choose a model folder with config.json.")
    config = read_config(path)
    tokenizer = WordPieceTokenizer.from_folder(path, read_tokenizer_config(path))
    if len(tokenizer.id_to_token) > config.vocab_size:
        raise ModelError(
            f"{path}: vocab.txt has {len(tokenizer.id_to_token)} tokens but config.json's "
            f"vocab_size is {config.vocab_size}."
        )
    weights_path = path / WEIGHTS_FILE
    if not weights_path.exists():
        found = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".h5", ".pt"))
        hint = f" (found {', '.join(found)}: only safetensors is read)" if found else ""
        raise ModelError(f"{path}: no {WEIGHTS_FILE}{hint}.")
    tensors = SafetensorsFile(weights_path)  # the header only: the data stays mapped
    check_config_against_weights(config, tensors, path)
    weights = read_weights(tensors, config)
    return BertModel(config, tokenizer, weights, name=model_name(path), folder=path)
