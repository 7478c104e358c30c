"""Keeps the session's :class:`~attn_explorer.state.results.results.Results` up to date, off-thread.

The rules live in ``state.results`` (which strategy really runs, what is quick
enough to compute at once, whether the agreement check is affordable); this
module only decides *where* the work runs: a quick request on the spot, within
a frame of the edit; a big one debounced into a worker, where the newest edit
wins. The agreement check of the other strategies runs in the background after
the result has painted, when the loop is affordable on the shape.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from attn_explorer.state.results.results import ComputedResult, ComputeRequest, Results
from attn_explorer.ui.common.workers import LatestRunner

#: Typing pauses shorter than this (ms) are one edit for a big recompute.
RECOMPUTE_DEBOUNCE_MS = 40
#: The agreement check waits this long (ms) so it does not compete with the repaint.
AGREEMENT_DELAY_MS = 150


class Recompute(QObject):
    """Runs ``results``' requests whenever the session changes what they depend on.

    ``busy(bool)`` says when background work starts and ends.
    """

    busy = Signal(bool)

    def __init__(self, results: Results, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.results = results
        self.runner = LatestRunner(self)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(self._on_failed)
        self.runner.busy.connect(self.busy)
        self.agreement_runner = LatestRunner(self)
        self.agreement_runner.finished.connect(self._on_agreement)
        self._pending: ComputeRequest | None = None  # the request in the worker
        self._agreement_request: ComputeRequest | None = None
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(RECOMPUTE_DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run)
        self._agreement_timer = QTimer(self)
        self._agreement_timer.setSingleShot(True)
        self._agreement_timer.setInterval(AGREEMENT_DELAY_MS)
        self._agreement_timer.timeout.connect(self._start_agreement)
        events = results.session.events
        events.values.connect(lambda matrix: self.schedule())
        events.shape.connect(self.schedule)
        events.options.connect(lambda name: self.schedule())

    def schedule(self) -> None:
        """Recompute soon if the result is out of date: quick ones now, big ones debounced."""
        if self.results.up_to_date:
            return
        if self.results.interactive_now():
            self.run()
        else:
            self._debounce.start()  # Q, K, V are copied once, when it runs

    def run(self, request: ComputeRequest | None = None) -> None:
        """Compute the current result: here if it is quick, else in the worker."""
        self._debounce.stop()
        if request is None:
            if self.results.up_to_date:
                return
            request = self.results.request()
        self.results.begin(request)
        self.agreement_runner.cancel(quiet=True)
        self._agreement_timer.stop()
        if request.interactive:
            try:
                # Here, on the GUI thread, and accepted below: a head or two recomputed
                # may be written into the result on screen instead of copying it.
                outcome = request.run(reuse_base=True)
            except ValueError as exc:
                self.results.fail(request.revision, str(exc))
                return
            self._accepted(request, outcome)
            return
        self._pending = request
        self.runner.submit(lambda progress, should_stop: request.run())

    def _on_finished(self, outcome: object) -> None:
        request, self._pending = self._pending, None  # it may hold the last result: let it go
        if (
            isinstance(outcome, ComputedResult)
            and request is not None
            and request.revision == outcome.revision
        ):
            self._accepted(request, outcome)

    def _accepted(self, request: ComputeRequest, outcome: ComputedResult) -> None:
        if self.results.accept(outcome) and request.checks_agreement:
            self._agreement_request = request  # after the result has painted
            self._agreement_timer.start()

    def _on_failed(self, message: str) -> None:
        if self._pending is not None:
            self.results.fail(self._pending.revision, message)

    def _start_agreement(self) -> None:
        request = self._agreement_request
        if request is None or request.revision != self.results.session.revision:
            return
        self.agreement_runner.submit(
            lambda progress, should_stop: (request.revision, request.agreement())
        )

    def _on_agreement(self, outcome: object) -> None:
        match outcome:  # (revision, diffs), as _start_agreement's job returns
            case (int(revision), dict(diffs)):
                self.results.accept_agreement(revision, diffs)

    def wait_idle(self) -> bool:
        """True when nothing is pending (for tests and benchmarks)."""
        return (
            self.results.up_to_date and not self.runner.is_busy() and not self._debounce.isActive()
        )

    def shutdown(self) -> None:
        """Stop timers and tell background work to stop (before the window closes)."""
        self._debounce.stop()
        self._agreement_timer.stop()
        self.runner.cancel(quiet=True)
        self.agreement_runner.cancel(quiet=True)
