"""Waiting for the Model dock's answer in a local event loop (the lessons' model commands)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEventLoop, QTimer

#: How often a waiting command looks at the dock (not a limit: it waits as long as it takes).
POLL_MS = 20


def wait_for(ready: Callable[[], bool], over: Callable[[], bool]) -> bool:
    """Run the event loop until ``ready()``, or until ``over()`` says the work waited for has
    ended without it; True if ready. Both are looked at every POLL_MS; there is no deadline."""
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(POLL_MS)
    timer.timeout.connect(lambda: loop.quit() if ready() or over() else None)
    while not (ready() or over()):
        timer.start()
        loop.exec()
        timer.stop()
    return ready()
