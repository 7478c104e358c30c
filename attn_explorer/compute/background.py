"""Run a long measurement in a separate, lower-priority process (no Qt here).

Timing runs the loop strategy, which is pure Python: in a thread it holds the GIL
and, with numpy's BLAS threads, competes with the GUI thread for the CPU. In a
child process at a lower priority (``nice``) it can do neither: the window stays
responsive on a 2-core machine (bench/gui.py: stalls from ~250 ms to ~40 ms).

:func:`in_process` turns a function plus keyword arguments into a job
``job(progress, should_stop)`` for ``ui.workers.LatestRunner``: progress messages
come back over a pipe, and a stop request terminates the child.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from attn_explorer.compute.timing import Cancelled

#: Niceness added to the child: the GUI process always wins the CPU.
CHILD_NICENESS = 10


def _child(conn: Any, function: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """The child process: lower its priority, run ``function(**kwargs, progress=...)``."""
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(CHILD_NICENESS)
    try:
        result = function(**kwargs, progress=lambda f, m: conn.send(("progress", f, m)))
    except Exception as exc:  # reported to the parent, shown in the UI
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    else:
        conn.send(("done", result))
    finally:
        conn.close()


def in_process(function: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """A worker job that runs ``function(**kwargs)`` in a child process.

    ``function`` must be defined at a module's top level (the child imports it by
    name), accept a ``progress(fraction, message)`` keyword, and take and return
    picklable values (numpy arrays and dicts are).
    """

    def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]) -> Any:
        context = multiprocessing.get_context("spawn")  # no fork of a process with Qt threads
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(send, function, kwargs), daemon=True)
        process.start()
        send.close()
        try:
            while True:
                if should_stop():
                    raise Cancelled(f"{function.__name__} cancelled")
                if receive.poll(0.05):
                    try:
                        kind, *payload = receive.recv()
                    except EOFError:
                        raise RuntimeError("the measuring process ended without a result") from None
                    if kind == "progress":
                        progress(*payload)
                    elif kind == "error":
                        raise RuntimeError(payload[0])
                    else:
                        return payload[0]
                elif not process.is_alive() and not receive.poll():
                    raise RuntimeError(
                        f"the measuring process stopped unexpectedly (exit code {process.exitcode})"
                    )
        finally:
            receive.close()
            if process.is_alive():
                process.terminate()
            process.join(2)

    return job
