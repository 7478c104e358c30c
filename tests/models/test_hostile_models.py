"""Issue 12, items 3, 4, 5 and 7: a broken model folder or bad text is one ModelError / TextError.

Each names the file (and the field); none is a RecursionError, OverflowError,
IsADirectoryError, UnicodeDecodeError or TypeError, none blocks on a special
file, and absurd sizes in config.json are refused before anything is allocated.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import tracemalloc

import numpy as np
import pytest

from attn_explorer.cli.model_export import run_model_export
from attn_explorer.models import (
    MAX_TEXT_CHARS,
    ModelError,
    SafetensorsFile,
    TextError,
    load_model,
    save_safetensors,
)
from attn_explorer.models.testing.tiny_bert import tiny_config


def write_raw(path, header_text: bytes, data: bytes = b""):
    path.write_bytes(len(header_text).to_bytes(8, "little") + header_text + data)
    return path


def within(call, seconds: float = 5.0):
    """call() in a thread; the test fails (never hangs) if it takes longer."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return outcome[0]


def release(fifo) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# -- safetensors headers -----------------------------------------------------------------------
def test_deeply_nested_header(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ModelError, match=r"t\.safetensors.*nested too deeply"):
        SafetensorsFile(path)


@pytest.mark.parametrize(
    ("shape", "offsets"),
    [([2**64], [0, 4]), ([2**32, 2**32], [0, 0]), ([2**63, 0], [0, 0]), ([0, 2**70], [0, 0])],
)
def test_shapes_beyond_int64_are_refused(tmp_path, shape, offsets):
    header = {"w": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}
    path = write_raw(tmp_path / "t.safetensors", json.dumps(header).encode(), b"\0" * 4)
    with pytest.raises(ModelError, match=r"t\.safetensors: tensor 'w'"):
        SafetensorsFile(path)


def test_weights_file_that_is_a_folder(tiny_model_dir):
    weights = tiny_model_dir / "model.safetensors"
    weights.unlink()
    weights.mkdir()
    with pytest.raises(ModelError, match=r"model\.safetensors: is a folder"):
        load_model(tiny_model_dir)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "vocab.txt"])
def test_fifo_in_the_model_folder_never_blocks(tiny_model_dir, name):
    path = tiny_model_dir / name
    path.unlink()
    os.mkfifo(path)
    try:
        outcome = within(lambda: load_model(tiny_model_dir))
    finally:
        release(path)
    assert isinstance(outcome, ModelError), outcome
    assert f"{name}: is a named pipe (FIFO)" in str(outcome)


# -- config.json -------------------------------------------------------------------------------
def test_config_that_is_not_utf8_names_the_file(tiny_model_dir):
    (tiny_model_dir / "config.json").write_bytes(b'{"model_type": "bert\xff"}')
    with pytest.raises(ModelError, match=r"config\.json: not UTF-8 text"):
        load_model(tiny_model_dir)


def test_vocab_that_is_not_utf8_names_the_file(tiny_model_dir):
    (tiny_model_dir / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\n")
    with pytest.raises(ModelError, match=r"vocab\.txt: not UTF-8 text"):
        load_model(tiny_model_dir)


def write_config_text(folder, text: str) -> None:
    (folder / "config.json").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("literal", ["1e309", "-1e309", "NaN", "1", "2"])
def test_layer_norm_eps_must_be_a_small_positive_number(tiny_model_dir, literal):
    text = json.dumps(tiny_config(layer_norm_eps="EPS")).replace('"EPS"', literal)
    write_config_text(tiny_model_dir, text)
    with pytest.raises(ModelError, match=r"config\.json: layer_norm_eps"):
        load_model(tiny_model_dir)


def test_huge_integer_in_config_names_the_field(tiny_model_dir):
    text = json.dumps(tiny_config(vocab_size="N")).replace('"N"', "9" * 5000)
    write_config_text(tiny_model_dir, text)
    with pytest.raises(ModelError, match=r"config\.json: vocab_size is a whole number with 5,000"):
        load_model(tiny_model_dir)


def test_duplicate_config_fields_are_refused(tiny_model_dir):
    text = json.dumps(tiny_config()).replace(
        '"hidden_size": 8', '"hidden_size": 8, "hidden_size": 8'
    )
    write_config_text(tiny_model_dir, text)
    with pytest.raises(ModelError, match='"hidden_size" appears more than once'):
        load_model(tiny_model_dir)


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({"num_hidden_layers": 10**6}, ["num_hidden_layers", "1000000", "2 layers", "missing"]),
        ({"num_hidden_layers": 10**30}, ["num_hidden_layers", "missing"]),
        ({"hidden_size": 2**40, "num_attention_heads": 2}, ["hidden_size", "per head", "512"]),
        ({"hidden_size": 2**14, "num_attention_heads": 32}, ["hidden_size 16,384", "bytes"]),
        ({"vocab_size": 10**12}, ["vocab_size", "bytes"]),
        ({"intermediate_size": 10**15}, ["intermediate_size", "bytes"]),
        ({"max_position_embeddings": 10**9}, ["max_position_embeddings", "bytes"]),
    ],
)
def test_absurd_sizes_are_refused_before_allocating(tiny_model_dir, override, words):
    (tiny_model_dir / "config.json").write_text(json.dumps(tiny_config(**override)))
    tracemalloc.start()
    try:
        with pytest.raises(ModelError) as info:
            load_model(tiny_model_dir)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "config.json" in message
    for word in words:
        assert word in message, (word, message)
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MB allocated before refusing"


def test_more_heads_than_the_explorer_shows(tmp_path):
    from attn_explorer.compute import LIMITS
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    heads = LIMITS.max_heads * 2
    folder = write_tiny_bert(
        tmp_path / "m", config=tiny_config(hidden_size=heads, num_attention_heads=heads)
    )
    with pytest.raises(ModelError, match=rf"num_attention_heads is {heads}.*{LIMITS.max_heads}"):
        load_model(folder)


def test_every_model_error_is_a_value_error_with_the_file(tiny_model_dir):
    (tiny_model_dir / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"config\.json") as info:
        load_model(tiny_model_dir)
    assert isinstance(info.value, ModelError)


# -- the text ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [None, b"the cat", 3, ["the"]])
def test_text_that_is_not_text(tiny_model, text):
    with pytest.raises(TextError, match="text: expected text"):
        tiny_model.attention(text)
    with pytest.raises(TextError, match="text_pair: expected text"):
        tiny_model.attention("the cat", text if text is not None else 3)


def test_text_over_the_limit(tiny_model, tiny_model_dir, tmp_path):
    long = "a " * (MAX_TEXT_CHARS // 2 + 1)
    with pytest.raises(TextError, match=f"over the limit of {MAX_TEXT_CHARS:,}"):
        tiny_model.attention(long)
    with pytest.raises(TextError):
        run_model_export(tiny_model_dir, long, tmp_path, "npz")
    assert not (tmp_path / "tiny-bert.npz").exists()


def test_bad_text_is_refused_before_the_model_is_loaded(tmp_path):
    with pytest.raises(TextError):
        run_model_export(tmp_path / "no-such-model", b"bytes", tmp_path, "npz")


# -- writing --------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["npz", "png"])
def test_model_export_writes_atomically(tiny_model_dir, tmp_path, monkeypatch, fmt):
    """A failure while writing keeps the previous file and leaves no temporary file."""
    out = tmp_path / "out"
    (path,) = run_model_export(tiny_model_dir, "the cat", out, fmt)
    before = path.read_bytes()

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        run_model_export(tiny_model_dir, "the dog ran", out, fmt)
    assert path.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [path.name]


def test_export_name_is_capped(tmp_path):
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    folder = write_tiny_bert(tmp_path / ("m" * 240))
    (path,) = run_model_export(folder, "the cat", tmp_path / "out", "npz")
    assert len(path.name) <= 104 and path.exists()
    with np.load(path) as data:
        assert data["tokens"].tolist()[0] == "[CLS]"


def test_tiny_model_still_saves_with_save_safetensors(tmp_path):
    path = save_safetensors(tmp_path / "t.safetensors", {"w": np.ones(2, np.float32)})
    assert SafetensorsFile(path).get("w").tolist() == [1.0, 1.0]


def test_model_search_skips_a_broken_config_quietly(tiny_model_dir):
    from attn_explorer.models import is_bert_folder

    assert is_bert_folder(tiny_model_dir)
    (tiny_model_dir / "config.json").write_bytes(b"\xff" * 10)
    assert not is_bert_folder(tiny_model_dir)
    (tiny_model_dir / "config.json").write_text("[" * 100_000)
    assert not is_bert_folder(tiny_model_dir)
