"""One call at a time per model: what keeps calls from several threads fast and correct.

Four threads calling ``generate`` on one SmolLM2 model at once took 10 s against 2.2 s
for the same calls in turn (issue 36; measured here 19.0 s against 3.2 s at load 2.3).
The time goes to numpy's BLAS: OpenBLAS runs each matmul on a pool of one thread per
core whose threads spin while they wait for each other, and a decode step's matmuls are
small. Four callers each handing every core to that pool at once, on two cores, mostly
wait for a descheduled pool thread (with ``OPENBLAS_NUM_THREADS=1`` the same four threads
took 3.0 s). A model also keeps state every call shares: the RoPE tables grown by doubling,
the layers dequantized on first use and counted against a memory budget (two threads
dequantizing one layer at once counted it twice, so later layers could be streamed
again on every call), the BLAS limit of a long pass (``threadpool_limits`` is
process-wide: one thread's exit restores what another had set) and the free-memory
check a long pass makes before it allocates, which holds only if no other pass of the
model allocates meanwhile.

Serializing the calls on one model fixes all of these at once: a call runs with every
core, as in turn, and calls from several threads cost what the same calls in sequence
cost (``bench/threads.py``: 0.98× for SmolLM2, 4 threads × 20 tokens). Limiting BLAS to
one thread inside a call instead measured 1.65× the sequential calls on an idle
two-core machine (one core per matmul is slower than two there), changes process-wide
state from several threads, and leaves the shared caches and the memory check racing.

What serializing does not fix: on cores busy with other programs, OpenBLAS's spinning pool
makes every call slow, in turn or not (at load 8–10 here: 85 s in turn, 83 s from four
threads, 147 s unserialized, 19 s unserialized on one BLAS thread). How many BLAS threads
one call should use on a loaded machine is a separate question from the threads' ratio.

:func:`one_call_at_a_time` wraps a model's public methods. The lock is re-entrant
(``generate`` calls ``forward``), and a caller waiting for it still hears its
``should_stop``: a stop request while queued raises ``Cancelled`` without waiting for
the other thread's call to end.

It sits in ``formats``, the floor both model families (``decoder``, ``encoder``) already
stand on, so neither family imports the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from attn_explorer.compute import Cancelled

#: How often a queued call checks its ``should_stop`` (seconds).
POLL_SECONDS = 0.05


class HasCallLock(Protocol):
    """A model whose calls are serialized: it owns ``call_lock`` (a ``threading.RLock``)."""

    @property
    def call_lock(self) -> threading.RLock: ...


Model = TypeVar("Model", bound=HasCallLock)
Params = ParamSpec("Params")
Result = TypeVar("Result")

_MAKING = threading.Lock()  # two threads asking a new model for its lock get the same one


class OneCallAtATime:
    """Base of a model whose methods marked :func:`one_call_at_a_time` run one at a time."""

    @property
    def call_lock(self) -> threading.RLock:
        """This model's lock: re-entrant (``generate`` calls ``forward``), made on first use."""
        lock: threading.RLock | None = self.__dict__.get("_call_lock")
        if lock is None:
            with _MAKING:
                lock = self.__dict__.setdefault("_call_lock", threading.RLock())
        return lock


def one_call_at_a_time(
    method: Callable[Concatenate[Model, Params], Result],
) -> Callable[Concatenate[Model, Params], Result]:
    """Run ``method`` holding its model's ``call_lock`` (the model is the first argument).

    While it waits for the lock a call given ``should_stop=`` by keyword (as the workers
    give it) checks it every :data:`POLL_SECONDS` and raises ``Cancelled`` when it is true.
    """

    @wraps(method)
    def serialized(model: Model, /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        lock = model.call_lock
        should_stop = kwargs.get("should_stop")
        if not callable(should_stop):
            with lock:
                return method(model, *args, **kwargs)
        while not lock.acquire(timeout=POLL_SECONDS):
            if should_stop():
                raise Cancelled("stopped while another call on this model ran")
        try:
            return method(model, *args, **kwargs)
        finally:
            lock.release()

    return serialized
