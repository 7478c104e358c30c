"""Issue 12's must-show: every hostile session file through the CLI and through load_session.

Each corpus file (tests/data/hostile/, written by make_corpus.py beside it) and
each special file (a FIFO, a /dev/zero link, a folder, a socket, a sparse file
over the size limit, created here) runs through ``python -m attn_explorer export
FILE --out DIR`` in its own process with a 1 GB address-space limit and a 20 s
timeout: the exit status is 0 or 2 as the file's name says, there is no
traceback, an error is one line, and the peak resident memory (``os.wait4``)
stays under 1 GB. In process, ``state.io.load_session`` either succeeds or
raises SessionFileError, nothing else.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from attn_explorer.state.session import Session
from attn_explorer.state.storage.session_file import SessionFileError, load_session, save_session

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("hostile", HERE / "data" / "hostile" / "__init__.py")
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hostile)

MEMORY_LIMIT = 1024 * 2**20  # RLIMIT_AS of each export: 1 GB of address space
TIMEOUT = 20.0  # seconds; a safety net, not a speed assertion
FILES = hostile.corpus_files()


def limit_memory() -> None:  # runs in the child, between fork and exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    peak: int  # bytes of resident memory at the child's peak


def export(path: Path, out: Path) -> Outcome:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"  # the same address space anywhere
    out.mkdir(parents=True, exist_ok=True)
    # Output goes to files, not pipes. The export is started by a small Python parent that
    # reaps it with os.wait4: forked straight from pytest (preexec_fn forces a full fork) it
    # inherited pytest's own peak RSS at exec, 1.9 GB after the model tests.
    report = out / "peak.txt"
    with open(out / "stdout.txt", "w+b") as stdout, open(out / "stderr.txt", "w+b") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", MEASURE, str(MEMORY_LIMIT), str(TIMEOUT), str(report),
             sys.executable, "-m", "attn_explorer", "export", str(path), "--out", str(out)],
            stdout=stdout,
            stderr=stderr,
            env=env,
        )  # fmt: skip
        process.wait(timeout=TIMEOUT + 10)
        code, peak = (int(word) for word in report.read_text().split())
        stdout.seek(0)
        stderr.seek(0)
        return Outcome(
            code,
            stdout.read().decode("utf-8", "replace"),
            stderr.read().decode("utf-8", "replace"),
            peak,
        )


#: The small parent of each export: caps its address space, kills it after the timeout,
#: and writes its exit status and peak resident bytes to the report file.
MEASURE = r"""
import os, resource, subprocess, sys, threading
limit, timeout, report = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
child = subprocess.Popen(sys.argv[4:], preexec_fn=cap)
timer = threading.Timer(timeout, child.kill)
timer.start()
_, status, usage = os.wait4(child.pid, 0)
timer.cancel()
with open(report, "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss * 1024}")
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    """Every corpus file exported once, a few processes at a time."""
    root = tmp_path_factory.mktemp("corpus-out")
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        futures = {path.name: pool.submit(export, path, root / path.stem) for path in FILES}
    return {name: future.result() for name, future in futures.items()}


def check_cli(outcome: Outcome, expected: str) -> None:
    assert outcome.code in (0, 2), (outcome.code, outcome.stderr[-2000:])
    assert "Traceback" not in outcome.stderr, outcome.stderr[-2000:]
    assert outcome.peak <= MEMORY_LIMIT, f"peak {outcome.peak / 2**20:.0f} MB"
    errors = [line for line in outcome.stderr.splitlines() if ": note: " not in line]
    if expected == "ok":
        assert outcome.code == 0, outcome.stderr
        assert errors == [], outcome.stderr
        written = [Path(line) for line in outcome.stdout.splitlines()]
        assert written and all(path.is_file() for path in written)
    else:
        assert outcome.code == 2, (outcome.code, outcome.stdout)
        assert len(errors) == 1 and outcome.stderr.count("\n") == 1, outcome.stderr
        assert errors[0].startswith("attn-explorer export: error: ")
        if expected == "costly":
            assert "over the command line's limit" in errors[0], errors[0]
        assert outcome.stdout == ""


def test_the_corpus_is_big_and_is_what_the_generator_writes(tmp_path):
    _spec2 = importlib.util.spec_from_file_location(
        "make_corpus", HERE / "data" / "hostile" / "make_corpus.py"
    )
    assert _spec2 is not None and _spec2.loader is not None
    make_corpus = importlib.util.module_from_spec(_spec2)
    _spec2.loader.exec_module(make_corpus)
    fresh = make_corpus.write(tmp_path)
    assert sorted(p.name for p in fresh) == [p.name for p in FILES], "run make_corpus.py"
    for path in fresh:
        assert path.read_bytes() == (hostile.HERE / path.name).read_bytes(), path.name
    assert len(FILES) >= 60
    kinds = {hostile.expected_outcome(path) for path in FILES}
    assert kinds == {"ok", "bad", "costly"}


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
@pytest.mark.slow
def test_corpus_file_through_the_command_line(outcomes, path):
    check_cli(outcomes[path.name], hostile.expected_outcome(path))


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_corpus_file_through_load_session(path, tmp_path):
    expected = hostile.expected_outcome(path)
    try:
        loaded = load_session(path)
    except SessionFileError as exc:
        assert expected == "bad", f"{path.name} was refused: {exc}"
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message
        return
    assert expected in ("ok", "costly"), f"{path.name} loaded but should be refused"
    if expected == "ok":  # what loads can be saved and loaded again, unchanged
        session = Session(loaded.snapshot, loaded.options)
        again = load_session(save_session(session, tmp_path / "again.json", loaded.name))
        assert again.snapshot.tokens == loaded.snapshot.tokens
        assert again.snapshot.query.tobytes() == loaded.snapshot.query.tobytes()


@pytest.mark.slow
def test_special_files_through_the_command_line(tmp_path):
    made = hostile.special_files(tmp_path)
    assert len(made) >= 4
    try:
        with ThreadPoolExecutor(max_workers=len(made)) as pool:
            results = list(pool.map(lambda p: export(p, tmp_path / f"out-{p.stem}"), made))
    finally:
        hostile.release_fifos(made)
    for path, outcome in zip(made, results, strict=True):
        check_cli(outcome, "bad")
        assert str(path) in outcome.stderr, outcome.stderr


def test_special_files_through_load_session(tmp_path):
    made = hostile.special_files(tmp_path)
    try:
        for path in made:
            done: list[BaseException] = []
            worker = threading.Thread(target=_refusal, args=(path, done), daemon=True)
            worker.start()
            worker.join(5)
            assert not worker.is_alive(), f"load_session({path.name}) blocked"
            assert isinstance(done[0], SessionFileError), (path.name, done[0])
    finally:
        hostile.release_fifos(made)


def _refusal(path: Path, done: list[BaseException]) -> None:
    try:
        load_session(path)
    except BaseException as exc:
        done.append(exc)
    else:
        done.append(AssertionError(f"{path} loaded"))
