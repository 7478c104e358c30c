"""Issue 12, item 7: ``attn-explorer export --model`` on a broken folder: one line, exit 2."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert


def breaks(folder, how: str) -> None:
    """Break the tiny model in ``folder`` in one of the ways issue 12 found."""
    weights = folder / "model.safetensors"
    if how == "nested header":
        header = b"[" * 100_000 + b"]" * 100_000
        weights.write_bytes(len(header).to_bytes(8, "little") + header)
    elif how == "shape 2**64":
        header = json.dumps({"w": {"dtype": "F32", "shape": [2**64], "data_offsets": [0, 4]}})
        weights.write_bytes(len(header).to_bytes(8, "little") + header.encode() + b"\0" * 4)
    elif how == "weights are a folder":
        weights.unlink()
        weights.mkdir()
    elif how == "config not UTF-8":
        (folder / "config.json").write_bytes(b'{"model_type": "\xff"}')
    elif how == "eps 1e309":
        text = json.dumps(tiny_config(layer_norm_eps="E")).replace('"E"', "1e309")
        (folder / "config.json").write_text(text)
    elif how == "a million layers":
        (folder / "config.json").write_text(json.dumps(tiny_config(num_hidden_layers=10**6)))
    elif how == "config is a FIFO":
        (folder / "config.json").unlink()
        os.mkfifo(folder / "config.json")
    elif how == "huge integer":
        text = json.dumps(tiny_config(hidden_size="N")).replace('"N"', "8" * 5000)
        (folder / "config.json").write_text(text)


HOW = [
    "nested header",
    "shape 2**64",
    "weights are a folder",
    "config not UTF-8",
    "eps 1e309",
    "a million layers",
    "config is a FIFO",
    "huge integer",
]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("fmt", ["npz", "png"])
def test_broken_model_folder_is_one_line_exit_2(tmp_path, how, fmt):
    folder = write_tiny_bert(tmp_path / "model")
    breaks(folder, how)
    try:
        args = ["--model", str(folder), "--text", "the cat sat", "--out", str(tmp_path / "out")]
        result = subprocess.run(
            [sys.executable, "-m", "attn_explorer", "export", *args, "--format", fmt],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
            check=False,
        )
    finally:
        with contextlib.suppress(OSError):  # release a reader stuck on the FIFO (a bug)
            os.close(os.open(folder / "config.json", os.O_WRONLY | os.O_NONBLOCK))
    assert result.returncode == 2, (result.returncode, result.stderr[-1500:])
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("attn-explorer export: error: --model: ")
    assert str(folder) in result.stderr  # the message names the file
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
