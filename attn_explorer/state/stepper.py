"""Qt-free model of the loop stepper: which multiply-add is on screen, and what is filled.

The contract the views follow: the stepper emits a :class:`Frame`; the tables,
score grid and heatmaps highlight from it and never read the trace themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_explorer.compute import LoopStep


@dataclass(frozen=True)
class Frame:
    """What the stepper shows at one moment.

    ``filled`` is a boolean (B, H, T_q, T_k) mask of score cells already computed;
    cells not filled are drawn empty (not zero). ``step`` is the current
    multiply-add for the loop strategy (None for matmul/batched or before the
    first step). ``cell`` is the (batch, head, i, j) being filled, if any.
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
    counter: str = ""  # e.g. "multiply-add 7 of 18 · cell (q2, k1) · head 1 of 1"
