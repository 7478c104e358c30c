"""The vectors view's state without Qt: which arrows are selected, how d > 2 is shown, drags.

Qt-free. :class:`VectorsState` follows the session's current batch and head and
the score cell the user picked (in the grid, a heatmap or the stepper); it says
what the view draws (a :class:`~attn_explorer.compute.geometry.Plane` and the
arrows' tips in it) and writes the dot product out both ways. A drag of an
arrow's tip goes into the session as one undoable edit per drag.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute.geometry import (
    ZERO_LENGTH,
    Plane,
    angle_degrees,
    dims_plane,
    exact_plane,
    length,
    pca_plane,
    snap,
)
from attn_explorer.state.events import Event
from attn_explorer.state.formatting import display_number
from attn_explorer.state.session import Session
from attn_explorer.state.storage.export import Named
from attn_explorer.state.types import head_label
from attn_explorer.state.views.frame import Frame
from attn_explorer.state.views.stepper import Stepper

#: How a head with d > 2 is shown: principal axes, or two dimensions the user chose.
PROJECTIONS = ("pca", "dims")
#: Grid steps a dragged tip snaps to (0 = no snapping).
SNAP_STEPS = (0.0, 0.1, 0.25, 0.5, 1.0)
DEFAULT_SNAP = 0.5
#: Written on every projected view: what a projection loses.
PROJECTION_NOTE = "projection — dot products are not preserved; exact values in the grid"
#: Terms of a dot product written out before the rest is summarised.
MAX_TERMS = 4


def _short(value: float) -> str:
    """A length or product as it reads beside an angle: 4 significant digits."""
    text = f"{value:.4g}"
    return "0" if text == "-0" else text


def _degrees(theta: float) -> str:
    text = f"{theta:.1f}".removesuffix(".0")
    return f"{text}°"


def dot_text(query: np.ndarray, key: np.ndarray) -> tuple[str, str]:
    """The dot product of one query and one key, written both ways.

    ``("q·k = 0·2 + 1·0 = 0", "|q| |k| cos θ = 1 · 2 · cos 90° = 0")``. Long
    vectors show their first terms and how many more there are. A zero-length
    vector has no angle; the text says so instead of printing NaN.
    """
    q = np.asarray(query, dtype=np.float64)
    k = np.asarray(key, dtype=np.float64)
    dot = float(np.dot(q, k))
    terms = [f"{display_number(a)}·{display_number(b)}" for a, b in zip(q, k, strict=True)]
    if len(terms) > MAX_TERMS:
        terms = [*terms[: MAX_TERMS - 1], f"… ({len(terms) - MAX_TERMS + 1} more terms)"]
    first = f"q·k = {' + '.join(terms)} = {display_number(dot)}"
    lq, lk = length(q), length(k)
    theta = angle_degrees(q, k)
    if theta is None:
        zero = [n for n, v in (("q", lq), ("k", lk)) if v <= ZERO_LENGTH]
        which = "q and k have" if len(zero) == 2 else f"{zero[0] if zero else 'q or k'} has"
        angle = f"cos θ (no angle: {which} zero length)"
        product = 0.0
    else:
        angle = f"cos {_degrees(theta)}"
        product = lq * lk * math.cos(math.radians(theta))
        if abs(product) <= 1e-12 * lq * lk:  # cos 90° is 6e-17 in floating point
            product = 0.0
    second = f"|q| |k| cos θ = {_short(lq)} · {_short(lk)} · {angle} = {_short(product)}"
    return first, second


@dataclass(frozen=True)
class Selection:
    """The highlighted query and key (0-based token indices; None = none)."""

    query: int | None = None
    key: int | None = None


class VectorsState:
    """What the vectors view shows for the session's current batch and head.

    ``changed`` is emitted when the selection, the projection choice or the snap
    step changes; the numbers themselves come from the session's events.
    """

    def __init__(
        self, session: Session, stepper: Stepper | None = None, document: Named | None = None
    ) -> None:
        self.session = session
        self.document = document  # its source names a taken model head
        self.changed = Event()
        self._selection = Selection()
        self.projection = "pca"
        self.dims = (0, 1)
        self.snap_step = DEFAULT_SNAP
        # (matrix, token, batch, head, merge key): a drag writes where it started, whatever
        # the window shows meanwhile, so its one undo entry covers one row of one head
        self._drag: tuple[str, int, int, int, object] | None = None
        self._gestures = itertools.count(1)
        self._stepper = stepper
        session.events.shape.connect(self._clamp)
        session.events.values.connect(lambda matrix: self._clamp())
        if stepper is not None:
            stepper.changed.connect(self._on_frame)

    # -- what is shown -------------------------------------------------------------------
    @property
    def selection(self) -> Selection:
        return self._selection

    def head_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The current head's queries and keys, each ``(T, d)``."""
        return self.session.head_matrix("query"), self.session.head_matrix("key")

    def plane(self) -> Plane:
        """The 2-D plane the arrows are drawn in (exact for d ≤ 2)."""
        query, key = self.head_vectors()
        d = query.shape[1]
        if d <= 2:
            return exact_plane(d)
        if self.projection == "dims":
            first, second = (min(n, d - 1) for n in self.dims)
            if first == second:
                second = (first + 1) % d
            return dims_plane(query, key, first, second)
        return pca_plane(query, key)

    @property
    def draggable(self) -> bool:
        """Arrows can be dragged only where the picture is the vectors themselves."""
        return self.session.shape[3] <= 2

    def caption(self, plane: Plane | None = None) -> str:
        """What the plot is: exact, or which projection and how much it explains."""
        plane = plane or self.plane()
        b, _, _, d = self.session.shape
        source = self.document.source if self.document is not None else None
        where = head_label(self.session.options.head, source) + (
            f", batch {self.session.options.batch_index + 1}" if b > 1 else ""
        )
        if plane.exact:
            return f"{where}: q and k exactly as in the tables (d = {d}); drag a tip to edit"
        share = plane.explained[0] + plane.explained[1]
        how = "PCA of queries and keys" if plane.method == "pca" else "two chosen dimensions"
        return (
            f"{where}, d = {d}: {how}, {share:.0%} of the squared length shown — {PROJECTION_NOTE}"
        )

    def dot_lines(self) -> tuple[str, str, str]:
        """(which pair, q·k written out, |q| |k| cos θ written out) for the selection."""
        sel = self._selection
        if sel.query is None or sel.key is None:
            if sel.query is not None:
                return (f"q{sel.query + 1} ({self._token(sel.query)}) selected", "", "")
            return ("Click a score cell, or a q tip then a k tip", "", "")
        query, key = self.head_vectors()
        title = (
            f"q{sel.query + 1} ({self._token(sel.query)}) · k{sel.key + 1} ({self._token(sel.key)})"
        )
        if self._asked_about(sel.query, sel.key):
            return title, "q·k = ? — type your prediction in the stepper first", ""
        first, second = dot_text(query[sel.query], key[sel.key])
        return title, first, second

    def _asked_about(self, i: int, j: int) -> bool:
        """Predict mode is waiting for the user's guess of exactly this score."""
        asking = None if self._stepper is None else self._stepper.prediction
        options = self.session.options
        return (
            asking is not None
            and asking.status == "asking"
            and asking.cell == (options.batch_index, options.head, i, j)
        )

    def _token(self, index: int) -> str:
        tokens = self.session.tokens
        return tokens[index] if 0 <= index < len(tokens) else f"t{index + 1}"

    def describe(self, matrix: str, index: int) -> str:
        """Hover text for one arrow: which vector, its token and position, its values."""
        vector = self.session.head_matrix(matrix)[index]
        letter = "q" if matrix == "query" else "k"
        values = ", ".join(display_number(v) for v in vector[:MAX_TERMS])
        more = ", …" if vector.size > MAX_TERMS else ""
        return (
            f"{letter}{index + 1}: token {self._token(index)!r} at position {index + 1} · "
            f"({values}{more}) · length {_short(length(vector))}"
        )

    # -- choices ---------------------------------------------------------------------------
    def select_cell(self, i: int, j: int) -> None:
        """Highlight query i and key j (0-based), as a click on score cell (i, j) does."""
        self._select(Selection(i, j))

    def select_query(self, i: int | None) -> None:
        self._select(Selection(i, None))

    def _select(self, selection: Selection) -> None:
        t = self.session.shape[2]
        if any(n is not None and not 0 <= n < t for n in (selection.query, selection.key)):
            self.session.report(f"no token {selection} among T = {t}; kept the selection")
            return
        if selection != self._selection:
            self._selection = selection
            self.changed.emit()

    def set_projection(self, method: str, dims: tuple[int, int] | None = None) -> None:
        if method not in PROJECTIONS:
            self.session.report(f"projection: {method!r} is not one of {', '.join(PROJECTIONS)}")
            return
        self.projection = method
        if dims is not None:
            self.dims = (int(dims[0]), int(dims[1]))
        self.changed.emit()

    def set_snap(self, step: float) -> None:
        if not (math.isfinite(step) and step >= 0):
            self.session.report(f"snap step: {step!r} is not 0 or a positive number")
            return
        self.snap_step = float(step)
        self.changed.emit()

    # -- dragging a tip ---------------------------------------------------------------------
    def begin_drag(self, matrix: str, token: int) -> bool:
        """Start dragging the tip of query or key ``token``; False if dragging is off."""
        if not self.draggable or matrix not in ("query", "key"):
            return False
        if not 0 <= token < self.session.shape[2]:
            return False
        b, h = self.session.options.batch_index, self.session.options.head
        self._drag = (matrix, token, b, h, ("drag", next(self._gestures), matrix, b, h, token))
        return True

    @property
    def dragging(self) -> tuple[str, int] | None:
        return None if self._drag is None else self._drag[:2]

    def snapped(self, x: float, y: float) -> tuple[float, float]:
        """Where a tip dropped at (x, y) lands: on the snap grid."""
        sx, sy = snap(np.array([x, y]), self.snap_step)
        return float(sx), float(sy)

    def drag_to(self, x: float, y: float) -> bool:
        """Move the dragged tip to (x, y), snapped; every move of one drag is one undo entry."""
        if self._drag is None:
            return False
        matrix, token, b, h, key = self._drag
        d = self.session.shape[3]
        x, y = self.snapped(x, y)
        row = [x, y][:d]
        return self.session.set_block(matrix, token, 0, [row], batch=b, head=h, merge=key)

    def end_drag(self) -> None:
        self._drag = None

    # -- following the session ---------------------------------------------------------------
    def _on_frame(self, frame: Frame | None) -> None:
        if frame is None:
            return
        # An open prediction is not selected: the arrows would give its answer away.
        if frame.prediction is not None:
            cell = None if frame.prediction.status == "asking" else frame.prediction.cell
        else:
            cell = frame.cell
        options = self.session.options
        if cell is not None and cell[:2] == (options.batch_index, options.head):
            self.select_cell(cell[2], cell[3])

    def _clamp(self) -> None:
        t = self.session.shape[2]
        sel = self._selection
        fixed = Selection(
            None if sel.query is None or sel.query >= t else sel.query,
            None if sel.key is None or sel.key >= t else sel.key,
        )
        if fixed != sel:
            self._selection = fixed
            self.changed.emit()
