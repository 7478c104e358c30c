"""The session's attention result: one owner for what was computed, how, and whether it agrees.

Qt-free. :class:`Results` is the only place that keeps a computed
:class:`~attn_explorer.compute.AttentionResult`. It decides which strategy really
runs (the loop only within :data:`~attn_explorer.compute.LOOP_BUDGET`), caches the
result by the session's revision, records the background agreement check of the
other strategies, and emits :attr:`Results.changed` whenever any of that changes.
Views subscribe to it and read it; none keeps a copy.

Work is split so a window can run it off the GUI thread: :meth:`Results.request`
freezes the inputs into a :class:`ComputeRequest`, whose :meth:`~ComputeRequest.run`
and :meth:`~ComputeRequest.agreement` are plain functions safe in a worker, and
:meth:`Results.accept` / :meth:`Results.accept_agreement` take the outcome back
(a stale outcome, from before a newer edit, is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attn_explorer.compute import (
    LOOP_BUDGET,
    STRATEGIES,
    AttentionResult,
    LoopBudget,
    attention,
    attention_scores,
    estimate_loop_seconds,
)
from attn_explorer.state.events import Event
from attn_explorer.state.formatting import format_seconds

if TYPE_CHECKING:
    from attn_explorer.state.session import Session

#: Score cells (B·H·T·T) up to which a result is computed at once, within a frame of the edit.
INTERACTIVE_CELLS = 64 * 64 * 8
#: Largest max |difference| between strategies that still counts as agreeing.
AGREEMENT_TOLERANCE = 1e-3


def runs_at_once(
    shape: tuple[int, ...], used: str, loop_seconds: float, budget: LoopBudget
) -> bool:
    """Quick enough to compute on the spot, within a frame of the edit (``shape`` is B, H, T, d)."""
    b, h, t, _ = shape
    return b * h * t * t <= INTERACTIVE_CELLS and (
        used != "loop" or loop_seconds < budget.interactive
    )


@dataclass(frozen=True)
class ComputeRequest:
    """Frozen inputs of one attention run, owned by whoever runs it (a worker may)."""

    revision: int
    query: np.ndarray  # (B, H, T, d) in the session's dtype
    key: np.ndarray  # (B, H, T, d)
    value: np.ndarray  # (B, H, T, d)
    strategy: str  # what the user chose
    used: str  # what really runs: the loop only within the budget
    scale: bool
    causal: bool
    loop_seconds: float  # the loop's predicted time on this shape
    budget: LoopBudget = field(default=LOOP_BUDGET, repr=False)

    @property
    def interactive(self) -> bool:
        """Quick enough to compute on the spot, within a frame of the edit."""
        return runs_at_once(self.query.shape, self.used, self.loop_seconds, self.budget)

    @property
    def checks_agreement(self) -> bool:
        """Whether the other strategies are run to show that they agree (the loop is affordable)."""
        return self.loop_seconds < self.budget.agreement

    def run(self) -> ComputedResult:
        """Every stage, by the strategy that really runs (may take long: a worker's job)."""
        result = attention(
            self.query,
            self.key,
            self.value,
            strategy=self.used,
            scale=self.scale,
            causal=self.causal,
        )
        return ComputedResult(self.revision, result, self.strategy, self.used, self.loop_seconds)

    def agreement(self) -> dict[str, float]:
        """Max |difference| of every other strategy's scores against the chosen one's."""
        scores = {name: attention_scores(self.query, self.key, name) for name in STRATEGIES}
        return {
            name: float(np.max(np.abs(scores[name] - scores[self.strategy])))
            for name in STRATEGIES
            if name != self.strategy
        }


@dataclass(frozen=True)
class ComputedResult:
    """A result and how it was made: the strategy chosen and the one that really ran."""

    revision: int
    result: AttentionResult
    chosen: str
    used: str
    loop_seconds: float


class Results:
    """The one owner of a session's attention result (see the module docstring).

    ``changed`` is emitted (no arguments) after a new result, a new agreement
    check outcome or a failure. :attr:`result` is the newest accepted result,
    which may lag the session by one background recompute; :attr:`up_to_date`
    says whether it matches the session's current numbers and options.
    """

    def __init__(self, session: Session, budget: LoopBudget = LOOP_BUDGET) -> None:
        self.session = session
        self.budget = budget
        self.changed = Event()
        self._current: ComputedResult | None = None
        self._diffs: dict[str, float] = {}
        self._agreement_revision = -1  # the revision the pending check is for (-1: none)
        self._error = ""

    # -- reading -------------------------------------------------------------------------
    @property
    def current(self) -> ComputedResult | None:
        return self._current

    @property
    def result(self) -> AttentionResult | None:
        """The newest accepted result, or None before the first."""
        return self._current.result if self._current is not None else None

    @property
    def used(self) -> str:
        """The strategy that computed :attr:`result` (may differ from the chosen one)."""
        return self._current.used if self._current is not None else self.session.options.strategy

    @property
    def up_to_date(self) -> bool:
        return self._current is not None and self._current.revision == self.session.revision

    @property
    def diffs(self) -> dict[str, float]:
        """Max |difference| of each other strategy against the chosen one (empty until checked)."""
        return dict(self._diffs)

    @property
    def agreement_pending(self) -> bool:
        return self._agreement_revision == self.session.revision and not self._diffs

    @property
    def error(self) -> str:
        """Why the newest computation failed ("" when it did not)."""
        return self._error

    # -- computing -----------------------------------------------------------------------
    def interactive_now(self) -> bool:
        """Would the current numbers compute at once? (Decided from sizes: nothing is copied.)"""
        shape = self.session.shape
        strategy = self.session.options.strategy
        used = self.budget.strategy_for(strategy, shape, shape)
        return runs_at_once(shape, used, estimate_loop_seconds(shape, shape), self.budget)

    def request(self) -> ComputeRequest:
        """The current numbers and options, frozen for one run (copies a worker may own)."""
        s = self.session
        dtype = np.dtype(s.options.dtype)
        query = s.matrix("query").astype(dtype, copy=True)
        key = s.matrix("key").astype(dtype, copy=True)
        value = s.matrix("value").astype(dtype, copy=True)
        strategy = s.options.strategy
        return ComputeRequest(
            revision=s.revision,
            query=query,
            key=key,
            value=value,
            strategy=strategy,
            used=self.budget.strategy_for(strategy, query.shape, key.shape),
            scale=s.options.scale,
            causal=s.options.causal,
            loop_seconds=estimate_loop_seconds(query.shape, key.shape),
            budget=self.budget,
        )

    def begin(self, request: ComputeRequest) -> None:
        """A run for ``request`` has started: forget the old agreement check."""
        self._diffs = {}
        self._agreement_revision = request.revision if request.checks_agreement else -1

    def accept(self, outcome: ComputedResult) -> bool:
        """Take a finished run's result; False (and nothing changes) if it is stale."""
        if outcome.revision != self.session.revision:
            return False
        self._current = outcome
        self._error = ""
        self.changed.emit()
        return True

    def accept_agreement(self, revision: int, diffs: dict[str, float]) -> bool:
        """Take the agreement check's differences; False if they are stale."""
        if revision != self.session.revision:
            return False
        self._diffs = dict(diffs)
        self._agreement_revision = -1
        self.changed.emit()
        return True

    def fail(self, revision: int, message: str) -> None:
        """A run failed: keep the last good result on screen and say why."""
        if revision == self.session.revision:
            self._error = message
            self.session.report(f"Could not compute: {message}")
            self.changed.emit()

    def compute_now(self) -> AttentionResult:
        """The result for the current revision, computed here if needed (exports, the CLI).

        Raises ValueError if the inputs cannot be computed.
        """
        if self.up_to_date:
            assert self._current is not None
            return self._current.result
        request = self.request()
        self.begin(request)
        outcome = request.run()
        self.accept(outcome)
        return outcome.result

    # -- what the user reads ---------------------------------------------------------------
    def provenance(self) -> str:
        """How the shown result was made and whether the strategies agree (simple HTML)."""
        chosen = self.session.options.strategy
        current = self._current
        if current is None:
            return "Nothing computed yet."
        used = current.used
        if used != current.chosen:
            lines = [
                f"The loop would take about {format_seconds(current.loop_seconds)} here, so the "
                f"result shown was computed with <b>{used}</b> (the same numbers). Use "
                "Timing ▸ Run loop anyway to time it."
            ]
        else:
            lines = [f"Result computed with <b>{used}</b>."]
        if current.chosen != chosen or not self.up_to_date:
            lines.append("Recomputing…")
        elif self._diffs:
            worst = max(self._diffs.values())
            lines.append(
                "Max |difference| vs "
                + ", ".join(f"{name}: {value:.3g}" for name, value in self._diffs.items())
                + (" — they agree." if worst < AGREEMENT_TOLERANCE else "")
            )
        elif self.agreement_pending:
            lines.append("Checking that the other strategies agree…")
        else:
            lines.append("Agreement check skipped: the loop would be slow on this shape.")
        return "<br>".join(lines)
