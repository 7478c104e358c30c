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

An edit of a few heads' numbers recomputes only those heads
(:mod:`~attn_explorer.state.results.incremental`), on the spot when that is quick even if
a full recompute would not be. Each result keeps the :mod:`~attn_explorer.state.results.preview`
of the stages shown, made with it (in the worker, for a big one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from attn_explorer.compute import (
    LOOP_BUDGET,
    STRATEGIES,
    AttentionResult,
    LoopBudget,
    Workspace,
    attention,
    attention_scores,
    estimate_loop_seconds,
)
from attn_explorer.compute.tiled import DEFAULT_BLOCK
from attn_explorer.state.events import Event
from attn_explorer.state.formatting import format_seconds
from attn_explorer.state.types import MATRICES

if TYPE_CHECKING:
    from attn_explorer.state.results.incremental import Heads
    from attn_explorer.state.results.preview import Preview
    from attn_explorer.state.session import Session

#: Score cells (B·H·T·T) up to which a result is computed at once, within a frame of the edit.
INTERACTIVE_CELLS = 64 * 64 * 8
#: Largest set of scores, weights and output arrays the results keep a spare of (H16 T1024).
WORKSPACE_BYTES = 160 * 2**20
#: Largest max |difference| between strategies that still counts as agreeing.
AGREEMENT_TOLERANCE = 1e-3
#: Score cells of the *changed* heads up to which recomputing only them is done at once.
INCREMENTAL_CELLS = 2 * 512 * 512
#: Score cells (B·H·T·T) up to which the other heads are copied on the spot (two arrays of
#: them: scores and weights); past this an edit of one head still recomputes only it, in
#: the worker.
SPLICE_CELLS = 16 * 512 * 512
#: Entries of each of Q, K, V (B·H·T·d) up to which an edit is compared with the last
#: result's inputs to find the heads it changed (on the GUI thread: ~10 ms at this size).
COMPARED_ENTRIES = 16 * 2048 * 128


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
    block: int = DEFAULT_BLOCK  # the tiled strategy's tile size
    window: int | None = None  # a sliding window on the causal mask
    budget: LoopBudget = field(default=LOOP_BUDGET, repr=False)
    stage: str = "scores"  # the stage on screen: its preview is made with the result
    batch_index: int = 0
    #: A result whose inputs differ from these only in ``heads``: only they are recomputed.
    base: ComputedResult | None = field(default=None, repr=False)
    heads: Heads | None = field(default=None, repr=False)
    #: Lends a full run the arrays of the previous one of the same shape (see compute.Workspace).
    workspace: Workspace | None = field(default=None, repr=False, compare=False)

    @property
    def interactive(self) -> bool:
        """Quick enough to compute on the spot, within a frame of the edit."""
        if self.base is not None and self.heads is not None:
            return updates_at_once(
                self.query.shape, len(self.heads), self.used, self.loop_seconds, self.budget
            )
        return runs_at_once(self.query.shape, self.used, self.loop_seconds, self.budget)

    @property
    def checks_agreement(self) -> bool:
        """Whether the other strategies are run to show that they agree (the loop is affordable)."""
        return self.loop_seconds < self.budget.agreement

    def run(self, reuse_base: bool = False) -> ComputedResult:
        """Every stage, by the strategy that really runs (may take long: a worker's job).

        With a ``base``, only ``heads`` are computed and the rest is copied from it;
        ``reuse_base`` writes them into the base result's arrays instead, for a run on
        the GUI thread whose outcome replaces the base at once (never in a worker:
        a dropped outcome would leave the base changed). The preview of the stage on
        screen is made here too when this is a worker's job (not ``interactive``).
        """
        previews: dict[tuple[str, int], Preview] = {}
        if self.base is not None and self.heads is not None:
            # Imported here, as the preview module: the window's first paint needs neither.
            from attn_explorer.state.results.incremental import recompute_heads, splice_preview

            base = self.base
            if len(self.heads) == 0:
                result = base.result  # the same numbers and options: the same result
                previews = dict(base.previews)
            else:
                result, part = recompute_heads(
                    base.result,
                    self.query,
                    self.key,
                    self.value,
                    self.heads,
                    strategy=self.used,
                    scale=self.scale,
                    causal=self.causal,
                    window=self.window,
                    in_place=reuse_base,
                )
                for (stage, batch), preview in base.previews.items():
                    previews[stage, batch] = splice_preview(
                        preview, result, part, self.heads, stage, batch
                    )
        else:
            result = attention(
                self.query,
                self.key,
                self.value,
                strategy=self.used,
                scale=self.scale,
                causal=self.causal,
                workspace=self.workspace,
                block=self.block,
                window=self.window,
            )
        outcome = ComputedResult(
            self.revision,
            result,
            self.strategy,
            self.used,
            self.loop_seconds,
            inputs=(self.query, self.key, self.value),
            scale=self.scale,
            causal=self.causal,
            window=self.window,
            previews=previews,
        )
        if not self.interactive:  # a worker's job: make the preview here, off the GUI thread
            outcome.preview(self.stage, self.batch_index)
        return outcome

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
    #: The query, key and value (B, H, T, d) it was computed from, and the options.
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    scale: bool = True
    causal: bool = False
    window: int | None = None
    #: Previews by (stage, batch entry), made on first use (see :meth:`preview`).
    previews: dict[tuple[str, int], Preview] = field(
        default_factory=dict, repr=False, compare=False
    )

    def preview(self, stage: str, batch: int) -> Preview:
        """The heads of ``stage`` in ``batch`` reduced for thumbnails (made once, then kept)."""
        from attn_explorer.state.results.preview import make_preview  # see ComputeRequest.run

        key = (stage, batch)
        if key not in self.previews:
            values = self.result.stage(stage)
            assert values is not None  # every session has V, so every stage exists
            self.previews[key] = make_preview(values[batch])
        return self.previews[key]


def updates_at_once(
    shape: tuple[int, ...], heads: int, used: str, loop_seconds: float, budget: LoopBudget
) -> bool:
    """Recomputing ``heads`` of ``shape`` (B, H, T, d) and copying the rest is quick enough
    to do on the spot (the loop's share of the heads within its interactive budget)."""
    b, h, t, _ = shape
    share = heads / (b * h)
    return (
        heads * t * t <= INCREMENTAL_CELLS
        and b * h * t * t <= SPLICE_CELLS
        and (used != "loop" or loop_seconds * share < budget.interactive)
    )


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
        #: (revision, result compared with, what _changed_heads found): found once per edit
        self._heads_at: tuple[int, ComputedResult | None, Heads | None] = (-1, None, None)
        # A full recompute of the same shape (a paste, an option) gets the arrays of the
        # result before it once that is replaced, instead of mapping fresh ones; a spare
        # set is kept only up to WORKSPACE_BYTES, so a huge session holds none while idle.
        self._workspace = Workspace(sets=2, max_bytes=WORKSPACE_BYTES)

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
        loop_seconds = estimate_loop_seconds(shape, shape)
        if runs_at_once(shape, used, loop_seconds, self.budget):
            return True
        heads = self._changed_heads()
        return heads is not None and updates_at_once(
            shape, len(heads), used, loop_seconds, self.budget
        )

    def _changed_heads(self) -> Heads | None:
        """The (batch, head) pairs whose numbers differ from the current result's inputs,
        when only they need computing (same shape and options, at most half the heads);
        else None. Only up to COMPARED_ENTRIES, once per edit."""
        s = self.session
        base = self._current
        revision, compared, found = self._heads_at
        if revision == s.revision and compared is base:
            return found
        heads: Heads | None = None
        b, h, t, d = s.shape
        if (
            base is not None
            and base.inputs is not None
            and b * h * t * d <= COMPARED_ENTRIES
            and base.inputs[0].shape == s.shape
            and base.inputs[2].shape == s.matrix("value").shape
            and base.inputs[0].dtype == np.dtype(s.options.dtype)
            and (base.chosen, base.scale, base.causal, base.window)
            == (s.options.strategy, s.options.scale, s.options.causal, s.options.mask_window)
            and base.used == self.budget.strategy_for(s.options.strategy, s.shape, s.shape)
        ):
            from attn_explorer.state.results.incremental import (
                changed_heads,  # see ComputeRequest.run
            )

            dtype = base.inputs[0].dtype
            now = tuple(s.matrix(name).astype(dtype, copy=False) for name in MATRICES)
            changed = changed_heads(base.inputs, (now[0], now[1], now[2]))
            if 2 * len(changed) <= b * h:
                heads = changed
        self._heads_at = (s.revision, base, heads)
        return heads

    def preview(self, stage: str, batch: int) -> Preview | None:
        """The shown result's ``stage`` in ``batch`` reduced for thumbnails (None: no result)."""
        return self._current.preview(stage, batch) if self._current is not None else None

    def request(self) -> ComputeRequest:
        """The current numbers and options, frozen for one run (copies a worker may own)."""
        s = self.session
        dtype = np.dtype(s.options.dtype)
        query = s.matrix("query").astype(dtype, copy=True)
        key = s.matrix("key").astype(dtype, copy=True)
        value = s.matrix("value").astype(dtype, copy=True)
        strategy = s.options.strategy
        request = ComputeRequest(
            revision=s.revision,
            query=query,
            key=key,
            value=value,
            strategy=strategy,
            used=self.budget.strategy_for(strategy, query.shape, key.shape),
            scale=s.options.scale,
            causal=s.options.causal,
            window=s.options.mask_window,
            loop_seconds=estimate_loop_seconds(query.shape, key.shape),
            block=s.options.block,
            budget=self.budget,
            stage=s.options.stage,
            batch_index=min(s.options.batch_index, query.shape[0] - 1),
            workspace=self._workspace,
        )
        heads = self._changed_heads()
        if heads is not None and self._current is not None:
            request = replace(request, base=self._current, heads=heads)
        return request

    def begin(self, request: ComputeRequest) -> None:
        """A run for ``request`` has started: forget the old agreement check."""
        self._diffs = {}
        self._agreement_revision = request.revision if request.checks_agreement else -1

    def accept(self, outcome: ComputedResult) -> bool:
        """Take a finished run's result; False (and nothing changes) if it is stale."""
        if outcome.revision != self.session.revision:
            return False
        self._current = outcome
        self._heads_at = (-1, None, None)  # compared with the result before: forget it
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
