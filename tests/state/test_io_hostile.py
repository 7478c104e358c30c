"""Issue 12: hostile session files, special files and file names meet a SessionFileError.

Items 1 (values that overflow), 3 (special and oversized files), 4 (huge integers),
5 (name length), 6 (lone surrogates), 10 (duplicate keys, a byte-order mark, CSV
formulas). Every refusal names the JSON path or the file and the limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from attn_explorer.compute import MAX_ABS_VALUE
from attn_explorer.state.app_state import AppState
from attn_explorer.state.presets import preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage import session_file as io
from attn_explorer.state.storage.safe_files import STALE_TEMP_SECONDS, write_atomic
from attn_explorer.state.storage.session_file import (
    MAX_NAME_CHARS,
    MAX_SESSION_BYTES,
    MAX_TOKEN_CHARS,
    SessionFileError,
)


def worked_dict() -> dict:
    chosen = preset("worked")
    return io.snapshot_to_dict(chosen.snapshot, chosen.options, chosen.name)


def load_within(path: Path, seconds: float = 5.0):
    """load_session(path) in a thread; fail (never hang) if it does not return in time."""
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(io.load_session(path))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"load_session({path}) still running after {seconds} s"
    assert time.monotonic() - start < seconds
    return outcome[0]


# -- item 3: special files and oversized files -----------------------------------------------------
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "session.json"
    os.mkfifo(fifo)
    try:
        outcome = load_within(fifo)
    finally:  # release a reader that blocked in open(), if any
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert isinstance(outcome, SessionFileError), outcome
    assert (
        str(outcome)
        == f"{fifo}: is a named pipe (FIFO), not a regular file; choose a saved session file"
    )


def test_link_to_dev_zero_is_refused_without_reading(tmp_path):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    outcome = load_within(link)
    assert isinstance(outcome, SessionFileError) and "is a device, not a regular file" in str(
        outcome
    )


def test_directory_and_socket_are_refused(tmp_path):
    folder = tmp_path / "folder.json"
    folder.mkdir()
    outcome = load_within(folder)
    assert isinstance(outcome, SessionFileError) and "is a folder" in str(outcome)
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        outcome = load_within(path)
    finally:
        server.close()
    assert isinstance(outcome, SessionFileError) and "is a socket" in str(outcome)


def test_oversized_file_is_refused_before_reading(tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as stream:  # sparse: no disk space, no memory
        stream.truncate(MAX_SESSION_BYTES + 1)
    outcome = load_within(huge)
    assert isinstance(outcome, SessionFileError)
    assert f"over the limit of {MAX_SESSION_BYTES // 2**20} MB" in str(outcome)


def test_a_file_at_the_limit_is_read(tmp_path):
    path = tmp_path / "padded.json"
    text = json.dumps(worked_dict())
    path.write_text(text + " " * (MAX_SESSION_BYTES - len(text)), encoding="utf-8")
    assert io.load_session(path).name == "worked"


# -- items 1 and 4: numbers ---------------------------------------------------------------------
def load_text(text: str) -> io.LoadedSession:
    return io.load_session_text(text, "s.json")


def with_literal(path: list, literal: str) -> str:
    data = worked_dict()
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "PLACEHOLDER"
    return json.dumps(data).replace('"PLACEHOLDER"', literal)


CELL = ["batches", 0, "heads", 0, "query", 1, 0]


@pytest.mark.parametrize(
    ("path", "literal", "expected"),
    [
        (
            ["version"],
            "1" + "0" * 5000,
            "s.json: version: expected a whole number, got a whole number with 5,001 digits",
        ),
        (
            ["shape", "T"],
            "9" * 4301,
            "s.json: shape.T: expected a whole number, got a whole number with 4,301 digits",
        ),
        (["options", "seed"], "-" + "7" * 10000, "s.json: options.seed: expected a whole number"),
        (
            CELL,
            "1" * 5000,
            "s.json: batches[0].heads[0].query[1][0]: a whole number with 5,000 digits is over "
            "the limit of ±1e+15",
        ),
        (
            CELL,
            "1" + "0" * 50,
            "s.json: batches[0].heads[0].query[1][0]: 1e+50 is over the limit of ±1e+15",
        ),
        (
            CELL,
            "1e308",
            "s.json: batches[0].heads[0].query[1][0]: 1e+308 is over the limit of ±1e+15",
        ),
        (CELL, "-1.7e308", "s.json: batches[0].heads[0].query[1][0]: -1.7e+308 is over the limit"),
        (CELL, "1000000000000001", "1000000000000001.0 is over the limit"),
    ],
)
def test_numbers_too_large_are_refused_with_their_path(path, literal, expected):
    with pytest.raises(SessionFileError) as info:
        load_text(with_literal(path, literal))
    assert expected in str(info.value), str(info.value)


def test_the_magnitude_limit_itself_loads():
    loaded = load_text(with_literal(CELL, "-1e15"))
    assert loaded.snapshot.query[0, 0, 1, 0] == -MAX_ABS_VALUE


# -- item 10: duplicate keys and a byte-order mark -------------------------------------------
@pytest.mark.parametrize(
    ("text_edit", "expected"),
    [
        (
            ('"name": "worked"', '"name": "a", "name": "worked"'),
            '(top level): field "name" appears',
        ),
        (('"strategy":', '"causal": true, "strategy":'), 'options: field "causal" appears'),
        (('"query":', '"key": [], "query":'), 'batches[0].heads[0]: field "key" appears'),
        (('"T": 3', '"T": 3, "T": 3'), 'shape: field "T" appears'),
    ],
)
def test_duplicate_keys_are_refused_with_their_path(text_edit, expected):
    text = json.dumps(worked_dict())
    old, new = text_edit
    assert old in text
    with pytest.raises(SessionFileError, match="more than once") as info:
        load_text(text.replace(old, new, 1))
    assert expected in str(info.value)


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(worked_dict()).encode("utf-8"))
    assert io.load_session(path).name == "worked"
    assert load_text("\ufeff" + json.dumps(worked_dict())).name == "worked"


# -- item 5: name and token lengths -------------------------------------------------------------
def test_long_name_is_refused_saying_the_limit():
    data = worked_dict()
    data["name"] = "n" * (MAX_NAME_CHARS + 1)
    with pytest.raises(SessionFileError) as info:
        io.session_from_dict(data)
    assert str(info.value) == (
        f"name: {MAX_NAME_CHARS + 1} characters long, over the limit of {MAX_NAME_CHARS}; "
        "shorten it"
    )
    data["name"] = "n" * MAX_NAME_CHARS
    assert io.session_from_dict(data).name == data["name"]


def test_a_200_megabyte_name_costs_nothing(tmp_path):
    """Refused by the file-size limit before any of it is read."""
    path = tmp_path / "name.json"
    with open(path, "w", encoding="utf-8") as stream:
        stream.write('{"format": "attn-explorer-session", "version": 1, "name": "')
        stream.truncate(200 * 2**20)
    outcome = load_within(path)
    assert isinstance(outcome, SessionFileError) and "over the limit of" in str(outcome)


def test_long_token_is_refused():
    data = worked_dict()
    data["tokens"][1] = "t" * (MAX_TOKEN_CHARS + 1)
    with pytest.raises(
        SessionFileError, match=rf"tokens\[1\]: .* over the limit of {MAX_TOKEN_CHARS}"
    ):
        io.session_from_dict(data)


# -- item 6: lone surrogates ---------------------------------------------------------------------
def surrogate_file(tmp_path) -> Path:
    text = json.dumps(worked_dict())
    text = text.replace('"t2"', '"t\\ud800x"').replace('"name": "worked"', '"name": "w\\udfff"')
    path = tmp_path / "surrogate.json"
    path.write_text(text, encoding="utf-8")
    return path


def test_lone_surrogates_are_replaced_and_noted(tmp_path):
    loaded = io.load_session(surrogate_file(tmp_path))
    assert loaded.snapshot.tokens[1] == "t\ufffdx"
    assert loaded.name == "w\ufffd"
    assert len(loaded.notes) == 2
    assert loaded.notes[0].startswith("name: an unpaired surrogate")
    assert loaded.notes[1].startswith("tokens[1]: an unpaired surrogate")


def test_save_csv_and_npz_after_loading_a_lone_surrogate(tmp_path):
    loaded = io.load_session(surrogate_file(tmp_path))
    state = AppState(Session(loaded.snapshot, loaded.options), name=loaded.name)
    saved = io.save_session(state.session, tmp_path / "saved.json", state.document.name)
    assert io.load_session(saved).snapshot.tokens == loaded.snapshot.tokens
    rows, cols, _ = io.read_csv(io.write_csv(tmp_path / "s.csv", state, "scores", 0))
    assert rows[1] == cols[1] == "t\ufffdx"
    with np.load(io.write_npz(tmp_path / "s.npz", state)) as data:
        assert data["tokens"].tolist()[1] == "t\ufffdx"


# -- saving never writes what loading refuses --------------------------------------------------
def test_save_refuses_a_file_open_would_refuse(tmp_path, monkeypatch):
    session = Session()
    session.rename_token(0, "t" * (MAX_TOKEN_CHARS + 1))
    with pytest.raises(
        SessionFileError, match=f"token 1 is .* over the limit of {MAX_TOKEN_CHARS}"
    ):
        io.save_session(session, tmp_path / "s.json")
    monkeypatch.setattr(io, "MAX_SESSION_BYTES", 300)
    with pytest.raises(SessionFileError, match=r"over the limit of 0\.0 MB that Open reads"):
        io.save_session(Session(), tmp_path / "s.json")
    assert list(tmp_path.iterdir()) == []


def test_save_caps_a_long_name(tmp_path):
    name = "x" * 1000  # e.g. from a long file name
    saved = io.save_session(Session(), tmp_path / "s.json", name)
    assert io.load_session(saved).name == "x" * MAX_NAME_CHARS


# -- item 2: temporary files left by a killed write are cleaned up ---------------------------
def test_stale_temporary_files_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "s.json"
    old = tmp_path / ".s.json.abc123.tmp"
    fresh = tmp_path / ".s.json.def456.tmp"
    other = tmp_path / ".t.json.ghi789.tmp"
    for path in (old, fresh, other):
        path.write_bytes(b"x" * 1000)
    long_ago = time.time() - STALE_TEMP_SECONDS - 60
    for path in (old, other):
        os.utime(path, (long_ago, long_ago))
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert not old.exists()  # left by a write of this file killed over an hour ago
    assert fresh.exists()  # may belong to a write in progress
    assert other.exists()  # another file's business


def test_a_long_target_name_still_gets_a_temporary_file(tmp_path):
    target = tmp_path / ("n" * 250 + ".json")
    write_atomic(target, b"x")
    assert target.read_bytes() == b"x"


def test_many_duplicate_keys_are_counted_in_one_pass(tmp_path):
    """50 000 keys given twice each: refused at once, not after a quadratic search."""
    fields = ",".join(f'"k{i}":1,"k{i}":2' for i in range(50_000))
    path = tmp_path / "many.json"
    path.write_text(
        json.dumps(worked_dict()).replace('"options": {', '"options": {' + fields + ", ", 1)
    )
    outcome = load_within(path)
    assert isinstance(outcome, SessionFileError) and 'field "k0" appears more than once' in str(
        outcome
    )


def test_a_save_killed_with_sigkill_leaves_a_temp_file_the_next_save_removes(tmp_path):
    """kill -9 in the middle of a write: the old file stays, the next write cleans up."""
    import signal
    import subprocess
    import sys

    target = tmp_path / "s.json"
    target.write_bytes(b"old contents")
    code = (
        "import sys, time\n"
        "from attn_explorer.state.storage.safe_files import write_atomic_with\n"
        "def slow(stream):\n"
        "    stream.write(b'x' * 8 * 2**20); stream.flush()\n"
        "    print('writing', flush=True); time.sleep(60)\n"
        "write_atomic_with(sys.argv[1], slow)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(10)
        child.stdout.close()  # type: ignore[union-attr]
    (left,) = tmp_path.glob(".s.json.*.tmp")  # what a kill -9 leaves behind
    assert left.stat().st_size == 8 * 2**20
    assert target.read_bytes() == b"old contents"
    write_atomic(target, b"new")  # a fresh temp file may belong to a running save: kept
    assert left.exists()
    long_ago = time.time() - STALE_TEMP_SECONDS - 1
    os.utime(left, (long_ago, long_ago))
    write_atomic(target, b"newer")
    assert not left.exists() and target.read_bytes() == b"newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
