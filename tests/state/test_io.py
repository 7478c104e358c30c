"""Session files, example sessions and the Qt-free CSV / NPZ export helpers."""

import copy
import errno
import json
import math
import os
import subprocess
import sys
from dataclasses import asdict, fields, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attn_explorer.compute import GRANULARITIES, MAX_ABS_VALUE, STAGES, STRATEGIES
from attn_explorer.state.app_state import AppState
from attn_explorer.state.colormaps import COLORMAPS
from attn_explorer.state.presets import preset, random_preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage import examples as examples_module
from attn_explorer.state.storage import session_file as io
from attn_explorer.state.storage.resources import resource
from attn_explorer.state.storage.session_file import SessionFileError
from attn_explorer.state.types import MATRICES, Options


def make_state(name="worked", **options):
    """A preset's numbers and options, named as the window names a preset."""
    chosen = preset(name)
    session = Session(chosen.snapshot, replace(chosen.options, **options))
    return AppState(session, name=chosen.name)


def save(state, path):
    """Save as the document does: the session under the document's name."""
    return io.save_session(state.session, path, state.document.name)


def to_dict(state):
    return io.session_to_dict(state.session, state.document.name)


def assert_same_state(loaded, state):
    session = state.session
    snap = session.snapshot()
    assert loaded.name == state.document.name
    assert loaded.snapshot.tokens == snap.tokens
    for name in MATRICES:
        ours, theirs = getattr(loaded.snapshot, name), getattr(snap, name)
        assert ours.dtype == np.float64
        assert ours.shape == theirs.shape
        # bit for bit, including the sign of zero
        assert ours.tobytes() == theirs.tobytes()
    assert loaded.options == session.options


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["worked", "exercise", "random", "causal", "identity"])
def test_save_load_round_trip_presets(tmp_path, name):
    state = make_state(name)
    path = save(state, tmp_path / "s.json")
    assert_same_state(io.load_session(path), state)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "attn-explorer-session"
    assert data["version"] == 1 and isinstance(data["version"], int)


def test_floats_round_trip_exactly_including_negative_zero(tmp_path):
    state = make_state("worked")
    session = state.session
    # The largest magnitude a session holds is MAX_ABS_VALUE (1e15; issue 12): the last
    # value is a float64 just inside it, at full precision.
    values = [[0.1, -0.0], [1e-300, 2.0**-1074], [123456789.123456789, -999999999999999.9]]
    session.set_block("query", 0, 0, values)
    loaded = io.load_session(save(state, tmp_path / "s.json"))
    assert loaded.snapshot.query[0, 0].tolist() == values
    assert math.copysign(1, loaded.snapshot.query[0, 0, 0, 1]) == -1


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
# Every finite float64 a session may hold: MAX_ABS_VALUE bounds them (issue 12).
finite = st.floats(-MAX_ABS_VALUE, MAX_ABS_VALUE, allow_nan=False, width=64)


@st.composite
def sessions(draw):
    b, h, t, d = (draw(st.integers(1, n)) for n in (2, 3, 4, 3))
    tokens = draw(st.lists(names.filter(lambda s: s.strip()), min_size=t, max_size=t))
    arrays = [
        np.array(draw(st.lists(finite, min_size=b * h * t * d, max_size=b * h * t * d))).reshape(
            b, h, t, d
        )
        for _ in MATRICES
    ]
    options = Options(
        strategy=draw(st.sampled_from(STRATEGIES)),
        stage=draw(st.sampled_from(STAGES)),
        scale=draw(st.booleans()),
        causal=draw(st.booleans()),
        shared_scale=draw(st.booleans()),
        score_colormap=draw(st.sampled_from(COLORMAPS)),
        weight_colormap=draw(st.sampled_from(COLORMAPS)),
        batch_index=draw(st.integers(0, b - 1)),
        head=draw(st.integers(0, h - 1)),
        dtype=draw(st.sampled_from(("float64", "float32"))),
        fill=draw(st.sampled_from(("zero", "random"))),
        seed=draw(st.integers(0, 2**40)),
        granularity=draw(st.sampled_from(GRANULARITIES)),
        step=draw(st.integers(-1, 100)),
        predict=draw(st.booleans()),
    )
    from attn_explorer.state.types import Snapshot

    return AppState(Session(Snapshot(tuple(tokens), *arrays), options), name=draw(names))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(state=sessions())
@pytest.mark.slow
def test_save_load_round_trip_random_sessions(tmp_path, state):
    path = save(state, tmp_path / "random.json")
    assert_same_state(io.load_session(path), state)


def test_every_option_is_saved():
    data = to_dict(make_state("exercise"))
    assert set(data["options"]) == {f.name for f in fields(Options)}


def test_missing_options_take_defaults():
    data = to_dict(make_state("worked"))
    data["options"] = {"scale": False}
    assert io.session_from_dict(data).options == Options(scale=False)


def test_a_file_saved_with_the_retired_show_value_option_still_opens():
    data = to_dict(make_state("worked"))
    data["options"] = {**data["options"], "show_value": True}
    assert io.session_from_dict(data).options == make_state("worked").session.options
    data["options"]["show_valu"] = True  # a typo is still refused, naming only live options
    with pytest.raises(SessionFileError, match='unknown field "show_valu"') as caught:
        io.session_from_dict(data)
    assert "show_value" not in str(caught.value)


def test_loading_returns_new_objects_and_leaves_the_session_alone(tmp_path):
    state = make_state("random")
    session = state.session
    before = session.snapshot()
    path = save(state, tmp_path / "s.json")
    loaded = io.load_session(path)
    loaded.snapshot.query[...] = 99
    assert np.array_equal(session.matrix("query"), before.query)
    assert not session.dirty


# -- malformed files ------------------------------------------------------------------------------
def two_head_dict():
    return to_dict(make_state("causal"))  # B=1, H=2, T=6, d=4


def edit(path, value):
    """A function that sets ``data[path...] = value`` on a fresh two-head session dict."""

    def run():
        data = two_head_dict()
        *parents, last = path
        node = data
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
        return data

    return run


DELETE = object()
HEAD1 = ["batches", 0, "heads", 1]

MALFORMED = {
    "wrong format name": (edit(["format"], "something-else"), "format: this is not an Attention"),
    "no format name": (edit(["format"], DELETE), "format: this is not an Attention"),
    "newer version": (edit(["version"], 3), "version: the file is format version 3, newer"),
    "version as text": (edit(["version"], "1"), "version: expected a whole number"),
    "version as float": (edit(["version"], 1.0), "version: expected a whole number"),
    "missing tokens": (edit(["tokens"], DELETE), '(top level): missing field "tokens"'),
    "missing batches": (edit(["batches"], DELETE), '(top level): missing field "batches"'),
    "missing options": (edit(["options"], DELETE), '(top level): missing field "options"'),
    "missing key": (
        edit([*HEAD1, "key"], DELETE),
        'batches[0].heads[1]: missing field "key"',
    ),
    "text in a cell": (
        edit([*HEAD1, "key", 2, 0], "x"),
        'batches[0].heads[1].key[2][0]: expected a number, got "x"',
    ),
    "bool in a cell": (
        edit([*HEAD1, "query", 0, 1], True),
        "batches[0].heads[1].query[0][1]: expected a number, got true",
    ),
    "null in a cell": (
        edit([*HEAD1, "value", 5, 3], None),
        "batches[0].heads[1].value[5][3]: expected a number, got null",
    ),
    "ragged row": (
        edit([*HEAD1, "query", 1], [1, 2, 3]),
        "batches[0].heads[1].query[1]: expected 4 numbers (one per dimension d), got 3",
    ),
    "row not a list": (
        edit([*HEAD1, "query", 1], 5),
        "batches[0].heads[1].query[1]: expected a list [...], got a number",
    ),
    "value with fewer rows than key": (
        edit([*HEAD1, "value"], [[0, 0, 0, 0]] * 5),
        "batches[0].heads[1].value: expected 6 rows (one per token, shape.T), got 5",
    ),
    "key with another d than query": (
        edit([*HEAD1, "key"], [[0, 0, 0]] * 6),
        "batches[0].heads[1].key[0]: expected 4 numbers",
    ),
    "one head missing": (
        edit(["batches", 0, "heads"], [two_head_dict()["batches"][0]["heads"][0]]),
        "batches[0].heads: expected 2 heads (shape.H), got 1",
    ),
    "tokens do not match T": (
        edit(["tokens"], ["a", "b"]),
        "tokens: expected 6 token names (shape.T), got 2",
    ),
    "empty token name": (edit(["tokens", 3], " "), 'tokens[3]: expected a non-empty name, got " "'),
    "shape over the limit": (
        edit(["shape", "H"], 65),
        "shape: Q, K, V: number of heads H = 65 is over the limit of 64",
    ),
    "shape zero": (edit(["shape", "T"], 0), "shape: a table needs at least one token"),
    "unknown strategy": (
        edit(["options", "strategy"], "fast"),
        "options.strategy: 'fast' is not one of loop, matmul, batched",
    ),
    "unknown stage": (edit(["options", "stage"], "softmax"), "options.stage: 'softmax' is not"),
    "unknown colour map": (
        edit(["options", "score_colormap"], "jet"),
        "options.score_colormap: 'jet' is not one of",
    ),
    "head out of range": (edit(["options", "head"], 2), "options.head: 2 is outside 0..1"),
    "option of the wrong type": (
        edit(["options", "causal"], "yes"),
        'options.causal: expected true or false, got "yes"',
    ),
    "negative step": (edit(["options", "step"], -2), "options.step: expected a whole number ≥ -1"),
    "unknown option": (edit(["options", "colour"], "red"), 'options: unknown field "colour"'),
    "unknown top-level field": (edit(["heads"], []), '(top level): unknown field "heads"'),
    "name not text": (edit(["name"], 3), "name: expected text, got a number"),
    "not an object": (lambda: [1, 2], "(top level): expected an object"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_session_reports_first_problem_with_json_path(tmp_path, case):
    build, expected = MALFORMED[case]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(build()), encoding="utf-8")
    with pytest.raises(SessionFileError) as info:
        io.load_session(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("literal", "shown"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "Infinity")],
)
def test_non_finite_numbers_are_rejected(literal, shown):
    data = two_head_dict()
    data["batches"][0]["heads"][1]["query"][2][1] = "PLACEHOLDER"
    text = json.dumps(data).replace('"PLACEHOLDER"', literal)
    with pytest.raises(SessionFileError) as info:
        io.load_session_text(text, "s.json")
    assert str(info.value) == (
        f"s.json: batches[0].heads[1].query[2][1]: expected a finite number, got {shown}"
    )


def test_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "attn-explorer-session",', encoding="utf-8")
    with pytest.raises(SessionFileError, match=r"bad.json: not valid JSON \(.* line 1, column"):
        io.load_session(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(SessionFileError, match="no such file"):
        io.load_session(tmp_path / "missing.json")
    with pytest.raises(SessionFileError, match="is a folder"):
        io.load_session(tmp_path)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SessionFileError, match="not a text file"):
        io.load_session(binary)


# -- saving ---------------------------------------------------------------------------------------
def test_save_into_missing_folder_or_under_a_file(tmp_path):
    state = make_state()
    with pytest.raises(SessionFileError, match="the folder does not exist"):
        save(state, tmp_path / "nope" / "s.json")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SessionFileError, match=r"could not save .*part of the path is a file"):
        save(state, tmp_path / "file" / "s.json")


def test_disk_full_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    path.write_text("old contents")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.os, "fsync", full)
    with pytest.raises(SessionFileError, match="the disk is full"):
        save(make_state(), path)
    assert path.read_text() == "old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_save_keeps_file_permissions(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("{}")
    os.chmod(path, 0o640)
    save(make_state(), path)
    assert path.stat().st_mode & 0o777 == 0o640


# -- examples -------------------------------------------------------------------------------------
def test_examples_are_listed_and_load():
    examples = examples_module.list_examples()
    assert [title for title, _ in examples][:2] == ["Worked example", "Exercise: k4 = (2, 0)"]
    assert len(examples) == 4
    for _, file in examples:
        loaded = examples_module.load_example(file)
        assert loaded.snapshot.shape[0] >= 1
    worked = examples_module.load_example(examples[0][1])
    assert worked.snapshot.query[0, 0].tolist() == [[1, 0], [0, 1], [1, 1]]
    assert worked.options.scale is False
    heads = {examples_module.load_example(f).snapshot.shape[1] for _, f in examples}
    assert 4 in heads  # the 4-head random example


@pytest.mark.parametrize("file", list(examples_module.EXAMPLE_FILES))
def test_shipped_examples_match_their_presets(file):
    """Regenerate with: python -m attn_explorer.state.storage.examples"""
    shipped = resource("examples", file).read_text(encoding="utf-8")
    assert shipped == examples_module.example_text(file)


# -- CSV and NPZ ----------------------------------------------------------------------------------
def test_csv_round_trip_exact_with_labels_and_masked_cells(tmp_path):
    state = make_state("causal")
    session = state.session
    session.set_block("query", 0, 0, [[0.1, 1 / 3, -2.5e-12, 7.0]])
    for stage in ("masked", "weights", "output"):
        path = io.write_csv(tmp_path / f"{stage}.csv", state, stage, 1)
        rows, cols, matrix = io.read_csv(path)
        expected = state.results.compute_now().stage(stage)[0, 1]
        assert rows == session.tokens
        assert cols == (["d1", "d2", "d3", "d4"] if stage == "output" else session.tokens)
        assert matrix.tobytes() == expected.tobytes()
    first = (tmp_path / "masked.csv").read_text().splitlines()
    assert first[0] == "query \\ key,The,cat,sat,on,the,mat"
    assert "-inf" in first[1]


def test_csv_quotes_token_names_with_commas(tmp_path):
    state = make_state("worked")
    session = state.session
    session.rename_token(0, 'a, "b"')
    rows, cols, _ = io.read_csv(io.write_csv(tmp_path / "s.csv", state, "scores", 0))
    assert rows[0] == cols[0] == 'a, "b"'


def test_npz_round_trip_exact(tmp_path):
    state = make_state("causal")
    session = state.session
    path = io.write_npz(tmp_path / "all.npz", state)
    result = state.results.compute_now()
    with np.load(path, allow_pickle=False) as data:
        for name in MATRICES:
            assert np.array_equal(data[name], session.matrix(name))
        for stage in STAGES:
            assert data[stage].tobytes() == result.stage(stage).tobytes()
            assert data[stage].shape == result.stage(stage).shape
        assert data["tokens"].tolist() == session.tokens
        assert json.loads(str(data["options"])) == asdict(session.options)
        assert str(data["name"]) == "causal"


def test_stage_output_without_values_is_an_export_error(monkeypatch):
    state = make_state("worked")
    result = replace(state.results.compute_now(), output=None)
    monkeypatch.setattr(state.results, "compute_now", lambda: result)
    with pytest.raises(io.ExportError, match="needs value vectors"):
        io.stage_array(state, "output")


def test_io_does_not_import_qt():
    code = "import sys, attn_explorer.state.storage.session_file; print('PySide6' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dict_is_not_modified_by_validation():
    data = two_head_dict()
    before = copy.deepcopy(data)
    io.session_from_dict(data)
    assert data == before
    big = random_preset(heads=2, tokens=3, dim=2)
    assert io.session_from_dict(
        io.snapshot_to_dict(big.snapshot, big.options, "r")
    ).snapshot.shape == (1, 2, 3, 2)


def test_the_documented_example_loads():
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "session-format.md"
    text = doc.read_text(encoding="utf-8")
    example = text.split("```json\n", 1)[1].split("```", 1)[0]
    loaded = io.load_session_text(example, "docs example")
    assert loaded.snapshot.query[0, 0].tolist() == [[1, 0], [0, 1], [1, 1]]
    assert loaded.options == Options(scale=False)
