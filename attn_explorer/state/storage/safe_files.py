"""Reading the files a user chooses and writing every file the app writes. Qt-free.

Four rules, each in one place:

* **Read only regular files, and only up to a stated size.** A FIFO, a device
  (a link to ``/dev/zero``), a socket or a folder is refused from ``os.stat``
  without opening it; the file is then opened non-blocking and checked again
  with ``fstat`` (so a FIFO swapped in between cannot hang the read), and a
  file over the limit is refused before a byte is read.
* **Write atomically.** Data goes to a temporary file in the target's folder,
  is flushed to disk and renamed over the target, so a full disk or a crash
  leaves the old file as it was; the temporary file is removed on failure, and
  ones left behind by a killed process are cleaned up by the next write. A save through a
  symbolic link replaces the file the link names (in that file's folder); the link stays.
* **Parse a user's JSON without surprises:** :func:`parse_json` keeps integers too long
  to convert and notes duplicate keys, so both are reported at their JSON path.
* **Write only text UTF-8 can hold:** :func:`clean_text` replaces unpaired surrogates.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

#: A temporary file of a write older than this was left by a killed process: removed.
STALE_TEMP_SECONDS = 3600


class FileRefused(ValueError):
    """A user-chosen file cannot be read; the message (without the path) says why."""


def clean_text(text: str) -> str:
    """``text`` with every unpaired surrogate (``\\ud800``) replaced by U+FFFD.

    JSON's ``\\ud800`` escape and some clipboards produce them; UTF-8 cannot
    encode them, so saving, CSV and NPZ would fail. Valid pairs are joined.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


#: Whole numbers with more digits are not converted (Python refuses over 4 300 digits);
#: no field of a session or model configuration needs one.
MAX_INTEGER_DIGITS = 100


class HugeInteger:
    """A JSON whole number too long to convert (see :data:`MAX_INTEGER_DIGITS`)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __str__(self) -> str:
        return f"a whole number with {self.digits:,} digits"

    __repr__ = __str__


def _parse_int(text: str) -> int | HugeInteger:
    return HugeInteger(text) if len(text) > MAX_INTEGER_DIGITS else int(text)


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers the keys it held more than once (the last one wins)."""

    duplicates: tuple[str, ...] = ()


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    if len(obj) != len(pairs):  # counted in one pass: 50 000 keys twice each stay cheap
        counts = Counter(key for key, _ in pairs)
        obj.duplicates = tuple(key for key, count in counts.items() if count > 1)
    return obj


def parse_json(text: str) -> Any:
    """``json.loads`` for a file a user chose: huge integers unconverted, duplicate keys noted.

    A whole number over :data:`MAX_INTEGER_DIGITS` digits becomes a
    :class:`HugeInteger` (``int()`` would refuse over 4 300 digits with a bare
    ``ValueError``) and every object is a dict whose ``duplicates`` attribute
    lists its repeated keys, so the caller can report both at their JSON path.

    Raises ``json.JSONDecodeError`` or ``RecursionError`` as ``json.loads`` does.
    """
    return json.loads(text, parse_int=_parse_int, object_pairs_hook=_json_object)


def os_error_reason(exc: OSError) -> str:
    """A short, user-facing reason for a failed write, with what to do about it."""
    reasons = {
        errno.ENOSPC: "the disk is full; free some space or choose another drive",
        errno.EDQUOT: "the disk quota is exceeded; free some space or choose another drive",
        errno.EACCES: "permission denied; choose a folder you can write to",
        errno.EPERM: "permission denied; choose a folder you can write to",
        errno.EROFS: "the drive is read-only; choose another folder",
        errno.ENOENT: "the folder does not exist; create it or choose another",
        errno.ENOTDIR: "part of the path is a file, not a folder; choose another path",
        errno.EISDIR: "a folder has that name; choose a file name",
        errno.ENAMETOOLONG: "the file name is too long; choose a shorter one",
        errno.ELOOP: "the path is a loop of symbolic links; choose another",
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def megabytes(size: int) -> str:
    """``size`` bytes in MB for a message: ``64 MB``, ``0.3 MB``."""
    value = size / 2**20
    return f"{value:,.0f} MB" if value >= 10 else f"{value:.1f} MB"


def _check_regular(info: os.stat_result, max_bytes: int, what: str) -> None:
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise FileRefused("is a folder, not a file")
    kinds = (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    for test, kind in kinds:
        if test(mode):
            raise FileRefused(f"is {kind}, not a regular file; choose a saved {what}")
    if not stat.S_ISREG(mode):
        raise FileRefused(f"is not a regular file; choose a saved {what}")
    if info.st_size > max_bytes:
        raise FileRefused(
            f"is {megabytes(info.st_size)}, over the limit of {megabytes(max_bytes)} "
            f"for a {what}; this is not a file the app wrote"
        )


def open_regular_file(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> BinaryIO:
    """Open the regular file at ``path`` for reading, refusing anything else first.

    ``os.stat`` refuses a folder, a FIFO, a device, a socket or a file over
    ``max_bytes`` without opening it; the file is then opened non-blocking (a
    FIFO swapped in meanwhile cannot hang the open) and checked again with
    ``fstat``. Raises :class:`FileRefused` saying why, without the path.
    """
    try:
        _check_regular(os.stat(path), max_bytes, what)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except OSError as exc:
        raise FileRefused(f"cannot be read ({exc.strerror or exc})") from None
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        handle = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileRefused(f"cannot be read ({exc.strerror or exc})") from None
    try:
        _check_regular(os.fstat(handle), max_bytes, what)  # the file that was opened
    except BaseException:
        os.close(handle)
        raise
    return os.fdopen(handle, "rb")  # regular files ignore O_NONBLOCK


def read_user_file(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    Raises :class:`FileRefused` (a ``ValueError``) whose message, without the
    path, says why: missing, unreadable, a folder, not a regular file, or too big.
    """
    with open_regular_file(path, max_bytes, what) as stream:
        size = os.fstat(stream.fileno()).st_size  # ≤ max_bytes, checked on opening
        try:
            data = stream.read(size + 1)  # read(n) allocates n bytes: never max_bytes
        except OSError as exc:
            raise FileRefused(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > size:
        raise FileRefused("changed while it was being read; try again")
    return data


def _temp_prefix(target: Path) -> str:
    """``.<name>.`` with the name cut to 100 bytes, so the temporary name is never too long."""
    name = target.name
    while len(os.fsencode(name)) > 100:
        name = name[:-1]
    return f".{name}."


def remove_stale_temps(target: Path, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove ``.<name>.*.tmp`` files next to ``target`` older than ``older_than`` seconds.

    They are what a write killed between creating its temporary file and the
    rename leaves behind. Returns the paths removed; never raises.
    """
    removed: list[Path] = []
    now = time.time()
    prefix = glob.escape(_temp_prefix(target))
    pattern = os.path.join(glob.escape(str(target.parent)), f"{prefix}*.tmp")
    for name in glob.glob(pattern, include_hidden=True):
        candidate = Path(name)
        with contextlib.suppress(OSError):
            info = candidate.lstat()
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > older_than:
                candidate.unlink()
                removed.append(candidate)
    return removed


def resolve_link(path: Path) -> Path:
    """The file a save to ``path`` should replace: ``path`` itself, or, when it is a
    symbolic link, the file the link names (followed to the end), as editors do, so the
    link stays a link and the real file gets the edit. A loop is ``OSError(ELOOP)``."""
    if not path.is_symlink():
        return path
    resolved = Path(os.path.realpath(path))
    if resolved.is_symlink():  # realpath gives up on a loop and hands back a link
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(path))
    return resolved


def write_atomic_with(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(stream)`` on a temporary file next to ``path``, then rename it over ``path``.

    Either the whole new file is there afterwards or the old one is untouched,
    and no temporary file is left. Through a symbolic link the link's target is
    replaced, from a temporary file in the target's folder (:func:`resolve_link`).
    Raises ``OSError`` (see :func:`os_error_reason`), or whatever ``write`` raises.
    """
    chosen = Path(path)
    target = resolve_link(chosen)
    folder = target.parent
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    remove_stale_temps(target)
    handle, temp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return chosen  # the name the user chose (a link stays the document's name)


def write_atomic(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomic_with`)."""
    return write_atomic_with(path, lambda stream: stream.write(data))
