"""Qt-free model of the loop stepper: which multiply-add is on screen, and what is filled.

The contract the views follow: the stepper emits a :class:`~.frame.Frame`; the tables,
score grid and heatmaps highlight from it and never read the trace themselves.

:class:`Stepper` reads one number, the *cursor*: the index of the last
multiply-add done (``-1`` before the first). Its one owner is the session's
``options.step`` (so a saved session reopens at the same step); the stepper
keeps no copy of it. Strategy and granularity only decide
how far one step moves it — one multiply-add, one cell, one query row or one
head for the loop; one head per matmul call; the whole run for the batched call —
so switching them never loses the place, and every frame is rebuilt from the
cursor with the trace's O(d) seek. Nothing proportional to the run length is
ever stored.

One job at ~450 lines: where the stepper is and what that shows; its words are
in :mod:`.stepper_text` and the seekable trace in :mod:`attn_explorer.compute.trace`.
"""

from __future__ import annotations

from dataclasses import replace

from attn_explorer.compute import LoopTrace
from attn_explorer.state.events import Event
from attn_explorer.state.session import Session
from attn_explorer.state.types import parse_number
from attn_explorer.state.views.frame import Frame, Prediction, prediction_is_right
from attn_explorer.state.views.stepper_text import describe, summary_text

PREDICT_GRANULARITIES = ("multiply-add", "cell")


class Stepper:
    """Steps the score computation of a :class:`Session` and describes each moment as a Frame.

    The stepper follows the session: ``options.strategy``, ``granularity`` and
    ``predict`` choose how it steps, ``options.step`` *is* its cursor (the stepper
    writes it with :meth:`Session.set_step` as it moves and reads it back; the
    session puts it back to -1 when an edit, an undo, a strategy or a dtype ends
    the step-through), and edits of Q or K rebuild the trace. After every
    change ``changed`` is emitted with :meth:`frame` (None while stopped).
    With ``follow_head`` the session's selected batch/head follow the head being
    computed, so the tables and heatmaps show what is highlighted.
    """

    def __init__(self, session: Session, *, follow_head: bool = True) -> None:
        self.session = session
        self.follow_head = follow_head
        self.changed = Event()
        self._trace = self._build_trace()
        #: Whether a step-through is on screen (``to_start`` shows one with nothing done).
        self._active = session.options.step >= 0
        self._prediction: Prediction | None = None
        self._frame_cache: Frame | None = None
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
        """Index of the last multiply-add done, in loop order; -1 before the first.

        Read from ``options.step``, clamped to this run; matmul and batched show the
        whole call containing it (a lesson may have put the step inside one).
        """
        cursor = max(-1, min(self.session.options.step, len(self._trace) - 1))
        if cursor >= 0 and self.strategy != "loop":
            cursor = self._next_end(cursor - 1)
        return cursor

    @property
    def index(self) -> int:
        """The step on screen (0-based, the one containing the cursor); -1 before the first."""
        cursor = self.cursor
        return cursor // self.unit_size if cursor >= 0 else -1

    @property
    def active(self) -> bool:
        """False while stopped: views show the finished results, not a frame."""
        return self._active

    @property
    def at_start(self) -> bool:
        return self.cursor < 0

    @property
    def at_end(self) -> bool:
        return self.cursor >= len(self._trace) - 1

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
        cursor = self.cursor
        if self.predicting and (cursor + 1) % self._trace.d == 0:
            # the next multiply-add starts a new cell: ask about it before revealing it
            cell = self._trace.step(cursor + 1)
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
        self._move(self._next_end(cursor), keep_prediction=True)
        return True

    def step_back(self) -> bool:
        """Undo one step (recomputed from the cursor, not replayed). False at the start."""
        if self.at_start:
            return False
        self._move(self._prev_end(self.cursor))
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
        self._active = False
        self.session.set_step(-1)
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
        self._move(self._next_end(self.cursor), keep_prediction=True)
        return self._prediction

    def _move(self, cursor: int, *, keep_prediction: bool = False) -> None:
        if not keep_prediction:
            self._prediction = None
        self._active = True
        self.session.set_step(cursor)
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

    # -- following the session ---------------------------------------------------------
    def _end(self) -> None:
        """End the step-through: the numbers being stepped through are no longer the session's.

        Called on an edit, a shape change, a strategy or dtype switch, so the
        views always show the complete current result. The session has already put
        the step option back to -1 (it owns it); a load that set its own step (a
        session saved mid-step) is followed by an ``options("all")`` event that
        shows the stepper there.
        """
        self._prediction = None
        self._active = False
        self._changed()

    def _on_values_changed(self, matrix: str) -> None:
        if matrix in ("query", "key"):
            self._trace = self._build_trace()
        self._end_or_follow()

    def _on_shape_changed(self) -> None:
        self._trace = self._build_trace()
        self._end_or_follow()

    def _end_or_follow(self) -> None:
        """An edit ends the step-through; an undo or redo keeps its place (a view setting)."""
        if self.session.history.replaying:
            self._prediction = None
            self._changed()
        else:
            self._end()

    def _on_tokens_changed(self) -> None:
        if self._prediction is not None:
            self._prediction = replace(self._prediction, label=self._label(self._prediction.cell))
        self._changed()

    def _on_step_changed(self) -> None:
        """Someone else put the step option somewhere with ``set_option``: show it there.

        (The stepper's own moves write it with :meth:`Session.set_step`, which emits nothing.)
        """
        self._prediction = None
        self._active = self.session.options.step >= 0
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
            self._active = self.session.options.step >= 0
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
        trace, cursor, index, count = self._trace, self.cursor, self.index, self.count
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
