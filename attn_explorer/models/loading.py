"""One ``load_model`` for both families: a BERT folder, or a GGUF decoder file.

A path ending in ``.gguf`` is a decoder; so is a folder without ``config.json``
that holds exactly one ``.gguf`` file. Anything else is read as a BERT folder.
"""

from __future__ import annotations

from pathlib import Path

from attn_explorer.models.decoder.llama import DecoderModel, load_gguf
from attn_explorer.models.encoder.bert import BertModel
from attn_explorer.models.encoder.bert import load_model as load_bert
from attn_explorer.models.errors import ModelError

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
        return load_gguf(gguf)  # a folder, FIFO or device named .gguf is said to be one
    return load_bert(location)
