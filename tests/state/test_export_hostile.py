"""Issue 12, items 6 and 10: CSV and NPZ exports of hostile text.

A token that looks like a spreadsheet formula is written as text (a leading
apostrophe) and read back exactly; text UTF-8 cannot encode never breaks a save
or an export. Numbers stay numbers.
"""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from attn_explorer.state.app_state import AppState
from attn_explorer.state.presets import preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage import session_file as io


def test_surrogates_that_reach_a_session_another_way_never_break_a_save(tmp_path):
    state = AppState(Session(), name="b\udc00")
    session = state.session
    session.rename_token(0, "a\ud800")  # e.g. from a clipboard
    data = io.load_session(io.save_session(session, tmp_path / "s.json", state.document.name))
    assert data.snapshot.tokens[0] == "a\ufffd" and data.name == "b\ufffd"
    # what the autosave writes
    text = io.session_json(io.session_to_dict(session, state.document.name))
    text.encode("utf-8")
    rows, _, _ = io.read_csv(io.write_csv(tmp_path / "s.csv", state, "scores", 0))
    assert rows[0] == "a\ufffd"


# -- item 10: CSV formula injection --------------------------------------------------------------
@pytest.mark.parametrize(
    "label", ['=HYPERLINK("http://x")', "+1", "-x", "@SUM(A1)", "\tcmd", "\rcmd", "'=1"]
)
def test_csv_labels_that_look_like_formulas_get_an_apostrophe(tmp_path, label):
    chosen = preset("worked")
    snapshot = replace(chosen.snapshot, tokens=("t1", label, "t3"))
    state = AppState(Session(snapshot, chosen.options))
    path = io.write_csv(tmp_path / "s.csv", state, "scores", 0)
    with open(path, newline="", encoding="utf-8") as stream:
        cells = list(csv.reader(stream))
    assert cells[0][2] == cells[2][0] == "'" + label  # what a spreadsheet sees: text
    rows, cols, matrix = io.read_csv(path)
    assert rows[1] == cols[1] == label  # read back exactly
    assert matrix.tobytes() == state.results.compute_now().scores[0, 0].tobytes()


def test_csv_numbers_stay_numbers(tmp_path):
    state = AppState()
    state.session.set_block("query", 0, 0, [[-1.5, 0.0]])
    path = io.write_csv(tmp_path / "s.csv", state, "scores", 0)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[1].split(",")[1] == "-1.5" and "'" not in path.read_text(encoding="utf-8")
