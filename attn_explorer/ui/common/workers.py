"""Run plain functions in a thread pool; results come back by signal on the GUI thread.

A job is a plain function ``fn(progress, should_stop) -> result`` (see
``compute.time_strategies``). Each submit gets a new ticket; only the newest
ticket of a :class:`LatestRunner` reaches the GUI, so stale results are dropped.

The pool's threads are Python's own (``concurrent.futures``), not a ``QThreadPool``:
a Qt pool thread makes a new Python thread state each time it calls into Python, and
CPython 3.11 crashes (signal 11 in ``traceback_new``) when that happens while
``tracemalloc`` traces, as the timing's memory measurement does — gdb caught it
in a pool thread starting a job. A Python thread's state is made once, by the thread
that starts it, with the GIL held.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from PySide6.QtCore import QObject, Signal

from attn_explorer.compute import Cancelled

Job = Callable[[Callable[[float, str], None], Callable[[], bool]], Any]


class _Signals(QObject):
    finished = Signal(int, object)
    failed = Signal(int, str)
    cancelled = Signal(int)
    progress = Signal(int, float, str)


class JobPool:
    """Two Python worker threads shared by every runner (the machine has 2 cores)."""

    def __init__(self, workers: int = 2) -> None:
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="attn-job")
        self._futures: set[Future[None]] = set()
        self._lock = threading.Lock()

    def start(self, task: _Task) -> None:
        future = self._executor.submit(task.run)
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def wait_for_done(self, timeout_ms: int = -1) -> bool:
        """Wait until every job started so far has ended; False if ``timeout_ms`` ran out."""
        with self._lock:
            running = set(self._futures)
        _, pending = wait_futures(running, None if timeout_ms < 0 else timeout_ms / 1000)
        return not pending


class _Task:
    def __init__(self, ticket: int, job: Job, signals: _Signals, stop: threading.Event) -> None:
        self.ticket, self.job, self.signals, self.stop = ticket, job, signals, stop

    def run(self) -> None:
        if self.stop.is_set():  # superseded while it waited for a thread: never start it
            self._emit("cancelled", self.ticket)
            return
        try:
            result = self.job(
                lambda fraction, text: self._emit("progress", self.ticket, fraction, text),
                self.stop.is_set,
            )
        except Cancelled:
            self._emit("cancelled", self.ticket)
        except Exception as exc:  # reported in the UI; the app stays usable
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self._emit("failed", self.ticket, detail)
        else:
            self._emit("finished", self.ticket, result)

    def _emit(self, name: str, *args: object) -> None:
        # RuntimeError: the window closed while this job ran; nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            getattr(self.signals, name).emit(*args)


class LatestRunner(QObject):
    """Runs jobs in the background where only the newest one counts.

    A new submit tells the running job to stop (its ``should_stop`` turns True) and
    drops its result; a job superseded before a thread was free never starts.

    Signals carry only the newest job's outcome: ``finished(result)``,
    ``failed(message)``, ``cancelled()``, ``progress(fraction, text)``, and
    ``busy(bool)`` when work starts or ends.
    """

    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()
    progress = Signal(float, str)
    busy = Signal(bool)

    _pool: JobPool | None = None

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._signals = _Signals()
        self._signals.finished.connect(self._on_finished)
        self._signals.failed.connect(self._on_failed)
        self._signals.cancelled.connect(self._on_cancelled)
        self._signals.progress.connect(self._on_progress)
        self._ticket = 0
        self._stop: threading.Event | None = None
        self.dropped = 0  # stale results thrown away (for tests and the benchmark)

    @classmethod
    def pool(cls) -> JobPool:
        if cls._pool is None:
            cls._pool = JobPool(2)
        return cls._pool

    def submit(self, job: Job) -> int:
        """Start ``job``; any job still running is told to stop and its result is dropped."""
        self.cancel(quiet=True)
        self._ticket += 1
        self._stop = threading.Event()
        self.pool().start(_Task(self._ticket, job, self._signals, self._stop))
        self.busy.emit(True)
        return self._ticket

    def cancel(self, quiet: bool = False) -> None:
        """Tell the running job to stop; its result, if it still comes, is dropped.

        ``quiet`` skips the ``cancelled`` signal (a new job replaces this one).
        """
        if self._stop is not None:
            self._stop.set()
            self._stop = None
            self._ticket += 1
            self.busy.emit(False)
            if not quiet:
                self.cancelled.emit()

    def is_busy(self) -> bool:
        return self._stop is not None

    def _current(self, ticket: int) -> bool:
        if ticket != self._ticket:
            self.dropped += 1
            return False
        return True

    def _on_finished(self, ticket: int, result: object) -> None:
        if self._current(ticket):
            self._stop = None
            self.busy.emit(False)
            self.finished.emit(result)

    def _on_failed(self, ticket: int, message: str) -> None:
        if self._current(ticket):
            self._stop = None
            self.busy.emit(False)
            self.failed.emit(message)

    def _on_cancelled(self, ticket: int) -> None:
        if self._current(ticket):
            self._stop = None
            self.busy.emit(False)
            self.cancelled.emit()

    def _on_progress(self, ticket: int, fraction: float, text: str) -> None:
        if ticket == self._ticket:
            self.progress.emit(fraction, text)
