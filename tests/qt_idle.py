"""``settle()``: wait, without a fixed sleep, until the GUI thread has caught up.

Test modules import it as ``from qt_idle import settle``: pytest puts ``tests/`` on
``sys.path`` when it loads ``tests/conftest.py``, before any test module.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractEventDispatcher, QEventLoop

#: Event-loop turns allowed before the loop is called busy (a turn takes microseconds).
MAX_TURNS = 10_000


def settle() -> None:
    """Return once an event-loop turn finds nothing to do.

    What a test waits for after an action — a layout pass, a queued editor commit, the
    queued signal of a worker that has returned, a zero-delay timer — is a posted event or
    a due timer: each turn delivers those, and what they post comes the next turn. Work
    still running in a thread, or a timer not yet due, is not waited for: wait for its
    result by name (``qtbot.waitUntil``, ``qtbot.waitSignal``).
    """
    dispatcher = QAbstractEventDispatcher.instance()
    assert dispatcher is not None, "no Qt event loop (create the QApplication first)"
    for _ in range(MAX_TURNS):
        if not dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents):
            return
    raise AssertionError(f"the GUI thread was still busy after {MAX_TURNS} event-loop turns")
