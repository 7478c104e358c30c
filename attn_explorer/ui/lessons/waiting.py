"""Waiting for the Model dock's answer in a local event loop (the lessons' model commands)."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QEventLoop, QTimer

#: How long a command waits for the model's answer before it says so.
WAIT_SECONDS = 120.0


def wait_until(ready: Callable[[], bool], seconds: float = WAIT_SECONDS) -> bool:
    """Run the event loop until ``ready()`` (polled every 20 ms) or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: loop.quit() if ready() or time.monotonic() > deadline else None)
    while not ready() and time.monotonic() <= deadline:
        timer.start()
        loop.exec()
        timer.stop()
    return ready()
