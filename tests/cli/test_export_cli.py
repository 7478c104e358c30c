"""``attn-explorer export`` as a user runs it: exit codes, the paths printed, the files written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage

from attn_explorer.state.storage.resources import resource


def run(*args, display=False):
    env = dict(os.environ)
    if not display:  # a machine with no display and nothing set up for Qt
        for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "attn_explorer", "export", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def written(result):
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.splitlines()


def test_example_png_headless(tmp_path, qapp):
    paths = written(run("--example", "worked", "--out", tmp_path / "out", "--width", 800))
    assert paths == [str(tmp_path / "out" / "worked-scores-all-heads.png")]
    image = QImage(paths[0])
    assert image.width() == 800


def test_session_file_svg_per_head(tmp_path):
    session = resource("examples", "causal.json")
    paths = written(
        run(session, "--out", tmp_path, "--heads", "1,2", "--format", "svg", "--stage", "masked")
    )
    assert [os.path.basename(p) for p in paths] == [
        "causal-masked-head1.svg",
        "causal-masked-head2.svg",
    ]
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        assert text.startswith("<?xml") and "query i" in text


def test_csv_and_npz(tmp_path):
    session = resource("examples", "random-4-heads.json")
    paths = written(run(session, "--out", tmp_path, "--format", "csv", "--heads", "all"))
    assert len(paths) == 4 and all(p.endswith(".csv") for p in paths)
    [npz] = written(run(session, "--out", tmp_path, "--format", "npz"))
    with np.load(npz) as data:
        assert data["weights"].shape == (1, 4, 8, 8)
        assert json.loads(str(data["options"]))["strategy"] == "batched"


def error_line(result):
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("attn-explorer export: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["missing.json"], "missing.json: no such file"),
        (["--example", "nope"], "argument --example: invalid choice: 'nope'"),
        (["--example", "worked", "--stage", "softmax"], "invalid choice: 'softmax'"),
        (["--example", "worked", "--heads", "9"], "there is no head 9; this session has only"),
        (
            ["--example", "worked", "--heads", "0"],
            "there is no head 0; this session has only head 1",
        ),
        (["--example", "worked", "--heads", "two"], "--heads: 'two' is not all, montage"),
        (["--example", "worked", "--format", "jpg"], "invalid choice: 'jpg'"),
        (["--example", "worked", "--width", "5"], "width: 5 pixels is not allowed"),
        ([], "give one of SESSION.json, --example NAME or --model FOLDER"),
        (["--model", "folder"], "--model needs --text"),
        (["--example", "worked", "--text", "hi"], "--text is only used with --model"),
    ],
)
def test_user_errors_are_one_line_exit_2(tmp_path, args, expected):
    line = error_line(run(*args, "--out", tmp_path))
    assert expected in line


def test_invalid_session_file_names_the_json_path(tmp_path):
    data = json.loads(resource("examples", "causal.json").read_text(encoding="utf-8"))
    data["batches"][0]["heads"][1]["key"][2][0] = "x"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    line = error_line(run(bad, "--out", tmp_path / "out"))
    assert line.endswith('bad.json: batches[0].heads[1].key[2][0]: expected a number, got "x"')
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_out_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    assert "is a file; give a folder" in error_line(
        run("--example", "worked", "--out", tmp_path / "f")
    )
