"""Exports, without a widget: which files an export writes, and CSV and NPZ themselves. Qt-free.

:func:`plan_export` checks the user's choices (stage, heads, format, width, a
file or a folder) and names the files; :func:`write_export` writes one, asking a
painter for PNG / SVG bytes (:func:`attn_explorer.render.figure.export_heatmaps` paints
a :func:`attn_explorer.state.views.figure.build_figure`). An export reads an
:class:`Exported`: the session, its results and the document's name (an
:class:`~attn_explorer.state.app_state.AppState` is one). The
window and ``attn-explorer export`` both go through
:func:`attn_explorer.render.figure.export_heatmaps`, which joins the two. Every file
is written atomically (:mod:`attn_explorer.state.storage.safe_files`); CSV and NPZ are
streamed into the temporary file rather than built in memory first.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

import numpy as np

from attn_explorer.compute import STAGES
from attn_explorer.state.session import Session
from attn_explorer.state.storage.safe_files import (
    clean_text,
    os_error_reason,
    write_atomic,
    write_atomic_with,
)
from attn_explorer.state.types import MATRICES, HeadSource

if TYPE_CHECKING:
    from attn_explorer.state.results.results import Results


class Named(Protocol):
    """Something with a name: the document, which owns the name of what is exported."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> HeadSource | None:
        """The real model head the numbers were taken from, if they were."""
        ...


class Exported(Protocol):
    """What an export reads: the numbers and options, their results, and the document's name.

    :class:`~attn_explorer.state.app_state.AppState` is one (the window's, the command
    line's). A protocol, so that storage needs neither the app state nor the document.
    """

    @property
    def session(self) -> Session: ...

    @property
    def results(self) -> Results: ...

    @property
    def document(self) -> Named: ...


class ExportError(Exception):
    """An export cannot be written; the message says why and what to do. Nothing changed."""


def stage_array(exported: Exported, stage: str) -> np.ndarray:
    """(B, H, T, T) of a score stage, or (B, H, T, d_v) for ``output``; ExportError if absent.

    Computed by the results if they are not up to date (the command line's export).
    """
    if stage not in STAGES:
        raise ExportError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    array = exported.results.compute_now().stage(stage)
    if array is None:
        raise ExportError(f"stage {stage!r} needs value vectors V; add values first")
    return array


def column_labels(session: Session, stage: str) -> list[str]:
    """Key tokens for the score stages; value dimensions d1..d_v for ``output``."""
    if stage == "output":
        return [f"d{c + 1}" for c in range(session.shape[3])]
    return session.tokens


#: RFC 4180's line end. The csv module quotes a cell only for the characters of the line
#: end it writes (before Python 3.12), so with "\n" alone a label holding "\r" was cut.
CSV_LINE_END = "\r\n"
#: First characters that make a spreadsheet read a cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_label(text: str) -> str:
    """A token label as a CSV cell that a spreadsheet shows as text, never runs as a formula.

    A label starting with ``= + - @``, tab or CR gets a leading apostrophe, as
    spreadsheets expect; so does one that starts with an apostrophe, so that
    :func:`read_csv` takes exactly one off every cell that has one. Numbers are
    not labels: ``-1.5`` stays a number.
    """
    text = clean_text(text)
    return "'" + text if text.startswith((*FORMULA_STARTS, "'")) else text


def label_from_csv(cell: str) -> str:
    """The label :func:`csv_label` wrote into ``cell``."""
    return cell[1:] if cell.startswith("'") else cell


def csv_rows(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    matrix: np.ndarray,
    source: HeadSource | None = None,
) -> Iterator[list[str]]:
    """The CSV table row by row: token labels as header row and first column, exact floats.

    A taken model head names itself in the corner cell (``query \\ key · SmolLM2 layer 5
    query head 6 (K, V: key/value head 2, …)``), which :func:`read_csv` skips.
    """
    corner = "query \\ key" + (f" · {source.describe()}" if source is not None else "")
    yield [csv_label(corner), *(csv_label(label) for label in col_labels)]
    for label, row in zip(row_labels, matrix, strict=True):
        yield [csv_label(label), *(repr(v) for v in row.tolist())]  # −inf kept as -inf


def csv_text(row_labels: Sequence[str], col_labels: Sequence[str], matrix: np.ndarray) -> str:
    """A table with token labels as header row and first column; exact float repr (−inf kept)."""
    stream = io.StringIO()
    csv.writer(stream, lineterminator=CSV_LINE_END).writerows(
        csv_rows(row_labels, col_labels, matrix)
    )
    return stream.getvalue()


def read_csv(path: str | os.PathLike[str]) -> tuple[list[str], list[str], np.ndarray]:
    """Read a CSV written by :func:`csv_text`: (row labels, column labels, float64 matrix)."""
    with open(path, newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    header, body = rows[0], rows[1:]
    matrix = np.array([[float(v) for v in row[1:]] for row in body], dtype=np.float64)
    labels = [label_from_csv(row[0]) for row in body]
    columns = [label_from_csv(cell) for cell in header[1:]]
    return labels, columns, matrix.reshape(len(body), len(header) - 1)


def _write_text(rows: Iterator[list[str]]) -> Callable[[BinaryIO], None]:
    """A writer for :func:`write_atomic_with` that streams CSV rows as UTF-8."""

    def write(stream: BinaryIO) -> None:
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
        try:
            csv.writer(text, lineterminator=CSV_LINE_END).writerows(rows)
            text.flush()
        finally:
            text.detach()  # the caller closes the file

    return write


def write_csv(path: Path, exported: Exported, stage: str, head: int) -> Path:
    """One head's ``stage`` matrix (of the selected batch) as CSV at ``path``, row by row."""
    session = exported.session
    matrix = stage_array(exported, stage)[session.options.batch_index, head]
    source = exported.document.source
    rows = csv_rows(session.tokens, column_labels(session, stage), matrix, source)
    return write_atomic_with(path, _write_text(rows))


def npz_arrays(exported: Exported) -> dict[str, np.ndarray]:
    """Everything an NPZ export holds: Q, K, V (float64), every stage, tokens, options (JSON)
    and the document's name.

    The arrays are the session's and the result's own (read-only views), not copies.
    """
    session = exported.session
    result = exported.results.compute_now()
    arrays: dict[str, np.ndarray] = {m: session.matrix(m) for m in MATRICES}
    for stage in STAGES:
        value = result.stage(stage)
        if value is not None:
            arrays[stage] = value  # (B, H, T, T) or output (B, H, T, d_v)
    arrays["tokens"] = np.array([clean_text(t) for t in session.tokens], dtype=str)
    arrays["options"] = np.array(json.dumps(asdict(session.options)))
    arrays["name"] = np.array(clean_text(exported.document.name))
    source = exported.document.source
    if source is not None:  # a taken model head: model, layer, query head, KV head (JSON)
        arrays["source"] = np.array(json.dumps(source.as_dict()))
    return arrays


def write_npz(path: Path, exported: Exported) -> Path:
    """All heads and stages as a compressed ``.npz`` (read with ``np.load(path)``).

    The archive is streamed into the temporary file: no second copy in memory.
    """
    arrays = npz_arrays(exported)
    # numpy's stubs type **arrays as the allow_pickle keyword; these are all arrays.
    return write_atomic_with(path, lambda stream: np.savez_compressed(stream, **arrays))  # type: ignore[arg-type]


#: The PNG text chunk that holds a taken head's provenance (JSON of HeadSource.as_dict).
PNG_SOURCE_KEY = "attn-explorer:source"


def png_with_text(data: bytes, key: str, text: str) -> bytes:
    """``data`` (a PNG) with an iTXt chunk ``key`` = ``text`` (UTF-8) after its header chunk."""
    body = key.encode("latin-1") + b"\0\0\0\0\0" + text.encode("utf-8")
    chunk = struct.pack(">I", len(body)) + b"iTXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"iTXt" + body) & 0xFFFFFFFF)
    end_of_header = 8 + 4 + 4 + 13 + 4  # signature, IHDR's length, type, data and CRC
    return data[:end_of_header] + chunk + data[end_of_header:]


def png_text(data: bytes) -> dict[str, str]:
    """The iTXt chunks of a PNG (uncompressed ones), key to text."""
    found, at = {}, 8
    while at + 8 <= len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            _, _, text = rest[2:].split(b"\0", 2)  # after the flags: language, keyword, text
            found[key.decode("latin-1")] = text.decode("utf-8")
        at += 12 + length
    return found


def guarded_write(path: Path, write: Callable[[], Path]) -> Path:
    """Run ``write`` and turn an ``OSError`` into an ``ExportError`` naming ``path``."""
    try:
        return write()
    except OSError as exc:
        raise ExportError(f"could not write {path}: {os_error_reason(exc)}") from None


# -- what an export costs -------------------------------------------------------------------------
#: Most memory the command line's export may need, estimated from the session's declared
#: shape before anything is computed (:func:`export_memory_estimate`). With the
#: interpreter, numpy and Qt (~300 MB of address space) an export stays under 1 GB.
MAX_EXPORT_BYTES = 384 * 1024 * 1024


def image_height(width: int, panels: int, rows: int, cols: int) -> int:
    """An upper bound of the height of a figure ``width`` px wide of ``panels`` heatmaps of
    ``rows`` × ``cols`` cells, from the geometry ``render.figure.layout_figure`` uses
    (square cells, at most 1.5 panel widths tall; ⌈√panels⌉ columns; labels at most 8 em)."""
    em = min(64.0, max(9.0, width / 64))
    columns = max(1, math.ceil(math.sqrt(panels)))
    panel_rows = math.ceil(panels / columns)
    grid_h = max(1.0, width / columns) * min(rows / max(1, cols), 1.5)
    panel_h = em * 1.6 + max(grid_h, em * 6) + em * 8.5 + em * 1.5  # title, grid, labels, axis
    top = em * (1 + 2 + 1.6 + 1.6)  # pad, title, subtitle, column titles
    return math.ceil(top + panel_rows * panel_h + (panel_rows - 1) * em + em * 1.6 + em)


def image_bytes_estimate(
    session: Session, stage: str, width: int, panels: int | None = None
) -> int:
    """Bytes the image of one figure costs: its 4-byte-per-pixel raster, and half as much
    again for the PNG encoding and the copy of its bytes (flat heatmap cells compress
    tenfold or more; measured by tests/cli/test_cli_hostile_edges.py)."""
    _, h, t, d = session.shape
    height = image_height(width, h if panels is None else panels, t, d if stage == "output" else t)
    return width * height * 4 * 3 // 2


def export_memory_estimate(
    session: Session,
    stage: str,
    fmt: str,
    width: int = 1600,
    strategy: str | None = None,
    panels: int | None = None,
) -> int:
    """Bytes an export of ``stage`` as ``fmt`` will allocate, an upper bound from the shape alone.

    Counts the result the export computes (scores and weights of every batch
    entry, the derived stage, the loop's Python lists when the loop really
    runs) and what the format adds: for images the colour mapping of one panel,
    the raster (``width`` × up to 2 ``width``) and its encoding; for SVG the cell
    rectangles or embedded images; NPZ every stage. CSV and NPZ stream to disk.
    ``strategy`` is the one that will compute (by default the session's, through
    ``LOOP_BUDGET.strategy_for``); ``panels`` the heads in one figure (default: all, a
    montage). Calibrated by tests/cli/test_export_budget.py.
    """
    from attn_explorer.compute import LOOP_BUDGET

    b, h, t, d = session.shape
    item = np.dtype(session.options.dtype).itemsize
    tensor = b * h * t * t * item  # one (B, H, T, T) stage
    need = 32 * 2**20  # parsing, small arrays, buffers
    need += b * h * t * d * (3 * 8 + 4 * item)  # Q, K, V (float64), their copies, the output
    need += 2 * tensor  # scores and weights
    if strategy is None:
        shape = (b, h, t, d)
        strategy = LOOP_BUDGET.strategy_for(session.options.strategy, shape, shape)
    if strategy == "loop":
        need += b * h * t * t * 40  # a Python float and its list slot per score
    derived = 0  # scaled, and masked when a mask makes it a new array
    if fmt == "npz" or stage in ("scaled", "masked"):
        derived = 1 + (session.options.causal and (fmt == "npz" or stage == "masked"))
    need += derived * tensor
    if fmt == "npz":
        need += 64 * 2**20  # the compressor's chunks
    if fmt in ("png", "svg"):
        panel = t * (d if stage == "output" else t)  # cells of one head
        need += h * panel * (1 + (8 if item == 4 else 0))  # finite mask; float64 panels
        need += panel * 13  # colours of one panel
        if fmt == "png":  # SVG is vector: its cells are rectangles or a cell-sized image
            need += image_bytes_estimate(session, stage, width, panels)  # raster, encoding
        if fmt == "svg":  # a rectangle per cell (~150 bytes), or an embedded image per head
            need += 2 * h * panel * (150 if panel <= 65536 else 12)
    return need


# -- planning an export: which files, which heads, which format ------------------------------------
#: Every format an export can write; the first two are images (painted by ui.render).
EXPORT_FORMATS = ("png", "svg", "csv", "npz")
IMAGE_FORMATS = ("png", "svg")
#: Which heads: the selected one, all in one figure, or one file each (or head numbers).
HEAD_CHOICES = ("current", "montage", "all")
MIN_WIDTH, MAX_WIDTH = 200, 16000
DEFAULT_WIDTH = 1600
#: Characters of a session name kept in a file name (file names allow 255 bytes).
MAX_NAME_IN_FILE = 100


def safe_name(name: str) -> str:
    """ASCII letters, digits and ._- only, at most ``MAX_NAME_IN_FILE`` characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name[:MAX_NAME_IN_FILE]).strip("-.") or "session"


def default_filename(exported: Exported, stage: str, head_index: int | str, fmt: str) -> str:
    """What a file holds, in its name: ``worked-scores-head2.png``, ``worked-scores-all-heads.svg``.

    The document's name comes first. ``head_index`` is a head's index (0 is ``head1``,
    the first head) or ``"montage"``; NPZ files hold every stage and head.
    """
    session = exported.session
    name = safe_name(exported.document.name)
    if session.shape[0] > 1:
        name += f"-batch{session.options.batch_index + 1}"
    if fmt == "npz":
        return f"{name}-all-stages.npz"
    what = f"head{head_index + 1}" if isinstance(head_index, int) else "all-heads"
    return f"{name}-{stage}-{what}.{fmt}"


def head_indices(session: Session, heads: str | Sequence[int]) -> list[int]:
    """Head indices from ``current`` / ``montage`` / ``all`` or head numbers (from 1)."""
    count = session.shape[1]
    if isinstance(heads, str):
        if heads == "current":
            return [session.options.head]
        if heads in ("all", "montage"):
            return list(range(count))
        raise ExportError(f"heads: unknown {heads!r}; use current, montage, all or head numbers")
    chosen = list(heads)
    if not chosen:
        raise ExportError("heads: no head chosen; give at least one head number")
    for head in chosen:
        if isinstance(head, bool) or not isinstance(head, int) or not 1 <= head <= count:
            have = "only head 1" if count == 1 else f"heads 1..{count}"
            raise ExportError(f"heads: there is no head {head}; this session has {have}")
    return [head - 1 for head in chosen]


def resolve_format(target: Path, fmt: str | None) -> tuple[bool, str]:
    """(``target`` is a folder, the format): a file's extension names its format."""
    suffix = target.suffix.lower().lstrip(".")
    is_folder = target.is_dir() or not suffix
    if fmt is not None and fmt.lower() not in EXPORT_FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    if is_folder:
        return True, (fmt or "png").lower()
    if suffix not in EXPORT_FORMATS:
        raise ExportError(
            f"{target.name}: unknown file type .{suffix}; name the file .png, .svg, .csv or .npz"
        )
    if fmt is not None and fmt.lower() != suffix:
        raise ExportError(f"{target.name}: the name ends in .{suffix} but the format is {fmt}")
    return False, suffix


@dataclass(frozen=True)
class ExportJob:
    """One file of an export: where, what format, which stage, which heads (indices)."""

    path: Path
    fmt: str
    stage: str
    heads: tuple[int, ...]  # one head, or every chosen head for a montage / NPZ


def plan_export(
    exported: Exported,
    target: str | os.PathLike[str],
    *,
    stage: str | None = None,
    heads: str | Sequence[int] = "current",
    fmt: str | None = None,
    width: int = DEFAULT_WIDTH,
) -> list[ExportJob]:
    """Check an export's choices and say which files it writes (a missing folder is created).

    ``target`` is a file (its extension gives the format) or a folder (files get
    :func:`default_filename` names). ``stage`` defaults to the session's.
    ``heads``: ``"current"`` (the selected head), ``"montage"`` (all heads in one
    figure; for CSV one file per head), ``"all"`` (one file per head) or a list of
    head numbers (from 1, one file each). ``fmt``: png, svg, csv or npz (NPZ always
    holds every head and stage). Raises :class:`ExportError` saying what to do.
    """
    target = Path(target)
    session = exported.session
    stage = session.options.stage if stage is None else stage
    if stage not in STAGES:
        raise ExportError(f"stage: unknown {stage!r}; choose one of {', '.join(STAGES)}")
    is_folder, fmt = resolve_format(target, fmt)
    if isinstance(width, bool) or not isinstance(width, int) or not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ExportError(f"width: {width!r} pixels is not allowed; use {MIN_WIDTH}..{MAX_WIDTH}")
    chosen = head_indices(session, heads)
    stage_array(exported, stage)  # raises ExportError when the stage is not available
    montage = fmt == "npz" or (heads == "montage" and fmt in IMAGE_FORMATS)
    # one tuple of head indices per file: every chosen head in one figure, or one each
    groups = [tuple(chosen)] if montage else [(head,) for head in chosen]
    if is_folder:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExportError(f"could not create {target}: {os_error_reason(exc)}") from None
        paths = [
            target / default_filename(exported, stage, "montage" if montage else g[0], fmt)
            for g in groups
        ]
    elif len(groups) == 1:
        paths = [target]
    else:
        paths = [target.with_name(f"{target.stem}-head{g[0] + 1}{target.suffix}") for g in groups]
    return [ExportJob(path, fmt, stage, g) for path, g in zip(paths, groups, strict=True)]


def write_export(exported: Exported, job: ExportJob, draw: Callable[[ExportJob], bytes]) -> Path:
    """Write one planned file; ``draw(job)`` paints its PNG / SVG bytes (the figure of its
    heads: storage knows files, not figures)."""
    if job.fmt == "npz":
        return write_npz(job.path, exported)
    if job.fmt == "csv":
        return write_csv(job.path, exported, job.stage, job.heads[0])
    try:
        data = draw(job)
    except MemoryError:
        raise ExportError(
            f"{job.path.name}: the image would be too large; choose a smaller width or fewer heads"
        ) from None
    source = exported.document.source
    if job.fmt == "png" and source is not None:
        data = png_with_text(data, PNG_SOURCE_KEY, json.dumps(source.as_dict()))
    return write_atomic(job.path, data)
