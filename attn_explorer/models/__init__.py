"""Real models in pure numpy: BERT encoders and GGUF decoders; tokenize, run, look inside.

Never imports Qt. Public API:

- ``load_model(path) -> BertModel | DecoderModel``: a BERT folder, or a ``.gguf`` file
  (a Llama-family decoder: ``model.attention(text)`` adds ``logits`` and ``kv_heads``,
  ``model.generate(prompt, max_new_tokens=20, chat=False) -> Generation``)
- ``model.attention(text, text_pair=None,
  strategy="batched") -> ModelAttention`` with ``tokens``, ``query``/``key``/``value``
  (L, H, T, d_head), ``scores``/``weights`` (L, H, T, T), ``hidden_states``,
  ``last_hidden_state``, ``truncated``/``notice``, ``summaries()`` and ``head(l, h)``
  (a ``TakenHead`` dict: what the explorer takes)
- ``find_models() -> list[FoundModel]``: BERT folders in the hub cache and model packages
- ``head_summaries(weights, tokens) -> HeadSummaries``
- ``SafetensorsFile`` / ``save_safetensors``, ``WordPieceTokenizer``, ``read_config``
- ``ModelError`` (a bad model folder: file and field) and ``TextError`` (bad text,
  over ``MAX_TEXT_CHARS``), both ``ValueError``
"""

from attn_explorer.models.decoder.llama import DecoderModel, Generation, load_gguf
from attn_explorer.models.discovery import FoundModel, find_models, is_bert_folder
from attn_explorer.models.encoder.bert import BertModel, expected_shapes
from attn_explorer.models.encoder.layers import erf, gelu, layer_norm
from attn_explorer.models.encoder.tokenizer import Encoding, WordPieceTokenizer
from attn_explorer.models.errors import MAX_TEXT_CHARS, ModelError, TextError
from attn_explorer.models.formats.config import (
    BERT_MODEL_TYPES,
    BertConfig,
    TokenizerConfig,
    read_config,
    read_tokenizer_config,
)
from attn_explorer.models.formats.safetensors import SafetensorsFile, save_safetensors
from attn_explorer.models.loading import AnyModel, load_model
from attn_explorer.models.results import ForwardResult, ModelAttention, TakenHead
from attn_explorer.models.summaries import SUMMARY_NAMES, HeadSummaries, head_summaries

__all__ = [
    "BERT_MODEL_TYPES",
    "MAX_TEXT_CHARS",
    "SUMMARY_NAMES",
    "AnyModel",
    "BertConfig",
    "BertModel",
    "DecoderModel",
    "Encoding",
    "ForwardResult",
    "FoundModel",
    "Generation",
    "HeadSummaries",
    "ModelAttention",
    "ModelError",
    "SafetensorsFile",
    "TakenHead",
    "TextError",
    "TokenizerConfig",
    "WordPieceTokenizer",
    "erf",
    "expected_shapes",
    "find_models",
    "gelu",
    "head_summaries",
    "is_bert_folder",
    "layer_norm",
    "load_gguf",
    "load_model",
    "read_config",
    "read_tokenizer_config",
    "save_safetensors",
]
