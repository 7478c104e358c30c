"""One job: the target table every benchmark prints — measure, now, target, ok — and its JSON.

``attn-explorer bench``, ``bench/gui.py`` and ``bench/models.py`` each measure their
rows in one run and hand them here as :class:`TargetRow`; this module prints them
as an aligned table, writes them as JSON, and compares two such JSON files
(``attn-explorer bench --compare BEFORE.json AFTER.json``) row by row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LOWER = "lower"  # smaller is better (seconds, ratios to a reference, megabytes)
HIGHER = "higher"  # bigger is better (redraws per second)


@dataclass
class TargetRow:
    """One measured figure and, when the issue sets one, its target.

    ``now`` is ``None`` when the figure could not be measured here (say, torch is
    not installed); ``note`` then says why. ``unit`` is printed after the number:
    ``"ms"``, ``"/s"``, ``"×"``, ``"MB"``.
    """

    measure: str
    now: float | None
    unit: str
    target: float | None = None
    better: str = LOWER
    note: str = ""

    @property
    def ok(self) -> bool | None:
        """True if ``now`` meets the target, False if not, None without both."""
        if self.now is None or self.target is None or math.isnan(self.now):
            return None
        return self.now <= self.target if self.better == LOWER else self.now >= self.target

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "×":
        return f"{value:.2f}×"
    digits = f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{digits} {unit}".rstrip()


def _target(row: TargetRow) -> str:
    if row.target is None:
        return ""
    return ("≤ " if row.better == LOWER else "≥ ") + _number(row.target, row.unit)


def _ok(value: bool | None) -> str:
    return {True: "ok", False: "MISSED", None: ""}[value]


def format_rows(title: str, rows: Sequence[TargetRow]) -> str:
    """``rows`` as an aligned text table headed ``title``."""
    header = ("measure", "now", "target", "ok", "note")
    body = [(r.measure, _number(r.now, r.unit), _target(r), _ok(r.ok), r.note) for r in rows]
    widths = [max(len(line[n]) for line in [header, *body]) for n in range(4)]
    out = [title, ""]
    for n, line in enumerate([header, *body]):
        cells = [line[0].ljust(widths[0]), line[1].rjust(widths[1])]
        cells += [line[2].ljust(widths[2]), line[3].ljust(widths[3]), line[4]]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths) + "  ----")
    return "\n".join(out)


def rows_json(rows: Iterable[TargetRow], **extra: Any) -> dict[str, Any]:
    """The rows (and any extra context, such as machine facts) as one JSON-able dict."""
    return {**extra, "targets": [row.as_dict() for row in rows]}


#: Largest --json file --compare reads (a real one is a few KB).
MAX_REPORT_BYTES = 4 * 2**20
#: Each field of a row: the types it may hold (None: JSON null).
ROW_FIELDS: dict[str, tuple[type, ...]] = {
    "measure": (str,),
    "now": (int, float, type(None)),
    "unit": (str,),
    "target": (int, float, type(None)),
    "better": (str,),
    "note": (str,),
}


def load_rows(path: str | Path) -> list[TargetRow]:
    """The target rows of a JSON file written with ``--json``.

    Read as the session reader reads (``state.storage.safe_files``): only a regular
    file of at most :data:`MAX_REPORT_BYTES` (a FIFO, a device or a folder is said to
    be one, never opened blocking), JSON nested too deeply is a message, and every
    row must be an object with ``measure`` and ``unit`` text, ``now`` and ``target``
    numbers or null, ``better`` lower or higher. Raises ``ValueError`` naming the file.
    """
    from attn_explorer.state.storage.safe_files import FileRefused, parse_json, read_user_file

    hint = "write it with the bench's --json option"
    try:
        raw = read_user_file(path, MAX_REPORT_BYTES, "bench --json file")
    except FileRefused as exc:
        raise ValueError(f"{path}: {exc}") from None
    try:
        data = parse_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; {hint}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc}); {hint}") from None
    except RecursionError:
        raise ValueError(f"{path}: the JSON is nested too deeply; {hint}") from None
    rows = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: no 'targets' list; {hint}.")
    return [_row(path, index, row, hint) for index, row in enumerate(rows)]


def _row(path: str | Path, index: int, row: object, hint: str) -> TargetRow:
    where = f"{path}: targets[{index}]"
    if not isinstance(row, dict):
        raise ValueError(f"{where} is {type(row).__name__}, not an object; {hint}.")
    values: dict[str, Any] = {}
    for name, kinds in ROW_FIELDS.items():
        if name not in row:
            if name in ("measure", "now", "unit"):
                raise ValueError(f"{where} has no '{name}'; {hint}.")
            continue
        value = row[name]
        if isinstance(value, bool) or not isinstance(value, kinds):
            wanted = "text" if kinds == (str,) else "a number or null"
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
            raise ValueError(f"{where}.{name} is {shown}; expected {wanted}; {hint}.")
        if isinstance(value, (int, float)) and not math.isfinite(value) and name == "target":
            raise ValueError(f"{where}.target is {value!r}; expected a finite number.")
        values[name] = float(value) if isinstance(value, int) else value
    if values.get("better", LOWER) not in (LOWER, HIGHER):
        raise ValueError(f"{where}.better is {values['better']!r}; expected lower or higher.")
    return TargetRow(**values)


def compare(before: Sequence[TargetRow], after: Sequence[TargetRow]) -> str:
    """A table of the rows both runs measured: before, after, after/before, target, ok."""
    old = {row.measure: row for row in before}
    header = ("measure", "before", "after", "after/before", "target", "ok")
    body = []
    for row in after:
        was = old.get(row.measure)
        if was is None:
            continue
        change = (
            f"{row.now / was.now:.2f}" if row.now is not None and was.now not in (None, 0) else ""
        )
        body.append(
            (
                row.measure,
                _number(was.now, was.unit),
                _number(row.now, row.unit),
                change,
                _target(row),
                _ok(row.ok),
            )
        )
    widths = [max(len(line[n]) for line in [header, *body]) for n in range(len(header))]
    lines = []
    for n, line in enumerate([header, *body]):
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:4], widths[1:4], strict=True)
        ]
        cells += [line[4].ljust(widths[4]), line[5]]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
