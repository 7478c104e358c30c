"""A Hugging Face decoder folder (config.json, *.safetensors, tokenizer.json) read as a GGUF is.

The decoder reads a model through a handful of calls: metadata by llama.cpp's key names
(``llama.block_count``), tensors by llama.cpp's names (``blk.0.attn_q.weight``) as float32
in (out, in) layout. :class:`HFDecoderFolder` answers the same calls from a folder, so the
same forward runs on the same weights whichever file they came in:

- ``config.json`` -> the keys llama.cpp's converter would write, from ``config.json`` alone
  (the sliding window and each layer's kind from ``sliding_window`` / ``layer_types``, as
  transformers runs them; Llama 3's ``rope_type: llama3`` as the factors the converter would
  store; Gemma's ``query_pre_attn_scalar`` as the attention scale);
- ``model.safetensors`` or the shards a ``model.safetensors.index.json`` names, F32, F16 or
  BF16 -> float32, HF names mapped to llama.cpp's (Gemma's norms given their "1 +", as the
  converter stores them);
- Q and K are in Hugging Face's halves layout already, so ``llama_cpp_layout`` is False and
  nothing is un-permuted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.config import MAX_CONFIG_BYTES, read_model_text
from attn_explorer.models.formats.safetensors import SafetensorsFile

#: config.json ``model_type`` -> the family the decoder runs (see decoder/families.py).
MODEL_TYPES = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "phi3": "phi3",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
}

#: HF layer tensor (after ``model.layers.N.``) -> llama.cpp's (after ``blk.N.``).
LAYER_TENSORS = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def llama3_rope_factors(head_dim: int, theta: float, rope: dict[str, Any]) -> np.ndarray:
    """The (d/2,) frequency divisors of ``rope_type: llama3``, as llama.cpp's converter writes
    them into ``rope_freqs.weight`` (``LlamaModel.generate_extra_tensors``)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
    factor = float(rope.get("factor", 8.0))
    low, high = float(rope.get("low_freq_factor", 1.0)), float(rope.get("high_freq_factor", 4.0))
    old_context = float(rope.get("original_max_position_embeddings", 8192))
    low_wavelen, high_wavelen = old_context / low, old_context / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / float(freq)
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def is_decoder_folder(folder: Path) -> bool:
    """True if ``folder`` has a decoder ``config.json``, safetensors weights and a tokenizer."""
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        return False
    if not any(folder.glob("*.safetensors")):
        return False
    try:
        config = json.loads(read_model_text(folder / "config.json", MAX_CONFIG_BYTES, "config"))
    except (ModelError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and config.get("model_type") in MODEL_TYPES


class HFDecoderFolder:
    """A decoder folder answering the decoder's GGUF-shaped calls (see the module doc)."""

    #: Q/K rows are in HF's halves layout: nothing to un-permute.
    llama_cpp_layout = False

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder)
        raw = read_model_text(self.path / "config.json", MAX_CONFIG_BYTES, "configuration")
        try:
            config = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ModelError(f"{self.path / 'config.json'}: not valid JSON ({exc}).") from None
        if not isinstance(config, dict):
            raise ModelError(f"{self.path / 'config.json'}: expected a JSON object.")
        model_type = config.get("model_type")
        if model_type not in MODEL_TYPES:
            raise ModelError(
                f"{self.path / 'config.json'}: model_type {model_type!r} is not a decoder this "
                f"app runs; supported: {', '.join(sorted(MODEL_TYPES))}."
            )
        self.config = config
        self.architecture = MODEL_TYPES[model_type]
        self._files = [SafetensorsFile(p) for p in self._weight_files()]
        self._where: dict[str, tuple[SafetensorsFile, str]] = {}
        gemma = self.architecture.startswith("gemma")
        self._plus_one: set[str] = set()
        for file in self._files:
            for hf_name in file.names():
                name = self._gguf_name(hf_name, gemma)
                if name is not None:
                    self._where[name] = (file, hf_name)
                    if gemma and name.endswith("norm.weight"):
                        self._plus_one.add(name)
        self._extra: dict[str, np.ndarray] = {}
        self._metadata = self._read_metadata()

    def _weight_files(self) -> list[Path]:
        index = self.path / "model.safetensors.index.json"
        if index.is_file():
            data = json.loads(read_model_text(index, MAX_CONFIG_BYTES, "weights index"))
            shards = sorted(set(dict(data.get("weight_map", {})).values()))
            if not shards:
                raise ModelError(f"{index}: its weight_map names no files.")
            return [self.path / str(shard) for shard in shards]
        files = sorted(self.path.glob("*.safetensors"))
        if not files:
            raise ModelError(f"{self.path}: no .safetensors weights in this folder.")
        return files

    @staticmethod
    def _gguf_name(hf_name: str, gemma: bool) -> str | None:
        name = hf_name.removeprefix("model.language_model.").removeprefix("model.")
        if name == "embed_tokens.weight":
            return "token_embd.weight"
        if name == "norm.weight":
            return "output_norm.weight"
        if hf_name == "lm_head.weight":
            return "output.weight"
        parts = name.split(".")
        if parts[0] != "layers" or len(parts) < 3:
            return None
        rest = ".".join(parts[2:])
        if gemma and rest == "post_attention_layernorm.weight":
            return f"blk.{parts[1]}.post_attention_norm.weight"  # Gemma's norm after attention
        mapped = LAYER_TENSORS.get(rest)
        return None if mapped is None else f"blk.{parts[1]}.{mapped}"

    def _read_metadata(self) -> dict[str, Any]:
        c, arch = self.config, self.architecture
        heads = int(c.get("num_attention_heads", 0))
        hidden = int(c.get("hidden_size", 0))
        head_dim = int(c.get("head_dim") or (hidden // heads if heads else 0))
        rope = dict(c.get("rope_parameters") or c.get("rope_scaling") or {})
        local_rope = dict(rope.get("sliding_attention", {}))
        rope = dict(rope.get("full_attention", rope))
        theta = float(rope.get("rope_theta") or c.get("rope_theta") or 10000.0)
        meta: dict[str, Any] = {
            "general.architecture": arch,
            "general.name": self.path.name,
            f"{arch}.block_count": c.get("num_hidden_layers"),
            f"{arch}.context_length": c.get("max_position_embeddings"),
            f"{arch}.embedding_length": hidden,
            f"{arch}.feed_forward_length": c.get("intermediate_size"),
            f"{arch}.attention.head_count": heads,
            f"{arch}.attention.head_count_kv": c.get("num_key_value_heads", heads),
            f"{arch}.attention.key_length": head_dim,
            f"{arch}.attention.value_length": head_dim,
            f"{arch}.rope.dimension_count": head_dim,
            f"{arch}.rope.freq_base": theta,
            f"{arch}.attention.layer_norm_rms_epsilon": c.get("rms_norm_eps"),
            f"{arch}.vocab_size": c.get("vocab_size"),
        }
        window = c.get("sliding_window")
        if c.get("use_sliding_window") is False:
            window = None  # Qwen2: the window is declared but switched off
        if window:
            meta[f"{arch}.attention.sliding_window"] = int(window)
            layers = int(c.get("num_hidden_layers", 0))
            kinds = c.get("layer_types") or ["sliding_attention"] * layers
            meta[f"{arch}.attention.sliding_window_pattern"] = [
                kind == "sliding_attention" for kind in kinds
            ]
        if local_rope.get("rope_theta"):
            meta[f"{arch}.rope.freq_base_swa"] = float(local_rope["rope_theta"])
        if c.get("query_pre_attn_scalar"):
            meta[f"{arch}.attention.scale"] = float(c["query_pre_attn_scalar"]) ** -0.5
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if c.get(key):
                meta[f"{arch}.{key}"] = float(c[key])
        if rope.get("rope_type") == "llama3":
            self._extra["rope_freqs.weight"] = llama3_rope_factors(head_dim, theta, rope)
        elif rope.get("rope_type", rope.get("type")) not in (None, "default"):  # as the converter
            meta[f"{arch}.rope.scaling.type"] = str(rope.get("rope_type", rope.get("type")))
            meta[f"{arch}.rope.scaling.factor"] = float(rope.get("factor") or 0.0)
        template = self.path / "tokenizer_config.json"
        if template.is_file():
            try:
                settings = json.loads(read_model_text(template, MAX_CONFIG_BYTES, "settings"))
            except (ModelError, ValueError, RecursionError):
                settings = {}
            if isinstance(settings, dict) and isinstance(settings.get("chat_template"), str):
                meta["tokenizer.chat_template"] = settings["chat_template"]
        if c.get("tie_word_embeddings", False):
            self._where.pop("output.weight", None)
        return meta

    # -- the decoder's calls ---------------------------------------------------------------
    @property
    def tensors(self) -> dict[str, None]:
        """Every tensor's llama.cpp name (the decoder counts the layers' tensors)."""
        return dict.fromkeys([*self._where, *self._extra])

    @property
    def scalars(self) -> dict[str, Any]:
        """The metadata, by llama.cpp's key names (what ``gguf_metadata`` checks)."""
        return self._metadata

    def array_header(self, key: str) -> tuple[str, int] | None:
        """(item type, count) of an array value, as ``GGUFFile.array_header`` gives it."""
        value = self._metadata.get(key)
        if not isinstance(value, list):
            return None
        kind = "string" if all(isinstance(v, str) for v in value) else "integer"
        return kind, len(value)

    def can_dequantize(self, name: str) -> bool:
        """True for float tensors (what a folder's weights are); an integer one is not weights."""
        return self.type_name(name) in ("F32", "F16", "BF16", "F64")

    def refuse_non_finite(self, name: str, values: np.ndarray) -> np.ndarray:
        """``values`` if finite (safetensors' reader already refuses NaN and ±inf by name)."""
        return values

    def get(self, key: str, default: Any = None) -> Any:
        value = self._metadata.get(key)
        return default if value is None else value

    def has(self, name: str) -> bool:
        return name in self._where or name in self._extra

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self._extra:
            return self._extra[name].shape
        file, hf_name = self._where[name]
        return tuple(file.shape(hf_name))

    def type_name(self, name: str) -> str:
        if name in self._extra:
            return "F32"
        file, hf_name = self._where[name]
        return file.dtype(hf_name)

    def type_names(self) -> list[str]:
        """Each tensor's stored type, for the model view's mix."""
        return [self.type_name(name) for name in self._where]

    def dequantize(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` (or its ``rows``) as float32, (out, in)."""
        if name in self._extra:
            values = self._extra[name]
        else:
            file, hf_name = self._where[name]
            values = file.get(hf_name)
        if rows is not None:
            values = values[rows]
        values = np.ascontiguousarray(values, dtype=np.float32)
        if name in self._plus_one:
            values = values + np.float32(1)  # Gemma's "1 +", as llama.cpp stores its norms
        return values

    def release(self, name: str) -> None:
        """Nothing to drop: safetensors pages are the float data itself."""
