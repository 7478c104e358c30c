"""One ``load_model`` for every model: a BERT folder, a GGUF decoder, a Hugging Face decoder folder.

A path ending in ``.gguf`` is a decoder; so is a folder without ``config.json``
that holds exactly one ``.gguf`` file. A folder whose ``config.json`` names a decoder
(``model_type`` llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text) with safetensors
weights and a ``tokenizer.json`` runs the same decoder on its own weights. Anything else is
read as a BERT folder.
"""

from __future__ import annotations

from pathlib import Path

from attn_explorer.models.decoder.config import DecoderConfig
from attn_explorer.models.decoder.llama import DecoderModel, load_gguf
from attn_explorer.models.decoder.text.hf_tokenizer import HFTokenizer
from attn_explorer.models.decoder.weights import DEFAULT_BUDGET_BYTES, DecoderWeights
from attn_explorer.models.discovery import assemble_gemma3, gemma3_target
from attn_explorer.models.encoder.bert import BertModel
from attn_explorer.models.encoder.bert import load_model as load_bert
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.hf_folder import HFDecoderFolder, is_decoder_folder

AnyModel = BertModel | DecoderModel


def gguf_in(path: Path) -> Path | None:
    """The GGUF file ``path`` names (itself, or the only one in its folder), or None."""
    if path.suffix.lower() == ".gguf":
        return path
    if not path.is_dir() or (path / "config.json").exists():
        return None
    try:
        found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".gguf" and p.is_file())
    except OSError as exc:  # an unreadable folder: one sentence, not a traceback
        raise ModelError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    if len(found) > 1:
        names = ", ".join(p.name for p in found[:3])
        raise ModelError(f"{path}: holds {len(found)} GGUF files ({names}…); choose one file.")
    return found[0] if found else None


def load_model(path: str | Path) -> AnyModel:
    """Load a BERT folder (config.json, model.safetensors, vocab.txt) or a GGUF decoder.

    Raises :class:`ModelError` (a ``ValueError``) naming the file and what is wrong.
    """
    location = Path(path).expanduser()
    gguf = gguf_in(location)
    if gguf is not None:
        if not gguf.exists() and gguf == gemma3_target():
            assemble_gemma3(gguf)  # Gemma 3's package ships chunks: joined once, here
        return load_gguf(gguf)  # a folder, FIFO or device named .gguf is said to be one
    if is_decoder_folder(location):
        return load_hf_decoder(location)
    return load_bert(location)


def load_hf_decoder(folder: Path, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> DecoderModel:
    """A Hugging Face decoder folder on the GGUF decoder's forward (see hf_folder.py)."""
    source = HFDecoderFolder(folder)
    config = DecoderConfig.from_gguf(source)  # type: ignore[arg-type]  # GGUF-shaped source
    eos = source.config.get("eos_token_id")
    eos_id = eos[0] if isinstance(eos, list) and eos else eos
    tokenizer = HFTokenizer(folder, eos_id if isinstance(eos_id, int) else None)
    if tokenizer.vocab_size > config.vocab_size:
        raise ModelError(
            f"{folder}: tokenizer.json has {tokenizer.vocab_size:,} tokens but config.json's "
            f"vocab_size is {config.vocab_size:,}; the folder is inconsistent."
        )
    # The folder answers every call a GGUFFile does (hf_folder.py), without being one.
    weights = DecoderWeights(source, config, budget_bytes)  # type: ignore[arg-type]
    # The same: a GGUF-shaped source.
    model = DecoderModel(source, config, tokenizer, weights, name=folder.name)  # type: ignore[arg-type]
    if isinstance(eos, list):  # every id the model may end a turn with
        model.end_ids = model.end_ids | frozenset(i for i in eos if isinstance(i, int))
    return model
