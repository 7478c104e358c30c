"""Issue 12, item 2: on a really full disk every writer fails cleanly and keeps the previous file.

A 256 KB tmpfs is mounted for each test (root only; skipped with the reason
otherwise) and always unmounted afterwards. For each writer — session save,
every export format, the model export and the command line — a good file is
written first, the disk is filled, and the same write is tried again: it must
fail with the app's own error (or exit status 2 and one line), the previous
file must be byte-identical and no temporary file may be left behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attn_explorer.state.app_state import AppState
from attn_explorer.state.presets import preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage import session_file as io
from attn_explorer.state.storage.session_file import ExportError, SessionFileError

DISK_SIZE = "256k"  # room for one small SVG (66 KB) and the files beside it


@pytest.fixture
def tiny_disk(tmp_path):
    """A freshly mounted 256 KB tmpfs, unmounted (lazily if busy) whatever the test does."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; run the tests as root to check a full disk")
    if shutil.which("mount") is None:
        pytest.skip("no mount command on this system")
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"could not mount a tmpfs: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(disk: Path) -> None:
    """Write a filler file until the disk refuses another byte."""
    with open(disk / "filler", "wb", buffering=0) as stream:
        while True:
            try:
                stream.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    with pytest.raises(OSError), open(disk / "probe", "wb") as probe:
        probe.write(b"x" * 4096)
        probe.flush()
        os.fsync(probe.fileno())
    (disk / "probe").unlink()


def files_in(disk: Path) -> list[str]:
    return sorted(path.name for path in disk.iterdir() if path.name != "filler")


def make_state(name: str = "worked") -> AppState:
    chosen = preset(name)
    return AppState(Session(chosen.snapshot, chosen.options), name=chosen.name)


def save(state: AppState, path: Path) -> Path:
    return io.save_session(state.session, path, state.document.name)


def test_session_save(tiny_disk):
    path = tiny_disk / "s.json"
    save(make_state("worked"), path)
    before = path.read_bytes()
    fill(tiny_disk)
    with pytest.raises(SessionFileError, match="the disk is full"):
        save(make_state("exercise"), path)
    assert path.read_bytes() == before
    assert files_in(tiny_disk) == ["s.json"]


@pytest.mark.parametrize("fmt", ["png", "svg", "csv", "npz"])
def test_every_export_format(tiny_disk, fmt, qapp):  # qapp: a QApplication for the painter
    from attn_explorer.render.figure import export_heatmaps

    path = tiny_disk / f"heatmap.{fmt}"
    (written,) = export_heatmaps(make_state("worked"), path, stage="scores", width=300)
    assert written == path
    before = path.read_bytes()
    fill(tiny_disk)
    with pytest.raises(ExportError, match="the disk is full"):
        export_heatmaps(make_state("exercise"), path, stage="weights", width=300)
    assert path.read_bytes() == before
    assert files_in(tiny_disk) == [path.name]


def run_cli(*args: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    return subprocess.run(
        [sys.executable, "-m", "attn_explorer", "export", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def assert_one_line_exit_2(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "the disk is full" in result.stderr


@pytest.mark.parametrize("fmt", ["npz", "png"])
@pytest.mark.slow
def test_model_export(tiny_disk, tmp_path, fmt):
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    model = write_tiny_bert(tmp_path / "tiny-bert")
    first = run_cli("--model", model, "--text", "the cat sat", "--out", tiny_disk, "--format", fmt)
    assert first.returncode == 0, first.stderr
    path = tiny_disk / f"tiny-bert.{fmt}"
    before = path.read_bytes()
    fill(tiny_disk)
    again = run_cli("--model", model, "--text", "the dog ran", "--out", tiny_disk, "--format", fmt)
    assert_one_line_exit_2(again)
    assert path.read_bytes() == before
    assert files_in(tiny_disk) == [path.name]


def test_model_export_in_process_raises_oserror_and_keeps_the_file(tiny_disk, tmp_path):
    from attn_explorer.cli.model_export import run_model_export
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    model = write_tiny_bert(tmp_path / "tiny-bert")
    (path,) = run_model_export(model, "the cat sat", tiny_disk, "npz")
    before = path.read_bytes()
    fill(tiny_disk)
    with pytest.raises(OSError) as info:
        run_model_export(model, "the dog ran on the mat", tiny_disk, "npz")
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == before
    assert files_in(tiny_disk) == [path.name]


@pytest.mark.parametrize("fmt", ["csv", "png"])
def test_session_export_from_the_command_line(tiny_disk, tmp_path, fmt):
    session_file = tmp_path / "s.json"
    save(make_state("worked"), session_file)
    args = ("--out", tiny_disk, "--format", fmt, "--heads", "1", "--width", 300)
    first = run_cli(session_file, *args)
    assert first.returncode == 0, first.stderr
    (path,) = (Path(line) for line in first.stdout.splitlines())
    before = path.read_bytes()
    fill(tiny_disk)
    assert_one_line_exit_2(run_cli(session_file, *args, "--stage", "weights"))
    assert path.read_bytes() == before
    assert files_in(tiny_disk) == [path.name]
