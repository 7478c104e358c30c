"""Exports that need no widget: CSV of one head and NPZ of everything. Qt-free.

The window and ``attn-explorer export`` reach these through
:func:`attn_explorer.ui.render.export_heatmaps`, which adds PNG and SVG. Every
file is written atomically (:mod:`attn_explorer.state.files`); CSV and NPZ are
streamed into the temporary file rather than built in memory first.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import BinaryIO

import numpy as np

from attn_explorer.compute import STAGES
from attn_explorer.state.files import clean_text, os_error_reason, write_atomic_with
from attn_explorer.state.session import Session
from attn_explorer.state.types import MATRICES


class ExportError(Exception):
    """An export cannot be written; the message says why and what to do. Nothing changed."""


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
    row_labels: Sequence[str], col_labels: Sequence[str], matrix: np.ndarray
) -> Iterator[list[str]]:
    """The CSV table row by row: token labels as header row and first column, exact floats."""
    yield ["query \\ key", *(csv_label(label) for label in col_labels)]
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


def write_csv(path: Path, session: Session, stage: str, head: int) -> Path:
    """One head's ``stage`` matrix (of the selected batch) as CSV at ``path``, row by row."""
    matrix = stage_array(session, stage)[session.options.batch_index, head]
    rows = csv_rows(session.tokens, column_labels(session, stage), matrix)
    return write_atomic_with(path, _write_text(rows))


def npz_arrays(session: Session) -> dict[str, np.ndarray]:
    """Everything an NPZ export holds: Q, K, V (float64), every stage, tokens, options (JSON).

    The arrays are the session's and the result's own (read-only views), not copies.
    """
    result = session.result()
    arrays: dict[str, np.ndarray] = {m: session.matrix(m) for m in MATRICES}
    for stage in STAGES:
        value = result.stage(stage)
        if value is not None:
            arrays[stage] = value  # (B, H, T, T) or output (B, H, T, d_v)
    arrays["tokens"] = np.array([clean_text(t) for t in session.tokens], dtype=str)
    arrays["options"] = np.array(json.dumps(asdict(session.options)))
    arrays["name"] = np.array(clean_text(session.name))
    return arrays


def write_npz(path: Path, session: Session) -> Path:
    """All heads and stages as a compressed ``.npz`` (read with ``np.load(path)``).

    The archive is streamed into the temporary file: no second copy in memory.
    """
    arrays = npz_arrays(session)
    return write_atomic_with(path, lambda stream: np.savez_compressed(stream, **arrays))  # type: ignore[arg-type]


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


def export_memory_estimate(
    session: Session, stage: str, fmt: str, width: int = 1600, strategy: str | None = None
) -> int:
    """Bytes an export of ``stage`` as ``fmt`` will allocate, an upper bound from the shape alone.

    Counts the result the export computes (scores and weights of every batch
    entry, the derived stage, the loop's Python lists when the loop really
    runs) and what the format adds: for images the colour mapping of one panel,
    the raster (``width`` × up to 2 ``width``) and its encoding; for SVG the cell
    rectangles or embedded images; NPZ every stage. CSV and NPZ stream to disk.
    ``strategy`` is the one that will compute (by default the session's, through
    ``LOOP_BUDGET.strategy_for``). Calibrated by tests/cli/test_export_budget.py.
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
        need += 3 * width * (2 * width) * 4  # the raster, its encoding, a copy of the bytes
        if fmt == "svg":  # a rectangle per cell (~150 bytes), or an embedded image per head
            need += 2 * h * panel * (150 if panel <= 65536 else 12)
    return need
