"""``attn-explorer open FILE`` (issue 28 item 2): a refused file is one line on stderr and
status 2 before any Qt is loaded; a good file opens the window on its tensors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from attn_explorer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_refused_file_is_one_line_and_status_2_without_qt(tmp_path):
    path = tmp_path / "pickled.npy"
    np.save(path, np.array([None, {"q": 1}], dtype=object), allow_pickle=True)
    code = (
        "import sys; from attn_explorer.cli.main import main; rc = main(['open', sys.argv[1]]); "
        "print(rc, 'PySide6' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["2", "False"]
    assert done.stderr.splitlines() == [
        "attn-explorer open: error: pickled.npy: 'array' holds Python objects, which only "
        "unpickling could read, and the app never unpickles; save plain numbers (np.save "
        "with allow_pickle=False)."
    ]


def test_open_is_listed_and_has_help(capsys):
    assert main(["--help"]) == 0  # the one argv policy: help printed, status 0, no SystemExit
    assert "open     open the window on query, key, value arrays" in capsys.readouterr().out
    assert main(["open", "--help"]) == 0
    assert "usage: attn-explorer open [-h] file" in capsys.readouterr().out


def test_a_good_file_opens_the_window_on_its_tensors(qtbot, tmp_path):
    from attn_explorer.cli.open_tensors import open_window

    q, k = np.eye(3), np.arange(9.0).reshape(3, 3)
    path = tmp_path / "pair.npz"
    np.savez(path, query=q, key=k / 10)
    errors: list[str] = []
    window = open_window(str(path), errors)
    assert window is not None and errors == []
    qtbot.addWidget(window)
    window.ask_before_discard = False
    np.testing.assert_array_equal(window.session.matrix("query")[0, 0], q)
    assert window.windowTitle().startswith("pair")
    assert window.statusBar().currentMessage().startswith("Opened tensors from pair.npz")
    missing = open_window(str(tmp_path / "gone.npz"), errors)
    assert missing is None and errors[-1] == "Could not open gone.npz: no such file."
