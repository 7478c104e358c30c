"""Issue 24, classes 3, 6, 8–12: the command line's edges, generated, each in a child process
under an address-space limit and a timeout.

Every refused case exits 2 with exactly one line on stderr naming the argument or file
and writes nothing; a reader that went away (a broken pipe) ends quietly with 141.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from attn_explorer.cli.console import BROKEN_PIPE_STATUS
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

#: Address space each child may map: the interpreter, numpy and Qt offscreen fit in it.
ADDRESS_SPACE = 3 * 2**30
SECONDS = 60


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
    return env


def run(*args, stdout=subprocess.PIPE, shell_suffix: str = "") -> subprocess.CompletedProcess:
    """``attn-explorer ARGS`` in a child limited to ADDRESS_SPACE and SECONDS."""
    argv = [sys.executable, "-m", "attn_explorer", *args]
    if shell_suffix:  # a redirection only a shell can make (closing stdout)
        argv = ["sh", "-c", f'exec "$@" {shell_suffix}', "sh", *argv]
    return subprocess.run(
        argv, stdout=stdout, stderr=subprocess.PIPE, env=child_env(), timeout=SECONDS,
        preexec_fn=_limit,
    )  # fmt: skip


MAIN_IN_ONE_CHILD = """
import contextlib, io, json, os, sys
from attn_explorer.cli.main import main
outcomes = []
for argv in json.loads(sys.argv[1]):
    argv = [os.fsdecode(bytes.fromhex(a[6:])) if a.startswith("bytes:") else a for a in argv]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    outcomes.append([status, err.getvalue()])
print(json.dumps(outcomes))
"""


def run_many(argvs: list[list[str | bytes]], cwd=None) -> list[tuple[int, str]]:
    """(exit status, stderr) of ``main(argv)`` for each argv, all in one child under the
    limits: the status main returns is the exit status, and many cases cost one start.
    A bytes argument is handed over as Python hands over invalid UTF-8 on a command line."""
    encoded = [[f"bytes:{a.hex()}" if isinstance(a, bytes) else a for a in argv] for argv in argvs]
    done = subprocess.run(
        [sys.executable, "-c", MAIN_IN_ONE_CHILD, json.dumps(encoded)], capture_output=True,
        text=True, env=child_env(), timeout=SECONDS, preexec_fn=_limit, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [(status, stderr) for status, stderr in json.loads(done.stdout)]


def one_line(outcome: tuple[int, str], *words: str) -> str:
    status, stderr = outcome
    assert status == 2 and "Traceback" not in stderr, (status, stderr)
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    for word in words:
        assert word in stderr, (word, stderr)
    return stderr


def one_line_error(result, *words: str, status: int = 2) -> str:
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == status, (result.returncode, stderr)
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    for word in words:
        assert word in stderr, (word, stderr)
    return stderr


# -- class 10: argument errors are one line, exit 2 ----------------------------------------------
ARGUMENT_ERRORS = [
    (["--bogus"], ["attn-explorer: error:", "--bogus", "attn-explorer --help"]),
    (["scores", "--bogus"], ["attn-explorer scores: error:", "--bogus"]),
    (["scores", "--strategy", "fast"], ["--strategy", "invalid choice"]),
    (["scores", "--query"], ["--query", "expected one argument"]),
    (["scores", "--example", "nope"], ["--example"]),
    (["bench", "--bogus"], ["attn-explorer bench: error:", "--bogus"]),
    (["bench", "--compare", "one.json"], ["--compare", "expected 2 arguments"]),
    (["export", "--bogus", "--out", "x"], ["attn-explorer export: error:", "--bogus"]),
    (["export", "--example", "worked", "--out", "x", "--width", "wide"], ["--width"]),
    (["a.json", "b.json"], ["unrecognized arguments: b.json"]),
]


def test_argument_errors_are_one_line(tmp_path):
    outcomes = run_many([args for args, _ in ARGUMENT_ERRORS], cwd=tmp_path)
    for (_, words), outcome in zip(ARGUMENT_ERRORS, outcomes, strict=True):
        one_line(outcome, *words, "--help")
    for args, words in ARGUMENT_ERRORS[:2]:  # and as real commands
        one_line_error(run(*args), *words)
    assert list(tmp_path.iterdir()) == []  # nothing written


# -- class 9: standard output --------------------------------------------------------------------
def commands(tmp_path: Path) -> dict[str, list[str]]:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"targets": [{"measure": "m", "now": 1.0, "unit": "ms"}]}))
    return {
        "scores": ["scores"],
        "scores exercise": ["scores", "--example", "exercise"],
        "export": [
            "export",
            "--example",
            "worked",
            "--format",
            "csv",
            "--heads",
            "all",
            "--out",
            str(tmp_path / "out"),
        ],
        "bench --compare": ["bench", "--compare", str(report), str(report)],
        "--help": ["--help"],
        "scores --help": ["scores", "--help"],
        "--version": ["--version"],
    }


STDOUT_IN_ONE_CHILD = """
import contextlib, io, json, os, sys
from attn_explorer.cli.main import main
outcomes = []
saved = os.dup(1)
for target, argv in json.loads(sys.argv[1]):
    if target == "full":
        fd = os.open("/dev/full", os.O_WRONLY)
    else:  # a pipe whose reader is gone
        read_end, fd = os.pipe()
        os.close(read_end)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(argv)
    os.dup2(saved, 1)
    outcomes.append([status, err.getvalue()])
sys.stdout = sys.__stdout__
print(json.dumps(outcomes))
"""


def test_stdout_that_is_full_or_gone(tmp_path):
    """Each command with stdout on /dev/full (one line, exit 2) and on a pipe whose reader
    went away (quiet, 141): through main() in one child, its descriptor 1 swapped per case."""
    named = commands(tmp_path)
    cases = [["full", argv] for argv in named.values()]
    cases += [["gone", argv] for argv in named.values()]
    done = subprocess.run(
        [sys.executable, "-c", STDOUT_IN_ONE_CHILD, json.dumps(cases)], capture_output=True,
        text=True, env=child_env(), timeout=SECONDS, preexec_fn=_limit,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert len(outcomes) == 2 * len(named) == 14
    for (target, argv), (status, stderr) in zip(cases, outcomes, strict=True):
        if target == "full":
            one_line((status, stderr), "cannot write the output: the disk is full")
        else:
            assert (status, stderr) == (BROKEN_PIPE_STATUS, ""), argv


@pytest.mark.parametrize("name", ["export", "--help"])
def test_a_full_disk_on_stdout_is_one_line_exit_2(tmp_path, name):
    with open("/dev/full", "wb") as full:
        result = run(*commands(tmp_path)[name], stdout=full)
    one_line_error(result, "cannot write the output: the disk is full")


@pytest.mark.parametrize("name", ["scores", "bench --compare"])
def test_a_reader_that_went_away_ends_quietly(tmp_path, name):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -c0`: the reader is gone before the first write
    try:
        result = run(*commands(tmp_path)[name], stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == BROKEN_PIPE_STATUS, result.stderr
    assert result.stderr == b""


def test_a_reader_that_stops_after_one_byte_ends_quietly(tmp_path):
    report = tmp_path / "r.json"
    rows = [{"measure": f"row {i}", "now": float(i), "unit": "ms"} for i in range(20_000)]
    report.write_text(json.dumps({"targets": rows}))  # a table far over a pipe's 64 KB
    argv = [sys.executable, "-m", "attn_explorer", "bench", "--compare", str(report), str(report)]
    writer = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), preexec_fn=_limit
    )
    assert writer.stdout is not None and writer.stderr is not None
    with writer.stderr:
        assert len(writer.stdout.read(1)) == 1
        writer.stdout.close()  # `| head -c1`
        assert writer.wait(SECONDS) == BROKEN_PIPE_STATUS
        assert writer.stderr.read() == b""


@pytest.mark.parametrize("name", ["scores", "export"])
def test_a_closed_stdout_is_refused_before_any_work(tmp_path, name):
    result = run(*commands(tmp_path)[name], shell_suffix=">&-")
    one_line_error(result, "standard output is closed")
    assert not (tmp_path / "out").exists()


# -- class 12: paths -----------------------------------------------------------------------------
OUTPUT_PATHS = [
    ("a" * 4000, ["--out", "4,000 bytes", "255"]),
    ("b" * 256, ["--out", "256 bytes"]),
    ("/".join(["c" * 200] * 21), ["--out", "the path is", "4,095"]),
    ("two\nlines", ["--out", "control character '\\n'", "one path per line"]),
    ("tab\there", ["--out", "'\\t'"]),
    ("esc\x1b[31mred", ["--out", "'\\x1b'"]),
    ("cr\rhere", ["--out", "'\\r'"]),
]


def test_output_paths_the_system_or_one_line_cannot_hold(tmp_path, monkeypatch):
    argvs = [["export", "--example", "worked", "--out", out] for out, _ in OUTPUT_PATHS]
    for (_, words), outcome in zip(OUTPUT_PATHS, run_many(argvs, cwd=tmp_path), strict=True):
        one_line(outcome, *words)
    monkeypatch.chdir(tmp_path)
    for out, words in OUTPUT_PATHS[:1] + OUTPUT_PATHS[3:4]:  # as real commands
        one_line_error(run("export", "--example", "worked", "--out", out), *words)
    assert list(tmp_path.iterdir()) == []


# -- class 11: --width is estimated from the image's real size -----------------------------------
def peak_run(*args) -> tuple[int, str, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "attn_explorer", *args], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, env=child_env(), preexec_fn=_limit,
    )  # fmt: skip
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, stderr, usage.ru_maxrss * 1024


def test_a_wide_png_of_a_small_session_is_made_within_its_estimate(tmp_path):
    from attn_explorer.state.presets import preset
    from attn_explorer.state.session import Session
    from attn_explorer.state.storage.export import export_memory_estimate

    chosen = preset("worked")
    session = Session(chosen.snapshot, chosen.options)
    _, _, baseline = peak_run("export", "--example", "worked", "--out", tmp_path / "base",
                              "--width", "200")  # fmt: skip
    status, stderr, peak = peak_run(
        "export", "--example", "worked", "--out", tmp_path / "wide", "--width", "4000"
    )
    assert status == 0, stderr
    (png,) = (tmp_path / "wide").iterdir()
    assert png.read_bytes()[16:20] == (4000).to_bytes(4, "big")  # the PNG's IHDR width
    assert peak - baseline <= export_memory_estimate(session, "scores", "png", 4000)


@pytest.mark.parametrize(("width", "fmt"), [(16000, "png"), (9000, "png")])
def test_a_width_too_wide_for_the_limit_is_named(tmp_path, width, fmt):
    result = run("export", "--example", "worked", "--out", str(tmp_path / "o"),
                 "--width", str(width), "--format", fmt)  # fmt: skip
    stderr = one_line_error(result, f"--width {width}:", "or less fits")
    assert "fewer heads or tokens" not in stderr  # the session is not the cause
    assert not (tmp_path / "o").exists()


def test_a_vector_image_of_the_widest_width_is_made(tmp_path):
    result = run("export", "--example", "worked", "--out", str(tmp_path / "o"),
                 "--width", "16000", "--format", "svg")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "o").iterdir())) == 1


# -- class 8: bench --compare reads as the session reader does -----------------------------------
def hostile_reports(tmp_path: Path) -> list[tuple[Path, str]]:
    good = {"measure": "m", "now": 1.0, "unit": "ms"}

    def report(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    def rows(*items: object) -> str:
        return json.dumps({"targets": list(items)})

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    return [
        (zero, "is a device"),
        (fifo, "named pipe (FIFO)"),
        (folder, "is a folder"),
        (tmp_path / "missing.json", "no such file"),
        (report("deep.json", "[" * 100_000 + "]" * 100_000), "nested too deeply"),
        (report("big.json", " " * (5 * 2**20)), "over the limit"),
        (report("latin1.json", b'{"targets": ["\xff"]}'), "not UTF-8"),
        (report("empty.json", ""), "not JSON"),
        (report("list.json", "[]"), "no 'targets' list"),
        (report("rowlist.json", rows([1, 2])), "targets[0] is list"),
        (report("nomeasure.json", rows({"now": 1, "unit": "ms"})), "no 'measure'"),
        (report("nonow.json", rows({"measure": "m", "unit": "ms"})), "no 'now'"),
        (report("textnow.json", rows({**good, "now": "fast"})), "targets[0].now is 'fast'"),
        (report("boolnow.json", rows(good, {**good, "now": True})), "targets[1].now is True"),
        (report("intmeasure.json", rows({**good, "measure": 5})), "measure is 5; expected text"),
        (report("better.json", rows({**good, "better": "sideways"})), "lower or higher"),
        (report("nantarget.json", rows({**good, "target": float("nan")})), "target is nan"),
        (report("listunit.json", rows({**good, "unit": ["ms"]})), "unit is ['ms']"),
    ]


def test_hostile_compare_files_are_one_line_each(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"targets": [{"measure": "m", "now": 1.0, "unit": "ms"}]}))
    cases = hostile_reports(tmp_path)
    pairs = [[str(p), str(good)] for p, _ in cases] + [[str(good), str(p)] for p, _ in cases]
    outcomes = run_many([["bench", "--compare", *pair] for pair in pairs])
    for (path, words), outcome in zip(cases * 2, outcomes, strict=True):
        one_line(outcome, str(path), words)
    assert len(cases) >= 18
    for path, words in cases[:3]:  # and the real command for a few, special files first
        one_line_error(run("bench", "--compare", str(path), str(good)), str(path), words)


# -- classes 3 and 6 on the command line ------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    return path


NOT_UTF8 = [b"\xff", b"caf\xc3", b"ok \xed\xa0\x80 surrogate", b"\x80abc"]


def test_text_that_is_not_utf8_is_one_line_for_the_decoder(tmp_path, tiny_gguf):
    out = tmp_path / "o"
    argvs = [["export", "--model", str(tiny_gguf), "--text", text, "--out", str(out)]
             for text in NOT_UTF8]  # fmt: skip
    for outcome in run_many(argvs):
        one_line(outcome, "error: --text: character", "not UTF-8")  # the flag, not the API
    result = run(b"export", b"--model", bytes(tiny_gguf), b"--text", b"\xff", b"--out", bytes(out))
    one_line_error(result, "--text: character 1 is the byte 0xFF, which is not UTF-8")
    assert not out.exists()


def test_special_files_named_gguf_on_the_command_line(tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    device = tmp_path / "zero.gguf"
    device.symlink_to("/dev/zero")
    cases = [(fifo, "named pipe"), (folder, "is a folder"), (device, "a device")]
    out = str(tmp_path / "o")
    argvs = [["export", "--model", str(path), "--text", "hi", "--out", out] for path, _ in cases]
    for (path, words), outcome in zip(cases, run_many(argvs), strict=True):
        one_line(outcome, str(path), words)
    one_line_error(run("export", "--model", str(fifo), "--text", "hi", "--out", out), "FIFO")
    assert not (tmp_path / "o").exists()
