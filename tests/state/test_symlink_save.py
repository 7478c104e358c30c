"""Issue 24, class 13: saving through a symbolic link writes the link's target, atomically,
from a temporary file in the target's folder; the link stays a link."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest

from attn_explorer.state.presets import preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage.safe_files import write_atomic, write_atomic_with
from attn_explorer.state.storage.session_file import load_session, save_session


def layouts(tmp_path):
    """(link, real file) pairs of every shape a link takes, the real file holding b'old'."""
    here, there = tmp_path / "here", tmp_path / "there" / "deep"
    here.mkdir()
    there.mkdir(parents=True)
    cases = []

    def real(name, folder=there):
        path = folder / name
        path.write_bytes(b"old")
        return path

    same = real("same.json", here)
    (here / "same-link.json").symlink_to(same.name)  # relative, same folder
    cases.append((here / "same-link.json", same))
    other = real("other.json")
    (here / "abs-link.json").symlink_to(other)  # absolute, another folder
    cases.append((here / "abs-link.json", other))
    relative = real("relative.json")
    (here / "rel-link.json").symlink_to(os.path.relpath(relative, here))
    cases.append((here / "rel-link.json", relative))
    chained = real("chained.json")
    (there / "middle.json").symlink_to(chained)
    (here / "chain-link.json").symlink_to(there / "middle.json")  # a link to a link
    cases.append((here / "chain-link.json", chained))
    (tmp_path / "linked-folder").symlink_to(there)  # the folder is the link
    folder_file = real("in-linked-folder.json")
    cases.append((tmp_path / "linked-folder" / "in-linked-folder.json", folder_file))
    return cases


def test_a_save_through_a_link_writes_the_target_and_keeps_the_link(tmp_path, monkeypatch):
    folders = []
    real_mkstemp = tempfile.mkstemp

    def recording_mkstemp(*args, **kwargs):
        folders.append(os.path.realpath(kwargs["dir"]))
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", recording_mkstemp)
    cases = layouts(tmp_path)
    for link, target in cases:
        was_link = link.is_symlink()
        os.chmod(target, 0o640)
        assert write_atomic(link, b"new") == link  # the name the user chose
        assert target.read_bytes() == b"new" and link.read_bytes() == b"new"
        assert link.is_symlink() == was_link  # still a link, not a regular file
        assert folders[-1] == os.path.realpath(target.parent)  # the rename is atomic there
        assert target.stat().st_mode & 0o777 == 0o640  # the target's mode is kept
        assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert len(cases) == 5


def test_a_failed_save_through_a_link_leaves_the_target_as_it_was(tmp_path):
    def broken(stream):
        stream.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    for link, target in layouts(tmp_path):
        with pytest.raises(OSError):
            write_atomic_with(link, broken)
        assert target.read_bytes() == b"old"
        assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_dangling_link_creates_its_target_and_a_loop_is_refused(tmp_path):
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "new" / "made.json")
    (tmp_path / "new").mkdir()
    write_atomic(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "new" / "made.json").read_bytes() == b"made"
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    for loop in (first, second):
        with pytest.raises(OSError) as caught:
            write_atomic(loop, b"x")
        assert caught.value.errno == errno.ELOOP
        assert loop.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.json",
        "b.json",
        "dangling.json",
        "new",
    ]


def test_saving_a_session_through_a_link(tmp_path):
    chosen = preset("exercise")
    session = Session(chosen.snapshot, chosen.options)
    real = tmp_path / "real" / "session.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert save_session(session, link) == link
    assert link.is_symlink()
    loaded = load_session(real)
    assert loaded.snapshot.key.tolist() == session.snapshot().key.tolist()
