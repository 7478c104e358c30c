"""The session: the single source of truth for everything the user edits.

Qt-free. Holds the token names, the query/key/value tensors ``(B, H, T, d)`` and
the view options; validates every edit, records it on an undo stack, and emits
:class:`~attn_explorer.state.events.SessionEvents` so views can follow. A
rejected edit changes nothing and emits a ``message`` naming the cell and the
reason. Undo covers the numbers and the shape, never an option (the README's rule).

The value types, the undo stack, the rules of a structural edit
(:mod:`~attn_explorer.state.structure`) and the results (:mod:`~attn_explorer.state.results`,
built beside the session by :class:`~attn_explorer.state.app_state.AppState`) live apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import Any

import numpy as np

from attn_explorer.compute.validation import first_bad_value
from attn_explorer.state.events import SessionEvents
from attn_explorer.state.history import History
from attn_explorer.state.presets import worked_example
from attn_explorer.state.structure import (
    as_float64,
    new_cells,
    resized,
    size_problem,
    snapshot_problem,
    unused_token_name,
)
from attn_explorer.state.types import (
    MATRICES,
    MATRIX_LETTER,
    Options,
    Snapshot,
    cell_label,
    out_of_range,
    parse_number,
)


class Session:
    """Tokens, Q/K/V per (batch, head), options, undo history and change events."""

    def __init__(self, snapshot: Snapshot | None = None, options: Options | None = None) -> None:
        self.events = SessionEvents()
        preset = worked_example()
        snap = snapshot or preset.snapshot
        self._tokens = list(snap.tokens)
        self._query = np.array(snap.query, dtype=np.float64)
        self._key = np.array(snap.key, dtype=np.float64)
        self._value = np.array(snap.value, dtype=np.float64)
        self.options = options or (preset.options if snapshot is None else Options())
        self._dirty = False
        self._saved_options = self.options
        #: Increments on every change of numbers, shape or options that affect results
        #: (:class:`~attn_explorer.state.results.results.Results` caches by it).
        self.revision = 0
        self.history = History(self.events.undo_changed.emit)

    # -- read access ------------------------------------------------------------------
    @property
    def tokens(self) -> list[str]:
        return list(self._tokens)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(B, H, T, d) of the query, key and value tensors."""
        b, h, t, d = self._query.shape
        return b, h, t, d

    @property
    def value_count(self) -> int:
        """Numbers the user owns: every entry of Q, K and V (what a session file holds)."""
        return 3 * self._query.size

    def matrix(self, name: str) -> np.ndarray:
        """The full (B, H, T, d) tensor of ``"query"``, ``"key"`` or ``"value"``, read-only."""
        array = {"query": self._query, "key": self._key, "value": self._value}[name]
        view = array.view()
        view.flags.writeable = False
        return view

    def head_matrix(
        self, name: str, batch: int | None = None, head: int | None = None
    ) -> np.ndarray:
        """The (T, d) matrix of one (batch, head); defaults to the selected ones."""
        b = self.options.batch_index if batch is None else batch
        h = self.options.head if head is None else head
        matrix: np.ndarray = self.matrix(name)[b, h]
        return matrix

    def snapshot(self) -> Snapshot:
        return Snapshot(
            tuple(self._tokens), self._query.copy(), self._key.copy(), self._value.copy()
        )

    def shape_text(self) -> str:
        """Labelled shapes, e.g. ``Q: (B=1, H=2, T=3, d=2) · S: (B=1, H=2, T_q=3, T_k=3)``."""
        b, h, t, d = self.shape
        return f"Q, K, V: (B={b}, H={h}, T={t}, d={d}) · S = Q Kᵀ: (B={b}, H={h}, T_q={t}, T_k={t})"

    @property
    def dirty(self) -> bool:
        return self._dirty

    def mark_saved(self) -> None:
        """Nothing is unsaved any more (which file it is in is the Document's business)."""
        self._saved_options = self.options
        self.history.mark_saved()
        self._set_dirty(False)

    def _update_dirty(self) -> None:
        """Modified unless undo / redo stand where the numbers were saved and the options a
        file keeps (all but step, head, batch entry, granularity) are as saved."""
        saved = replace(self._saved_options, step=self.options.step, head=self.options.head)
        saved = replace(
            saved, batch_index=self.options.batch_index, granularity=self.options.granularity
        )
        same = saved == self.options
        self._set_dirty(not (self.history.at_saved and same))

    def _set_dirty(self, dirty: bool) -> None:
        if dirty != self._dirty:
            self._dirty = dirty
            self.events.dirty.emit(dirty)

    def _changed(self) -> None:
        self.revision += 1
        self._update_dirty()

    def report(self, text: str, level: str = "error") -> None:
        """Send a message to whoever shows them (the status bar)."""
        self.events.message.emit(text, level)

    # -- undo / redo ----------------------------------------------------------------------
    def can_undo(self) -> bool:
        return self.history.can_undo()

    def can_redo(self) -> bool:
        return self.history.can_redo()

    def undo_text(self) -> str:
        return self.history.undo_text()

    def redo_text(self) -> str:
        return self.history.redo_text()

    def undo(self) -> bool:
        if not self.history.undo():
            self.report("nothing to undo", "info")
            return False
        return True

    def redo(self) -> bool:
        if not self.history.redo():
            self.report("nothing to redo", "info")
            return False
        return True

    def clear_history(self) -> None:
        """Forget undo and redo: the numbers now are the starting point (saved or not)."""
        self.history.clear(saved=not self._dirty)

    # -- value edits ------------------------------------------------------------------------
    def _array(self, name: str) -> np.ndarray:
        if name not in MATRICES:
            raise ValueError(f"matrix: {name!r} is not one of {', '.join(MATRICES)}")
        return {"query": self._query, "key": self._key, "value": self._value}[name]

    def cell_name(self, matrix: str, token: int, dim: int, head: int | None = None) -> str:
        """How the user sees a cell: ``Q[t2, d1] (head 1)`` (see :func:`cell_label`)."""
        h = self.options.head if head is None else head
        index = (self.options.batch_index, h, token, dim)
        return cell_label(matrix, index, self._tokens, self.shape[0])

    def set_cell_text(
        self,
        matrix: str,
        token: int,
        dim: int,
        text: str,
        *,
        batch: int | None = None,
        head: int | None = None,
    ) -> bool:
        """Parse ``text`` and store it; on bad input report the cell and keep the old value."""
        try:
            value = parse_number(text)
        except ValueError as exc:
            self.report(f"{self.cell_name(matrix, token, dim, head)}: {exc}; kept the old value")
            return False
        return self.set_block(matrix, token, dim, [[value]], batch=batch, head=head)

    def set_cell(
        self,
        matrix: str,
        token: int,
        dim: int,
        value: float,
        *,
        batch: int | None = None,
        head: int | None = None,
    ) -> bool:
        return self.set_block(matrix, token, dim, [[value]], batch=batch, head=head)

    def set_block(
        self,
        matrix: str,
        token: int,
        dim: int,
        block: Sequence[Sequence[float]] | np.ndarray,
        *,
        batch: int | None = None,
        head: int | None = None,
        merge: object = None,
    ) -> bool:
        """Write a rectangular block with its top-left at (token, dim) of one head's matrix.

        The block must fit inside the table and hold finite numbers; otherwise
        nothing changes and a message says why. Successive writes with the same
        ``merge`` key (one drag of an arrow) are one undo entry.
        """
        b = self.options.batch_index if batch is None else batch
        h = self.options.head if head is None else head
        array = self._array(matrix)
        n_batch, n_heads, _, _ = array.shape
        # Checked by hand: a negative index would silently write another head.
        if not (0 <= b < n_batch and 0 <= h < n_heads):
            self.report(
                f"{MATRIX_LETTER[matrix]}: there is no batch entry {b + 1} / head {h + 1} "
                f"(B={n_batch}, H={n_heads}); kept the old values"
            )
            return False
        try:
            values = np.array(block, dtype=np.float64)
        except (TypeError, ValueError):
            self.report(f"{MATRIX_LETTER[matrix]}: the pasted block is not a table of numbers")
            return False
        if values.ndim != 2 or values.size == 0:
            self.report(f"{MATRIX_LETTER[matrix]}: expected a rectangular block of numbers")
            return False
        _, _, t, d = array.shape
        rows, cols = values.shape
        if token < 0 or dim < 0 or token + rows > t or dim + cols > d:
            self.report(
                f"{MATRIX_LETTER[matrix]}: a {rows}×{cols} block at "
                f"({token + 1}, {dim + 1}) does not fit the {t}×{d} table; add tokens or "
                "dimensions first, or paste at another cell"
            )
            return False
        bad = first_bad_value(values)
        if bad is not None:
            r, c = bad
            self.report(
                f"{cell_label(matrix, (b, h, token + r, dim + c), self._tokens, n_batch)}: "
                f"{out_of_range(float(values[r, c]))}; kept the old values"
            )
            return False
        region = (b, h, slice(token, token + rows), slice(dim, dim + cols))
        old = array[region].copy()
        if np.array_equal(old, values):
            return True

        def apply(data: np.ndarray, *, edit: bool = False) -> Callable[[], None]:
            def run() -> None:
                self._array(matrix)[region] = data
                if edit:  # the user's edit ends a step-through; its undo and redo do not
                    self._end_step()
                self._changed()
                self.events.values.emit(matrix)

            return run

        what = "edit" if values.size == 1 else f"paste {rows}×{cols}"
        if merge is not None:
            what = "drag"
        self.history.push(
            f"{what} {MATRIX_LETTER[matrix]}",
            apply(old),
            apply(values),
            merge_key=merge,
            apply=apply(values, edit=True),
        )
        return True

    # -- structure edits --------------------------------------------------------------------
    def _fills(self, shape: tuple[int, ...]) -> list[np.ndarray]:
        """New cells for query, key and value, as the options say (see :func:`new_cells`)."""
        return new_cells(shape, self.options.fill, self.options.seed + self.revision)

    def _restore(
        self, snap: Snapshot, options: Options | None = None, *, edit: bool = False
    ) -> None:
        """Put numbers and shape in place, and ``options`` when the change sets them (a load).

        Undo and redo set none: view settings are not edits, so they stay, the step among
        them (clamped). A resize or load the user makes (``edit``) ends a step-through.
        """
        old_shape = self.shape
        self._tokens, self._query = list(snap.tokens), snap.query.copy()
        self._key, self._value = snap.key.copy(), snap.value.copy()
        opts = options or (replace(self.options, step=-1) if edit else self.options)
        b, h, t, d = self.shape
        last_step = b * h * t * t * d - 1  # the loop's last multiply-add
        opts = replace(
            opts,
            batch_index=min(opts.batch_index, b - 1),
            head=min(opts.head, h - 1),
            step=min(opts.step, last_step),
        )
        # Only the step ending is not news for "all": the stepper ends on the shape / values
        # event; a load that sets a step (a file saved mid-step) is.
        ended = edit and options is None and replace(opts, step=self.options.step) == self.options
        options_changed = opts != self.options and not ended
        self.options = opts
        self._changed()
        if self.shape != old_shape:
            self.events.shape.emit()
        else:
            for name in MATRICES:
                self.events.values.emit(name)
        self.events.tokens.emit()
        if options_changed:
            self.events.options.emit("all")

    def _structural(self, text: str, new: Snapshot, options: Options | None = None) -> bool:
        problem = snapshot_problem(new)
        if problem:
            self.report(f"{text}: {problem}")
            return False
        old = self.snapshot()
        # Options are never on the undo stack (the README's rule): undo and redo put back
        # the numbers and the shape, and view settings chosen since — stage, causal,
        # strategy, head, the step-through — stay. Only the load itself sets options.
        self.history.push(
            text,
            lambda: self._restore(old),
            lambda: self._restore(new),
            apply=lambda: self._restore(new, options, edit=True),
        )
        return True

    #: Empty string if the sizes are allowed, else what is wrong and what to do.
    check_size = staticmethod(size_problem)

    def insert_token(self, at: int | None = None, name: str | None = None) -> bool:
        """Insert a token row (in Q, K and V, every batch and head) before index ``at``."""
        b, h, t, d = self.shape
        at = t if at is None else max(0, min(at, t))
        name = name or self._unused_token_name()
        rows = self._fills((b, h, 1, d))
        new = Snapshot(
            (*self._tokens[:at], name, *self._tokens[at:]),
            *(
                np.concatenate([m[:, :, :at], r, m[:, :, at:]], axis=2)
                for m, r in zip((self._query, self._key, self._value), rows, strict=True)
            ),
        )
        return self._structural(f"add token {name}", new)

    def remove_token(self, index: int) -> bool:
        t = self.shape[2]
        if t <= 1:
            self.report("cannot remove the last token: a table needs at least one (T ≥ 1)")
            return False
        if not 0 <= index < t:
            self.report(f"no token number {index + 1} to remove")
            return False
        name = self._tokens[index]
        new = Snapshot(
            tuple(n for i, n in enumerate(self._tokens) if i != index),
            *(np.delete(m, index, axis=2) for m in (self._query, self._key, self._value)),
        )
        return self._structural(f"remove token {name}", new)

    def rename_token(self, index: int, name: str) -> bool:
        name = name.strip()
        if not name:
            self.report("a token name cannot be empty; kept the old name")
            return False
        if not 0 <= index < len(self._tokens):
            self.report(f"no token number {index + 1} to rename")
            return False
        if name == self._tokens[index]:
            return True
        old, new = self._tokens[index], name

        def apply(value: str) -> Callable[[], None]:
            def run() -> None:
                self._tokens[index] = value
                self._update_dirty()
                self.events.tokens.emit()

            return run

        self.history.push(f"rename {old} to {new}", apply(old), apply(new))
        return True

    def _unused_token_name(self, taken: Sequence[str] | None = None) -> str:
        return unused_token_name(self._tokens if taken is None else taken)

    def resize(
        self,
        *,
        batch: int | None = None,
        heads: int | None = None,
        tokens: int | None = None,
        dim: int | None = None,
    ) -> bool:
        """Change B, H, T and/or d; kept cells keep their values, new cells are filled."""
        b0, h0, t0, d0 = self.shape
        b, h, t, d = (
            b0 if batch is None else batch,
            h0 if heads is None else heads,
            t0 if tokens is None else tokens,
            d0 if dim is None else dim,
        )
        if (b, h, t, d) == (b0, h0, t0, d0):
            return True
        problem = self.check_size(b, h, t, d)
        if problem:
            self.report(f"cannot resize to (B={b}, H={h}, T={t}, d={d}): {problem}")
            return False
        new = resized(self.snapshot(), self._fills((b, h, t, d)))
        parts = [
            f"{label}={v}"
            for label, v, v0 in (("B", b, b0), ("H", h, h0), ("T", t, t0), ("d", d, d0))
            if v != v0
        ]
        if not self._structural("resize " + ", ".join(parts), new):
            return False
        grew = b > b0 or h > h0 or t > t0 or d > d0
        if grew and self.options.fill == "random":
            self.report(
                "New cells hold seeded random numbers (choose “new cells: 0” for zeros).", "info"
            )
        return True

    def load(self, snapshot: Snapshot, options: Options | None = None, text: str = "load") -> bool:
        """Replace every number and name at once (presets, examples, a model's head); undoable."""
        snapshot = as_float64(snapshot)
        if snapshot.query.ndim != 4:
            self.report(f"{text}: query has shape {snapshot.query.shape}, expected (B, H, T, d)")
            return False
        b, h, _, _ = snapshot.shape
        if options is not None:
            try:
                options.validate(b, h)
            except ValueError as exc:
                self.report(f"{text}: {exc}")
                return False
        return self._structural(text, snapshot, options)

    # -- options ----------------------------------------------------------------------------
    def set_option(self, name: str, value: Any) -> bool:
        """Change one option; invalid values are reported and ignored. Not on the undo stack."""
        if name not in {f.name for f in fields(Options)}:
            self.report(f"unknown option {name!r}")
            return False
        if getattr(self.options, name) == value:
            return True
        new = replace(self.options, **{name: value})
        b, h, _, _ = self.shape
        try:
            new.validate(b, h)
        except ValueError as exc:
            self.report(str(exc))
            return False
        if name in ("strategy", "dtype"):
            new = replace(new, step=-1)  # the stepper's run is another one now: it ends
        self.options = new
        if name in ("strategy", "scale", "causal", "dtype", "block", "window"):
            self.revision += 1
        if name not in ("step", "head", "batch_index", "granularity"):
            self._update_dirty()
        if name == "step":
            self.events.step.emit()
        else:
            self.events.options.emit(name)
        return True

    def set_step(self, step: int) -> None:
        """Put the stepper's position (``options.step``, its one owner) as the stepper moves.

        Emits nothing: the stepper that moved tells its views itself. Anyone else
        uses ``set_option("step", …)``, whose ``events.step`` tells the stepper.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < -1:
            raise ValueError(f"step: {step!r} is not a step (-1 or more)")
        if step != self.options.step:
            self.options = replace(self.options, step=step)

    def _end_step(self) -> None:
        """An edit of the numbers ends a step-through (the stepper then shows the results)."""
        if self.options.step != -1:
            self.options = replace(self.options, step=-1)
