"""Session files (versioned JSON): write, read and validate them. Qt-free.

A session file holds the tokens, Q/K/V of every (batch, head) as nested
lists and every :class:`~attn_explorer.state.session.Options` field; the format is
described in ``docs/session-format.md``. Loading validates everything and raises
:class:`SessionFileError` naming the first problem by its JSON path, e.g.
``batches[0].heads[1].key[2][0]: expected a number, got "x"``. Loading builds new
objects, so a bad file never touches the open session. Only regular files up to
:data:`MAX_SESSION_BYTES` are read, and every file is written atomically (see
:mod:`attn_explorer.state.storage.safe_files`). The CSV / NPZ helpers of
:mod:`attn_explorer.state.storage.export` and the file helpers are re-exported here.

One job at ~500 lines: the file format, both directions; most of the length is the
validator, which names the JSON path of every possible mistake.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.compute import MAX_ABS_VALUE
from attn_explorer.compute.validation import first_bad_value
from attn_explorer.state.colormaps import COLORMAPS
from attn_explorer.state.session import Session
from attn_explorer.state.storage.export import (
    ExportError,
    column_labels,
    csv_text,
    guarded_write,
    npz_arrays,
    read_csv,
    stage_array,
    write_csv,
    write_npz,
)
from attn_explorer.state.storage.prompts import (
    PROMPTS_VERSION,
    Prompts,
    prompts_from_dict,
    prompts_problem,
    prompts_to_dict,
)
from attn_explorer.state.storage.safe_files import (
    FileRefused,
    HugeInteger,
    clean_text,
    megabytes,
    os_error_reason,
    parse_json,
    read_user_file,
    write_atomic,
    write_atomic_with,
)
from attn_explorer.state.types import (
    MATRICES,
    UNTITLED,
    Options,
    Snapshot,
    cell_label,
    out_of_range,
)

__all__ = [  # the file and export helpers are re-exported: callers import them from here
    "MAX_NAME_CHARS",
    "MAX_SESSION_BYTES",
    "MAX_TOKEN_CHARS",
    "ExportError",
    "FileRefused",
    "LoadedSession",
    "SessionFileError",
    "clean_text",
    "column_labels",
    "csv_text",
    "guarded_write",
    "load_session",
    "load_session_text",
    "npz_arrays",
    "os_error_reason",
    "parse_json",
    "read_csv",
    "read_user_file",
    "save_session",
    "stage_array",
    "write_atomic",
    "write_atomic_with",
    "write_csv",
    "write_npz",
]

FORMAT_NAME = "attn-explorer-session"
FORMAT_VERSION = PROMPTS_VERSION  # the newest read; a file without prompts is written as 1

#: Largest session file read or written. A file is parsed into Python objects (about 32
#: bytes per number) before it is validated, so 32 MB of JSON costs at most ~300 MB to
#: open; the window's autosave (up to 1 M values, ~22 MB of JSON) always fits.
MAX_SESSION_BYTES = 32 * 1024 * 1024
#: Longest session name (it goes into every export's title and file name).
MAX_NAME_CHARS = 200
#: Longest token name (labels of every table, heatmap and CSV row).
MAX_TOKEN_CHARS = 200


class SessionFileError(Exception):
    """A session file cannot be read or written; the message says where and what to do."""


@dataclass(frozen=True)
class LoadedSession:
    """What a session file holds, validated; hand it to ``Session.load(snapshot, options)``.

    ``notes`` lists what was repaired while loading (an unpaired surrogate in a name
    replaced by U+FFFD), each with its JSON path, for the status bar.
    """

    snapshot: Snapshot
    options: Options
    name: str
    notes: tuple[str, ...] = ()
    prompts: Prompts | None = None  # the model dock's prompts (version 2), if saved


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


def snapshot_to_dict(
    snapshot: Snapshot, options: Options, name: str, prompts: Prompts | None = None
) -> dict[str, Any]:
    """The JSON-ready dictionary of a session file (see ``docs/session-format.md``); with
    ``prompts`` (not empty) a version 2 file, else version 1, which older apps read."""
    b, h, t, d = snapshot.shape
    arrays = {m: np.asarray(getattr(snapshot, m), dtype=np.float64) for m in MATRICES}
    keep = prompts is not None and not prompts.empty
    return {
        "format": FORMAT_NAME,
        "version": PROMPTS_VERSION if keep else 1,
        "name": clean_text(name)[:MAX_NAME_CHARS],
        "shape": {"B": b, "H": h, "T": t, "d": d},
        "tokens": [clean_text(token) for token in snapshot.tokens],
        "batches": [
            {"heads": [{m: _matrix(arrays[m][bi, hi]) for m in MATRICES} for hi in range(h)]}
            for bi in range(b)
        ],
        "options": asdict(options),
    } | ({"prompts": prompts_to_dict(prompts)} if keep and prompts is not None else {})


def session_to_dict(
    session: Session, name: str = UNTITLED, prompts: Prompts | None = None
) -> dict[str, Any]:
    """The JSON-ready dictionary of ``session``'s numbers, token names and options, called
    ``name`` (the document's name: :class:`~attn_explorer.state.document.Document` owns it),
    and the model dock's ``prompts``."""
    return snapshot_to_dict(session.snapshot(), session.options, name, prompts)


def session_json(data: dict[str, Any]) -> str:
    """Session-file text: one matrix row per line, so files diff and read well."""
    text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
    # Collapse the innermost lists (matrix rows) onto one line each.
    text = re.sub(
        r"\[\n\s*([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s*", ", ", m[1]) + "]", text
    )
    return text + "\n"


def save_session(
    session: Session,
    path: str | os.PathLike[str],
    name: str = UNTITLED,
    prompts: Prompts | None = None,
) -> Path:
    """Write ``session``, called ``name``, with the model dock's ``prompts``, to ``path``
    atomically; ``SessionFileError`` if it cannot be written.

    Nothing is written that :func:`load_session` would refuse: a token over
    :data:`MAX_TOKEN_CHARS` or a file over :data:`MAX_SESSION_BYTES` is an error
    (the size is bounded from the shape before the text is built). Does not
    mark the session saved: :class:`~attn_explorer.state.document.Document` does.
    """
    b = session.shape[0]
    values = session.value_count
    if 2 * values > MAX_SESSION_BYTES:  # every number takes at least 2 bytes ("0,")
        raise SessionFileError(
            f"could not save {path}: {values:,} values do not fit the session-file limit of "
            f"{megabytes(MAX_SESSION_BYTES)}; use fewer heads, tokens or dimensions, "
            "or export NPZ"
        )
    for matrix in MATRICES:
        array = session.matrix(matrix)
        bad = first_bad_value(array)  # min and max: no temporary array when all is well
        if bad is not None:
            where = cell_label(matrix, bad, session.tokens, b)
            raise SessionFileError(
                f"could not save {path}: {where}: {out_of_range(float(array[bad]))}"
            )
    for index, token in enumerate(session.tokens):
        if len(token) > MAX_TOKEN_CHARS:
            raise SessionFileError(
                f"could not save {path}: token {index + 1} is {len(token):,} characters long, "
                f"over the limit of {MAX_TOKEN_CHARS}; rename it"
            )
    data = session_json(session_to_dict(session, name, prompts)).encode("utf-8")
    if len(data) > MAX_SESSION_BYTES:
        raise SessionFileError(
            f"could not save {path}: the file would be {megabytes(len(data))}, over the "
            f"limit of {megabytes(MAX_SESSION_BYTES)} that Open reads; use fewer heads, "
            "tokens or dimensions, or export NPZ"
        )
    try:
        return write_atomic(path, data)
    except OSError as exc:
        raise SessionFileError(f"could not save {path}: {os_error_reason(exc)}") from None


# -- JSON → session -------------------------------------------------------------------------
def _shown(value: Any) -> str:
    if isinstance(value, HugeInteger):
        return str(value)
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    text = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    return text if len(text) <= 40 else text[:37] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, HugeInteger):
        return str(value)
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


def _object(
    value: Any, path: str, allowed: Sequence[str], retired: Sequence[str] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object {{...}}, got {_type_name(value)}")
    for key in getattr(value, "duplicates", ()):
        raise _fail(path, f'field "{key}" appears more than once; keep one')
    for key in value:
        if key not in allowed and key not in retired:
            raise _fail(path, f'unknown field "{key}"; expected one of {", ".join(allowed)}')
    return value


def _list(value: Any, path: str, length: int | None = None, what: str = "items") -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list [...], got {_type_name(value)}")
    if length is not None and len(value) != length:
        raise _fail(path, f"expected {length} {what}, got {len(value)}")
    return value


def _int(value: Any, path: str, low: int | None = None) -> int:
    if isinstance(value, HugeInteger):
        raise _fail(path, f"expected a whole number, got {value} (far too large)")
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
        # Fast path: a row of plain numbers (bool is not int here: type() is exact).
        if all(type(x) is float or type(x) is int for x in row):
            try:
                out[i] = row
            except OverflowError:  # a whole number beyond float64: the slow path names it
                pass
            else:
                if (np.abs(out[i]) <= MAX_ABS_VALUE).all():  # False for NaN and ±inf
                    continue
        for j, x in enumerate(row):
            out[i, j] = _read_number(x, f"{row_path}[{j}]")
    return out


def _read_number(x: Any, path: str) -> float:
    """One cell: a finite number within ±MAX_ABS_VALUE, else SessionFileError at ``path``."""
    if isinstance(x, HugeInteger):
        raise _fail(path, f"{x} is over the limit of ±{MAX_ABS_VALUE:g}")
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise _fail(path, f"expected a number, got {_shown(x)}")
    try:
        number = float(x)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _fail(path, f"expected a finite number, got {_shown(x)}")
    if abs(number) > MAX_ABS_VALUE:
        raise _fail(
            path,
            f"{number!r} is over the limit of ±{MAX_ABS_VALUE:g}; larger values overflow "
            "the scores",
        )
    return number


def _read_text(value: Any, path: str, limit: int, notes: list[str]) -> str:
    """A name: text of at most ``limit`` characters, unpaired surrogates replaced (noted)."""
    if len(value) > limit:
        raise _fail(path, f"{len(value):,} characters long, over the limit of {limit}; shorten it")
    cleaned = clean_text(value)
    if cleaned != value:
        notes.append(f"{path}: an unpaired surrogate (invalid text) was replaced by \ufffd")
    return cleaned


#: Options that older versions wrote and nothing reads any more: accepted and ignored, so
#: a file saved with them still opens (``show_value`` never changed what was shown).
RETIRED_OPTIONS = ("show_value",)


def _read_options(value: Any, batch: int, heads: int) -> Options:
    defaults = Options()
    names = [f.name for f in fields(Options)]
    data = _object(value, "options", names, RETIRED_OPTIONS)
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
    allowed = ["format", "version", "name", "shape", "tokens", "batches", "options", "prompts"]
    top = _object(data, "", allowed)
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
    notes: list[str] = []
    name = _field(top, "name", "")
    if not isinstance(name, str):
        raise _fail("name", f"expected text, got {_type_name(name)}")
    name = _read_text(name, "name", MAX_NAME_CHARS, notes)
    shape = _object(_field(top, "shape", ""), "shape", ["B", "H", "T", "d"])
    b, h, t, d = (_int(_field(shape, k, "shape"), f"shape.{k}") for k in ("B", "H", "T", "d"))
    problem = Session.check_size(b, h, t, d)
    if problem:
        raise _fail("shape", problem)
    tokens = _list(_field(top, "tokens", ""), "tokens", t, "token names (shape.T)")
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token.strip():
            raise _fail(f"tokens[{i}]", f"expected a non-empty name, got {_shown(token)}")
    tokens = [
        _read_text(token, f"tokens[{i}]", MAX_TOKEN_CHARS, notes) for i, token in enumerate(tokens)
    ]
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
    prompts = None
    if "prompts" in top:
        if version < PROMPTS_VERSION:
            raise _fail(
                "prompts", f"needs format version {PROMPTS_VERSION}, the file says {version}"
            )
        problem_at = prompts_problem(top["prompts"])
        if problem_at is not None:
            raise _fail(*problem_at)
        prompts = prompts_from_dict(top["prompts"])
    return LoadedSession(snapshot, options, name, tuple(notes), prompts)


def load_session(path: str | os.PathLike[str]) -> LoadedSession:
    """Read and validate a session file; ``SessionFileError`` names the first problem.

    Only a regular file of at most :data:`MAX_SESSION_BYTES` is read: a FIFO, a
    device, a socket or a folder is refused without blocking, a bigger file
    before reading it.
    """
    try:
        data = read_user_file(path, MAX_SESSION_BYTES, "session file")
    except FileRefused as exc:
        raise SessionFileError(f"{path}: {exc}") from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as some editors write, is fine
    except UnicodeDecodeError:
        raise SessionFileError(f"{path}: not a text file (expected UTF-8 JSON)") from None
    del data
    return load_session_text(text, str(path))


def load_session_text(text: str, source: str = "session") -> LoadedSession:
    """Parse and validate session-file text; ``source`` names it in error messages."""
    if len(text) > MAX_SESSION_BYTES:
        raise SessionFileError(
            f"{source}: {len(text):,} characters, over the limit of "
            f"{megabytes(MAX_SESSION_BYTES)} for a session file"
        )
    try:
        data = parse_json(text.removeprefix("\ufeff"))
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
