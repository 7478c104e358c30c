"""The hostile session-file corpus (issue 12), importable by any test.

    from data.hostile import corpus_files, expected_outcome, special_files

(``tests/`` is on ``sys.path`` when pytest runs a test module that lives in it;
from a sub-folder, load this file with ``importlib.util.spec_from_file_location``.)

``corpus_files()`` lists the committed files, written by ``make_corpus.py`` beside
them; ``expected_outcome(path)`` says what must happen to one (its name's prefix);
``special_files(folder)`` creates the ones that cannot be committed — a FIFO, a
link to /dev/zero, a folder, a socket and a sparse file over the size limit — and
returns their paths. Every one of them must be refused without blocking.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name prefix → what must happen: load and export / refused on load / refused by the export's cost
OUTCOMES = {"ok": "exports", "bad": "refused", "costly": "too costly to export"}


def corpus_files() -> list[Path]:
    """Every committed corpus file, sorted by name."""
    return sorted(HERE.glob("*.json"))


def expected_outcome(path: Path) -> str:
    """``"ok"``, ``"bad"`` or ``"costly"``: the prefix of the file's name (see OUTCOMES)."""
    prefix = path.name.split("-", 1)[0]
    if prefix not in OUTCOMES:
        raise ValueError(f"{path.name}: corpus file names start with one of {', '.join(OUTCOMES)}")
    return prefix


def special_files(folder: Path) -> list[Path]:
    """Create, in ``folder``, every special file a session path must be refused for."""
    from attn_explorer.state.storage.session_file import MAX_SESSION_BYTES

    made: list[Path] = []
    if hasattr(os, "mkfifo"):
        fifo = folder / "fifo.json"
        os.mkfifo(fifo)
        made.append(fifo)
    if Path("/dev/zero").exists():
        zero = folder / "dev-zero.json"
        zero.symlink_to("/dev/zero")
        made.append(zero)
    directory = folder / "directory.json"
    directory.mkdir()
    made.append(directory)
    if hasattr(socket, "AF_UNIX"):
        path = folder / "socket.json"
        with contextlib.closing(socket.socket(socket.AF_UNIX)) as server:
            server.bind(str(path))  # the socket file stays after the socket is closed
        made.append(path)
    sparse = folder / "sparse-over-the-limit.json"
    with open(sparse, "wb") as stream:
        stream.truncate(MAX_SESSION_BYTES + 1)  # no disk space, no memory
    made.append(sparse)
    return made


def release_fifos(paths: list[Path]) -> None:
    """Open every FIFO for writing once, so a reader that blocked on it (a bug) is released."""
    for path in paths:
        if path.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
