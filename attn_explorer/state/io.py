"""Session files (versioned JSON) and the export helpers that need no widget (CSV, NPZ).

Qt-free. A session file holds the tokens, Q/K/V of every (batch, head) as nested
lists and every :class:`~attn_explorer.state.session.Options` field; the format is
described in ``docs/session-format.md``. Loading validates everything and raises
:class:`SessionFileError` naming the first problem by its JSON path, e.g.
``batches[0].heads[1].key[2][0]: expected a number, got "x"``. Loading builds new
objects, so a bad file never touches the open session. Every file is written
atomically (a temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.colormaps import COLORMAPS
from attn_explorer.compute import STAGES
from attn_explorer.state.presets import preset
from attn_explorer.state.session import MATRICES, Options, Session, Snapshot

FORMAT_NAME = "attn-explorer-session"
FORMAT_VERSION = 1

#: Shipped example sessions: file name → preset it is generated from (and its title).
EXAMPLE_FILES = {
    "worked.json": "worked",
    "exercise.json": "exercise",
    "random-4-heads.json": "random",
    "causal.json": "causal",
}


class SessionFileError(Exception):
    """A session file cannot be read or written; the message says where and what to do."""


class ExportError(Exception):
    """An export cannot be written; the message says why and what to do. Nothing changed."""


@dataclass(frozen=True)
class LoadedSession:
    """What a session file holds, validated; hand it to ``Session.load(snapshot, options)``."""

    snapshot: Snapshot
    options: Options
    name: str


# -- writing files --------------------------------------------------------------------------
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
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    Either the whole new file is there afterwards or the old one is untouched.
    Raises ``OSError`` (see :func:`os_error_reason` for a message).
    """
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


# -- session → JSON -------------------------------------------------------------------------
def _number(value: float) -> float | int:
    """Whole numbers as JSON integers (``1`` not ``1.0``); anything else as the exact float."""
    if (
        value.is_integer()
        and abs(value) < 1e15
        and not (value == 0 and math.copysign(1, value) < 0)
    ):
        return int(value)
    return value


def _matrix(array: np.ndarray) -> list[list[float | int]]:
    return [[_number(v) for v in row] for row in array.tolist()]


def snapshot_to_dict(snapshot: Snapshot, options: Options, name: str) -> dict[str, Any]:
    """The JSON-ready dictionary of a session file (see ``docs/session-format.md``)."""
    b, h, t, d = snapshot.shape
    arrays = {m: np.asarray(getattr(snapshot, m), dtype=np.float64) for m in MATRICES}
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": name,
        "shape": {"B": b, "H": h, "T": t, "d": d},
        "tokens": list(snapshot.tokens),
        "batches": [
            {"heads": [{m: _matrix(arrays[m][bi, hi]) for m in MATRICES} for hi in range(h)]}
            for bi in range(b)
        ],
        "options": asdict(options),
    }


def session_to_dict(session: Session) -> dict[str, Any]:
    """The JSON-ready dictionary of ``session``'s numbers, names and options."""
    return snapshot_to_dict(session.snapshot(), session.options, session.name)


def session_json(data: dict[str, Any]) -> str:
    """Session-file text: one matrix row per line, so files diff and read well."""
    text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
    # Collapse the innermost lists (matrix rows) onto one line each.
    text = re.sub(
        r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s*", ", ", m[1]) + "]", text
    )
    return text + "\n"


def save_session(session: Session, path: str | os.PathLike[str]) -> Path:
    """Write ``session`` to ``path`` atomically; ``SessionFileError`` if it cannot be written.

    Does not mark the session saved: the caller does ``session.mark_saved(path)``.
    """
    text = session_json(session_to_dict(session))
    try:
        return write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise SessionFileError(f"could not save {path}: {os_error_reason(exc)}") from None


# -- JSON → session -------------------------------------------------------------------------
def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    text = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    return text if len(text) <= 40 else text[:37] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return f"the text {_shown(value)}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _fail(path: str, message: str) -> SessionFileError:
    return SessionFileError(f"{path or '(top level)'}: {message}")


def _field(obj: dict[str, Any], name: str, path: str) -> Any:
    if name not in obj:
        raise _fail(path, f'missing field "{name}"')
    return obj[name]


def _object(value: Any, path: str, allowed: Sequence[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object {{...}}, got {_type_name(value)}")
    for key in value:
        if key not in allowed:
            raise _fail(path, f'unknown field "{key}"; expected one of {", ".join(allowed)}')
    return value


def _list(value: Any, path: str, length: int | None = None, what: str = "items") -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list [...], got {_type_name(value)}")
    if length is not None and len(value) != length:
        raise _fail(path, f"expected {length} {what}, got {len(value)}")
    return value


def _int(value: Any, path: str, low: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected a whole number, got {_type_name(value)}")
    if low is not None and value < low:
        raise _fail(path, f"expected a whole number ≥ {low}, got {value}")
    return value


def _read_matrix(value: Any, path: str, rows: int, cols: int, row_what: str) -> np.ndarray:
    _list(value, path, rows, row_what)
    out = np.empty((rows, cols), dtype=np.float64)
    for i, row in enumerate(value):
        row_path = f"{path}[{i}]"
        _list(row, row_path, cols, "numbers (one per dimension d)")
        for j, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, int | float):
                raise _fail(f"{row_path}[{j}]", f"expected a number, got {_shown(x)}")
            try:
                number = float(x)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise _fail(f"{row_path}[{j}]", f"expected a finite number, got {_shown(x)}")
            out[i, j] = number
    return out


def _read_options(value: Any, batch: int, heads: int) -> Options:
    defaults = Options()
    names = [f.name for f in fields(Options)]
    data = _object(value, "options", names)
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue  # missing options take their defaults (see docs/session-format.md)
        path = f"options.{name}"
        item = data[name]
        kind = type(getattr(defaults, name))
        if kind is bool and not isinstance(item, bool):
            raise _fail(path, f"expected true or false, got {_shown(item)}")
        if kind is int:
            item = _int(item, path, low=-1 if name == "step" else 0)
        if kind is str and not isinstance(item, str):
            raise _fail(path, f"expected text, got {_type_name(item)}")
        kwargs[name] = item
    options = Options(**kwargs)
    for name in ("score_colormap", "weight_colormap"):
        if getattr(options, name) not in COLORMAPS:
            raise _fail(
                f"options.{name}",
                f"{getattr(options, name)!r} is not one of {', '.join(COLORMAPS)}",
            )
    try:
        options.validate(batch, heads)
    except ValueError as exc:
        raise SessionFileError(f"options.{exc}".rstrip(".")) from None
    return options


def session_from_dict(data: Any) -> LoadedSession:
    """Validate a parsed session file and build new state from it; ``SessionFileError`` if bad."""
    top = _object(data, "", ["format", "version", "name", "shape", "tokens", "batches", "options"])
    fmt = top.get("format")
    if fmt != FORMAT_NAME:
        got = "no format name" if fmt is None else f"format {_shown(fmt)}"
        raise SessionFileError(
            f'format: this is not an Attention Explorer session (expected "{FORMAT_NAME}", '
            f"found {got})"
        )
    version = _int(_field(top, "version", ""), "version", low=1)
    if version > FORMAT_VERSION:
        raise SessionFileError(
            f"version: the file is format version {version}, newer than this app reads "
            f"({FORMAT_VERSION}); update Attention Explorer to open it"
        )
    name = _field(top, "name", "")
    if not isinstance(name, str):
        raise _fail("name", f"expected text, got {_type_name(name)}")
    shape = _object(_field(top, "shape", ""), "shape", ["B", "H", "T", "d"])
    b, h, t, d = (_int(_field(shape, k, "shape"), f"shape.{k}") for k in ("B", "H", "T", "d"))
    problem = Session.check_size(b, h, t, d)
    if problem:
        raise _fail("shape", problem)
    tokens = _list(_field(top, "tokens", ""), "tokens", t, "token names (shape.T)")
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token.strip():
            raise _fail(f"tokens[{i}]", f"expected a non-empty name, got {_shown(token)}")
    batches = _list(_field(top, "batches", ""), "batches", b, "batches (shape.B)")
    arrays = {m: np.empty((b, h, t, d), dtype=np.float64) for m in MATRICES}
    for bi, batch in enumerate(batches):
        bpath = f"batches[{bi}]"
        heads = _list(_field(_object(batch, bpath, ["heads"]), "heads", bpath), f"{bpath}.heads")
        _list(heads, f"{bpath}.heads", h, "heads (shape.H)")
        for hi, head in enumerate(heads):
            hpath = f"{bpath}.heads[{hi}]"
            _object(head, hpath, MATRICES)
            for m in MATRICES:
                arrays[m][bi, hi] = _read_matrix(
                    _field(head, m, hpath), f"{hpath}.{m}", t, d, "rows (one per token, shape.T)"
                )
    options = _read_options(_field(top, "options", ""), b, h)
    snapshot = Snapshot(tuple(tokens), arrays["query"], arrays["key"], arrays["value"])
    return LoadedSession(snapshot, options, name)


def load_session(path: str | os.PathLike[str]) -> LoadedSession:
    """Read and validate a session file; ``SessionFileError`` names the first problem."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SessionFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SessionFileError(f"{path}: is a folder, not a session file") from None
    except OSError as exc:
        raise SessionFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SessionFileError(f"{path}: not a text file (expected UTF-8 JSON)") from None
    return load_session_text(text, str(path))


def load_session_text(text: str, source: str = "session") -> LoadedSession:
    """Parse and validate session-file text; ``source`` names it in error messages."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionFileError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise SessionFileError(f"{source}: not valid JSON (nested too deeply)") from None
    try:
        return session_from_dict(data)
    except SessionFileError as exc:
        raise SessionFileError(f"{source}: {exc}") from None


# -- examples --------------------------------------------------------------------------------
def list_examples() -> list[tuple[str, Traversable]]:
    """The shipped example sessions as (menu title, file), in menu order."""
    from attn_explorer.resources_path import resource

    return [
        (preset(name).title, resource("examples", file)) for file, name in EXAMPLE_FILES.items()
    ]


def load_example(file: Traversable) -> LoadedSession:
    """Load a shipped example (one of :func:`list_examples`'s files)."""
    return load_session_text(file.read_text(encoding="utf-8"), file.name)


def example_text(file_name: str) -> str:
    """The session-file text an example is generated from (its preset)."""
    chosen = preset(EXAMPLE_FILES[file_name])
    return session_json(snapshot_to_dict(chosen.snapshot, chosen.options, chosen.name))


def write_examples(folder: str | os.PathLike[str]) -> list[Path]:
    """Regenerate the example session files in ``folder`` from the presets."""
    return [
        write_atomic(Path(folder) / file, example_text(file).encode("utf-8"))
        for file in EXAMPLE_FILES
    ]


# -- CSV and NPZ export ------------------------------------------------------------------------
def stage_array(session: Session, stage: str) -> np.ndarray:
    """(B, H, T, T) of a score stage, or (B, H, T, d_v) for ``output``; ExportError if absent."""
    if stage not in STAGES:
        raise ExportError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    array = session.result().stage(stage)
    if array is None:
        raise ExportError(f"stage {stage!r} needs value vectors V; add values first")
    return array


def column_labels(session: Session, stage: str) -> list[str]:
    """Key tokens for the score stages; value dimensions d1..d_v for ``output``."""
    if stage == "output":
        return [f"d{c + 1}" for c in range(session.shape[3])]
    return session.tokens


def csv_text(row_labels: Sequence[str], col_labels: Sequence[str], matrix: np.ndarray) -> str:
    """A table with token labels as header row and first column; exact float repr (−inf kept)."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["query \\ key", *col_labels])
    for label, row in zip(row_labels, matrix.tolist(), strict=True):
        writer.writerow([label, *(repr(float(v)) for v in row)])
    return stream.getvalue()


def read_csv(path: str | os.PathLike[str]) -> tuple[list[str], list[str], np.ndarray]:
    """Read a CSV written by :func:`csv_text`: (row labels, column labels, float64 matrix)."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    header, body = rows[0], rows[1:]
    matrix = np.array([[float(v) for v in row[1:]] for row in body], dtype=np.float64)
    return [row[0] for row in body], header[1:], matrix.reshape(len(body), len(header) - 1)


def write_csv(path: Path, session: Session, stage: str, head: int) -> Path:
    """One head's ``stage`` matrix (of the selected batch) as CSV at ``path``."""
    matrix = stage_array(session, stage)[session.options.batch_index, head]
    text = csv_text(session.tokens, column_labels(session, stage), matrix)
    return write_atomic(path, text.encode("utf-8"))


def npz_arrays(session: Session) -> dict[str, np.ndarray]:
    """Everything an NPZ export holds: Q, K, V (float64), every stage, tokens, options (JSON)."""
    result = session.result()
    arrays: dict[str, np.ndarray] = {m: np.array(session.matrix(m)) for m in MATRICES}
    for stage in STAGES:
        value = result.stage(stage)
        if value is not None:
            arrays[stage] = np.array(value)  # (B, H, T, T) or output (B, H, T, d_v)
    arrays["tokens"] = np.array(session.tokens, dtype=str)
    arrays["options"] = np.array(json.dumps(asdict(session.options)))
    arrays["name"] = np.array(session.name)
    return arrays


def write_npz(path: Path, session: Session) -> Path:
    """All heads and stages as a compressed ``.npz`` (read with ``np.load(path)``)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **npz_arrays(session))  # type: ignore[arg-type]
    return write_atomic(path, buffer.getvalue())


def guarded_write(path: Path, write: Callable[[], Path]) -> Path:
    """Run ``write`` and turn an ``OSError`` into an ``ExportError`` naming ``path``."""
    try:
        return write()
    except OSError as exc:
        raise ExportError(f"could not write {path}: {os_error_reason(exc)}") from None


if __name__ == "__main__":  # python -m attn_explorer.state.io  → regenerate resources/examples
    from attn_explorer.resources_path import resource

    for written in write_examples(str(resource("examples"))):
        print(written)
