"""What the stepper shows at one moment: the :class:`Frame`, and predict mode's :class:`Prediction`.

Qt-free values, built by :class:`~attn_explorer.state.views.stepper.Stepper` and read by
every view that highlights a step (the tables, the score grid, the heatmaps, the vectors
view, the stepper's own words in :mod:`.stepper_text`). Here apart from the stepper so
that its words and its views import what it shows without importing the stepper.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from attn_explorer.compute import LoopStep
from attn_explorer.state.formatting import format_number

#: Predict mode: an answer within this fraction of max(1, |value|) counts as right,
#: so "0.33" is right for 1/3 and "2" is wrong for 2.5.
PREDICT_TOLERANCE = 0.005


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
