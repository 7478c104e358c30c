"""find_models over a fake hub cache, and the models package stays free of Qt."""

import subprocess
import sys

from attn_explorer.models import find_models, is_bert_folder
from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert


def test_hub_cache_snapshots_are_found(tmp_path, monkeypatch):
    hub = tmp_path / "hf" / "hub"
    write_tiny_bert(hub / "models--org--tiny-bert" / "snapshots" / "abc123")
    write_tiny_bert(
        hub / "models--org--gpt" / "snapshots" / "def456", config=tiny_config(model_type="gpt2")
    )
    (hub / "models--org--empty" / "snapshots" / "0").mkdir(parents=True)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    found = [m for m in find_models() if m.source == "hub cache"]
    assert [m.name for m in found] == ["org/tiny-bert"]
    assert found[0].folder == hub / "models--org--tiny-bert" / "snapshots" / "abc123"


def test_hf_hub_cache_variable_wins(tmp_path, monkeypatch):
    write_tiny_bert(tmp_path / "cache" / "models--x--y" / "snapshots" / "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    assert "x/y" in [m.name for m in find_models()]


def test_is_bert_folder(tmp_path):
    folder = write_tiny_bert(tmp_path / "m")
    assert is_bert_folder(folder)
    (folder / "config.json").write_text("not json")
    assert not is_bert_folder(folder)
    assert not is_bert_folder(tmp_path / "missing")


def test_models_package_does_not_import_qt():
    code = (
        "import sys, attn_explorer.models, attn_explorer.cli.model_export\n"
        "bad = [m for m in ('PySide6', 'pyqtgraph', 'torch') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
