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


def load_rows(path: str | Path) -> list[TargetRow]:
    """The target rows of a JSON file written with ``--json``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: not JSON ({exc}); write it with the bench's --json option."
        ) from None
    rows = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: no 'targets' list; write it with the bench's --json option.")
    fields = {"measure", "now", "unit", "target", "better", "note"}
    return [TargetRow(**{k: v for k, v in row.items() if k in fields}) for row in rows]


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
