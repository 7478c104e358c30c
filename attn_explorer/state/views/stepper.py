"""Qt-free model of the loop stepper: which multiply-add is on screen, and what is filled.

The contract the views follow: the stepper emits a :class:`Frame`; the tables,
score grid and heatmaps highlight from it and never read the trace themselves.

:class:`Stepper` keeps one number, the *cursor*: the index of the last
multiply-add done (``-1`` before the first). Strategy and granularity only decide
how far one step moves it — one multiply-add, one cell, one query row or one
head for the loop; one head per matmul call; the whole run for the batched call —
so switching them never loses the place, and every frame is rebuilt from the
cursor with the trace's O(d) seek. Nothing proportional to the run length is
ever stored.

One job at ~450 lines: where the stepper is and what that shows; its words are
in :mod:`.stepper_text` and the seekable trace in :mod:`attn_explorer.compute.trace`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from attn_explorer.compute import LoopStep, LoopTrace
from attn_explorer.state.events import Event
from attn_explorer.state.formatting import format_number
from attn_explorer.state.session import Session
from attn_explorer.state.types import parse_number
from attn_explorer.state.views.stepper_text import describe, summary_text

#: Predict mode: an answer within this fraction of max(1, |value|) counts as right,
#: so "0.33" is right for 1/3 and "2" is wrong for 2.5.
PREDICT_TOLERANCE = 0.005

PREDICT_GRANULARITIES = ("multiply-add", "cell")


@dataclass(frozen=True)
class Prediction:
    """Predict mode's question about one score cell, and the user's answer once given.

    ``status`` is ``"asking"`` until an answer arrives, then ``"right"``,
    ``"wrong"`` or ``"skipped"`` (the user stepped on without answering).
    """

    cell: tuple[int, int, int, int]  # (batch, head, i, j)
    value: float  # the true dot product q_i · k_j
    working: str  # e.g. "0·2 + 1·0 = 0"
    label: str  # e.g. "query t2 · key t4"
    status: str = "asking"
    answer: float | None = None

    @property
    def text(self) -> str:
        """What the panel tells the user, e.g. ``Right: query t2 · key t4 = 0·2 + 1·0 = 0``."""
        if self.status == "asking":
            return f"Predict {self.label}: type the value you expect, then Check."
        if self.status == "right":
            return f"Right! {self.label} = {self.working}"
        if self.status == "wrong":
            return (
                f"Not quite: you said {format_number(self.answer or 0.0)}, "
                f"but {self.label} = {self.working}"
            )
        return f"Skipped: {self.label} = {self.working}"


def prediction_is_right(answer: float, value: float) -> bool:
    """True when ``answer`` is within :data:`PREDICT_TOLERANCE` of ``value`` (see there)."""
    return abs(answer - value) <= PREDICT_TOLERANCE * max(1.0, abs(value))


@dataclass(frozen=True, eq=False)
class Frame:
    """What the stepper shows at one moment.

    ``filled`` is a boolean (B, H, T_q, T_k) mask of score cells already computed;
    cells not filled are drawn empty (not zero). ``step`` is the current
    multiply-add for the loop strategy (None for matmul/batched or before the
    first step). ``cell`` is the (batch, head, i, j) being filled, if any.
    ``granularity`` is the loop's unit, ``"head"`` for matmul and ``"all"`` for
    batched. ``prediction`` is predict mode's open or answered question.
    """

    strategy: str
    granularity: str
    index: int  # position in the run, -1 = before the first step
    count: int  # steps in the whole run at this granularity / strategy
    filled: np.ndarray
    step: LoopStep | None = None
    cell: tuple[int, int, int, int] | None = None
    head: int | None = None  # the head being worked on (matmul: the head just filled)
    working: str = ""  # e.g. "1·1 + 0·0 = 1"
    counter: str = ""  # e.g. "multiply-add 7 of 18 · cell (t2, t1) · head 1 of 1"
    batch: int | None = None  # the batch entry of ``head``
    cursor: int = -1  # last multiply-add done in loop order, -1 = none
    prediction: Prediction | None = None

    def __eq__(self, other: object) -> bool:
        # The generated __eq__ would compare ``filled`` with ==, which is ambiguous for arrays.
        if not isinstance(other, Frame):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            if f.name == "filled"
            else getattr(self, f.name) == getattr(other, f.name)
            for f in fields(self)
        )

    # Frames compare arrays, so they are unhashable; typeshed wants __hash__ to be a method.
    __hash__ = None  # type: ignore[assignment]


class Stepper:
    """Steps the score computation of a :class:`Session` and describes each moment as a Frame.

    The stepper follows the session: ``options.strategy``, ``granularity`` and
    ``predict`` choose how it steps, ``options.step`` mirrors its cursor (so a
    saved session reopens at the same step), edits of Q or K rebuild the trace at
    the same cursor and a change of shape puts it back at the start. After every
    change ``changed`` is emitted with :meth:`frame` (None while stopped).
    With ``follow_head`` the session's selected batch/head follow the head being
    computed, so the tables and heatmaps show what is highlighted.
    """

    def __init__(self, session: Session, *, follow_head: bool = True) -> None:
        self.session = session
        self.follow_head = follow_head
        self.changed = Event()
        self._trace = self._build_trace()
        self._cursor = -1
        self._active = False
        self._prediction: Prediction | None = None
        self._writing_step = False
        self._frame_cache: Frame | None = None
        self._sync_cursor_from_session()
        events = session.events
        events.values.connect(self._on_values_changed)
        events.shape.connect(self._on_shape_changed)
        events.tokens.connect(self._on_tokens_changed)
        events.options.connect(self._on_option_changed)
        events.step.connect(self._on_step_changed)

    def close(self) -> None:
        """Stop following the session (the stepper is no longer used)."""
        events = self.session.events
        events.values.disconnect(self._on_values_changed)
        events.shape.disconnect(self._on_shape_changed)
        events.tokens.disconnect(self._on_tokens_changed)
        events.options.disconnect(self._on_option_changed)
        events.step.disconnect(self._on_step_changed)

    # -- what the stepper runs -------------------------------------------------------
    def _build_trace(self) -> LoopTrace:
        dtype = self.session.options.dtype  # the loop adds in the dtype the app computes in
        return LoopTrace(
            self.session.matrix("query").astype(dtype), self.session.matrix("key").astype(dtype)
        )

    @property
    def trace(self) -> LoopTrace:
        return self._trace

    @property
    def strategy(self) -> str:
        return self.session.options.strategy

    @property
    def granularity(self) -> str:
        """The unit of one step: the loop's granularity, ``"head"`` for matmul, ``"all"``."""
        if self.strategy == "matmul":
            return "head"
        if self.strategy in ("batched", "tiled"):  # tiled: its key blocks step in TiledReadout
            return "all"
        return self.session.options.granularity

    @property
    def unit_size(self) -> int:
        """Multiply-adds covered by one step."""
        if self.strategy in ("batched", "tiled"):
            return len(self._trace)
        if self.strategy == "matmul":
            return self._trace.unit_size("head")
        return self._trace.unit_size(self.session.options.granularity)

    @property
    def count(self) -> int:
        """Steps in the whole run at the current strategy and granularity."""
        return len(self._trace) // self.unit_size

    @property
    def cursor(self) -> int:
        """Index of the last multiply-add done, in loop order; -1 before the first."""
        return self._cursor

    @property
    def index(self) -> int:
        """The step on screen (0-based, the one containing the cursor); -1 before the first."""
        return self._cursor // self.unit_size if self._cursor >= 0 else -1

    @property
    def active(self) -> bool:
        """False while stopped: views show the finished results, not a frame."""
        return self._active

    @property
    def at_start(self) -> bool:
        return self._cursor < 0

    @property
    def at_end(self) -> bool:
        return self._cursor >= len(self._trace) - 1

    @property
    def prediction(self) -> Prediction | None:
        return self._prediction

    @property
    def needs_answer(self) -> bool:
        """Predict mode is waiting for the user's value of the next cell."""
        return self._prediction is not None and self._prediction.status == "asking"

    @property
    def predicting(self) -> bool:
        """Predict mode applies: it is on, and steps reveal single cells of the loop."""
        options = self.session.options
        return (
            options.predict
            and options.strategy == "loop"
            and options.granularity in PREDICT_GRANULARITIES
        )

    # -- moving ------------------------------------------------------------------------
    def _next_end(self, cursor: int) -> int:
        unit = self.unit_size
        return ((cursor + 1) // unit + 1) * unit - 1

    def _prev_end(self, cursor: int) -> int:
        unit = self.unit_size
        floor_end = ((cursor + 1) // unit) * unit - 1  # end of the last whole unit done
        return max(-1, floor_end if floor_end < cursor else cursor - unit)

    def step_forward(self) -> bool:
        """Do one step. Returns False at the end, or when predict mode stops to ask first.

        Stepping again while predict mode asks reveals the cell without an answer.
        """
        if self.at_end:
            return False
        if self.predicting and (self._cursor + 1) % self._trace.d == 0:
            # the next multiply-add starts a new cell: ask about it before revealing it
            cell = self._trace.step(self._cursor + 1)
            target = (cell.batch, cell.head, cell.i, cell.j)
            current = self._prediction
            if current is None or current.cell != target:
                self._prediction = self._question(target)
                self._active = True
                self._changed()
                return False
            if current.status == "asking":
                self._prediction = replace(current, status="skipped")
        elif not self.predicting:
            self._prediction = None  # an answered question stays up while its cell fills
        self._move(self._next_end(self._cursor), keep_prediction=True)
        return True

    def step_back(self) -> bool:
        """Undo one step (recomputed from the cursor, not replayed). False at the start."""
        if self.at_start:
            return False
        self._move(self._prev_end(self._cursor))
        return True

    def seek(self, index: int) -> None:
        """Show step ``index`` (0-based, at the current granularity); -1 = before the first."""
        index = max(-1, min(int(index), self.count - 1))
        self._move(-1 if index < 0 else (index + 1) * self.unit_size - 1)

    def seek_multiply_add(self, cursor: int) -> None:
        """Show the moment multiply-add ``cursor`` (loop order) is done; -1 = nothing done.

        Matmul and batched show the call containing it, complete.
        """
        cursor = max(-1, min(int(cursor), len(self._trace) - 1))
        if cursor >= 0 and self.strategy != "loop":
            cursor = self._next_end(cursor - 1)
        self._move(cursor)

    def seek_cell(self, batch: int, head: int, i: int, j: int) -> None:
        """Jump to the first multiply-add of score cell (batch, head, i, j)."""
        b, h, t_q, t_k, _ = self._trace.shape
        if not (0 <= batch < b and 0 <= head < h and 0 <= i < t_q and 0 <= j < t_k):
            raise IndexError(f"no score cell (batch {batch}, head {head}, i {i}, j {j})")
        self.seek_multiply_add(self._trace.index_of_cell(batch, head, i, j, 0))

    def to_start(self) -> None:
        """Before the first step: every score cell empty."""
        self._move(-1)

    def to_end(self) -> None:
        """After the last step: every score cell filled."""
        self._move(len(self._trace) - 1)

    def stop(self) -> None:
        """Leave stepping: back to the start, and views show the finished results (frame None)."""
        self._prediction = None
        self._cursor = -1
        self._active = False
        self._write_step()
        self._changed()

    def answer(self, text: str | float) -> Prediction | None:
        """Check predict mode's open question against ``text`` and reveal the cell.

        Returns the answered :class:`Prediction`, or None when nothing was asked.
        Raises ValueError (with a message for the user) if ``text`` is not a number.
        """
        current = self._prediction
        if current is None or current.status != "asking":
            return None
        value = parse_number(text) if isinstance(text, str) else float(text)
        right = prediction_is_right(value, current.value)
        self._prediction = replace(current, status="right" if right else "wrong", answer=value)
        self._move(self._next_end(self._cursor), keep_prediction=True)
        return self._prediction

    def _move(self, cursor: int, *, keep_prediction: bool = False) -> None:
        if not keep_prediction:
            self._prediction = None
        self._cursor = cursor
        self._active = True
        self._write_step()
        if self.follow_head and cursor >= 0 and self.strategy != "batched":
            batch, head = divmod(cursor // self._trace.unit_size("head"), self._trace.heads)
            self._select_head(batch, head)
        self._changed()

    def _select_head(self, batch: int, head: int) -> None:
        options = self.session.options
        if options.batch_index != batch:
            self.session.set_option("batch_index", batch)
        if options.head != head:
            self.session.set_option("head", head)

    def _write_step(self) -> None:
        if self.session.options.step == self._cursor:
            return
        self._writing_step = True
        try:
            self.session.set_option("step", self._cursor)
        finally:
            self._writing_step = False

    def _sync_cursor_from_session(self) -> None:
        step = self.session.options.step
        self._cursor = max(-1, min(step, len(self._trace) - 1))
        if self._cursor >= 0 and self.strategy != "loop":
            self._cursor = self._next_end(self._cursor - 1)
        self._active = step >= 0

    # -- following the session ---------------------------------------------------------
    def _end(self) -> None:
        """End the step-through: the numbers being stepped through are no longer the session's.

        Called on an edit, a shape change, an undo, a strategy or dtype switch, so the
        views always show the complete current result. The step option is reset
        only if it still mirrors this cursor: a load that set its own step (a
        session saved mid-step) is followed by an ``options("all")`` event that
        puts the stepper there.
        """
        self._prediction = None
        mirrored = self.session.options.step == self._cursor
        self._cursor = -1
        self._active = False
        if mirrored:
            self._write_step()
        self._changed()

    def _on_values_changed(self, matrix: str) -> None:
        if matrix in ("query", "key"):
            self._trace = self._build_trace()
        self._end()

    def _on_shape_changed(self) -> None:
        self._trace = self._build_trace()
        self._end()

    def _on_tokens_changed(self) -> None:
        if self._prediction is not None:
            self._prediction = replace(self._prediction, label=self._label(self._prediction.cell))
        self._changed()

    def _on_step_changed(self) -> None:
        """Someone else (a lesson, a loaded file) put the step option somewhere: go there."""
        if not self._writing_step and self.session.options.step != self._cursor:
            self._prediction = None
            self._sync_cursor_from_session()
            self._changed()

    def _on_option_changed(self, name: str) -> None:
        if name in ("strategy", "dtype"):
            if name == "dtype":
                self._trace = self._build_trace()
            self._end()
        elif name in ("granularity", "predict"):
            if not self.predicting:
                self._prediction = None
            self._changed()
        elif name == "all":
            self._trace = self._build_trace()
            self._prediction = None
            self._sync_cursor_from_session()
            self._changed()

    # -- what is shown ---------------------------------------------------------------------
    def _token(self, index: int) -> str:
        tokens = self.session.tokens
        return tokens[index] if 0 <= index < len(tokens) else f"t{index + 1}"

    def _label(self, cell: tuple[int, int, int, int]) -> str:
        return f"query {self._token(cell[2])} · key {self._token(cell[3])}"

    def _question(self, cell: tuple[int, int, int, int]) -> Prediction:
        end = self._trace.index_of_cell(*cell, d=self._trace.d - 1)
        step = self._trace.step(end)
        return Prediction(cell, step.partial_sum, self._trace.working(end), self._label(cell))

    def _changed(self) -> None:
        self._frame_cache = None
        self.changed.emit(self.frame())

    def frame(self) -> Frame | None:
        """The current Frame, or None while stopped (views then show the finished results)."""
        if not self._active:
            return None
        if self._frame_cache is None:
            self._frame_cache = self._build_frame()
        return self._frame_cache

    def _build_frame(self) -> Frame:
        trace, cursor, index, count = self._trace, self._cursor, self.index, self.count
        counter, fields_ = describe(
            trace, self.strategy, self.granularity, cursor, index, count, self._token
        )
        if self.needs_answer:
            counter += " · predict the next cell"
        return Frame(
            strategy=self.strategy,
            granularity=self.granularity,
            index=index,
            count=count,
            filled=trace.filled_mask(cursor),
            counter=counter,
            cursor=cursor,
            prediction=self._prediction,
            **fields_,
        )

    def summary(self) -> str:
        """How the three strategies divide this session's work (see :func:`summary_text`)."""
        return summary_text(self._trace.query.shape, self._trace.key.shape)
