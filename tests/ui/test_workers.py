"""LatestRunner: only the newest job counts, and a superseded job never starts."""

from __future__ import annotations

import threading
import time

from qt_idle import settle

from attn_explorer.ui.common.workers import LatestRunner


def test_jobs_superseded_before_a_thread_is_free_never_start(qtbot):
    """Eight quick submits on a two-thread pool: the newest answers after one job, not eight."""
    runner = LatestRunner()
    started: list[int] = []
    lock = threading.Lock()
    got: list[int] = []
    runner.finished.connect(got.append)

    def job_for(n):
        def job(progress, should_stop):
            with lock:
                started.append(n)
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline and not should_stop():
                time.sleep(0.005)
            return n

        return job

    for n in range(8):
        runner.submit(job_for(n))
    qtbot.waitUntil(lambda: got == [7], timeout=5000)
    assert started[-1] == 7 and len(started) <= 3, started  # at most the two threads' + the newest


def test_a_quiet_cancel_drops_the_result_and_clears_busy(qtbot):
    runner = LatestRunner()
    release = threading.Event()
    got: list[object] = []
    busy: list[bool] = []
    runner.finished.connect(got.append)
    runner.busy.connect(busy.append)
    runner.submit(lambda p, s: release.wait(5) and "old")
    runner.cancel(quiet=True)
    assert busy == [True, False] and not runner.is_busy()
    release.set()
    LatestRunner.pool().wait_for_done(5000)
    settle()  # the job's queued answer is delivered (and dropped)
    assert got == []
