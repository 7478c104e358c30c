"""One job: hand the same big work arrays to attention() again while nobody else holds them.

The app recomputes the same shape on every edit. A fresh (H, T, T) float32 array
at T = 2048 is 256 MB that the kernel must map and zero page by page before the
matmul can write it (measured here: 17 ms to allocate and fill, 8 ms to fill an
array already mapped). A :class:`Workspace` keeps the arrays of the last call's
shape and hands them out again, but only once nothing outside it refers to them:
not a result, not a view of one, not a widget's reference. Whoever still shows an
older result keeps it intact; the next call then gets fresh arrays.

It keeps at most ``sets`` sets (the shown result and the one being computed), of
one shape only: a call of another shape forgets them (arrays still in use live on
with their users). A set bigger than ``max_bytes`` is never kept, so a huge session
does not hold a spare copy of its result while idle. ``clear()`` forgets them at once.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

Shapes = tuple[tuple[int, ...], ...]


def _refcounts(arrays: tuple[np.ndarray, ...]) -> list[int]:
    return [sys.getrefcount(array) for array in arrays]


def _baseline() -> int:
    """The reference count an array has when only a workspace's set holds it."""
    arrays = (np.empty(1),)
    kept = [arrays]
    del arrays  # now only ``kept`` holds the set, as Workspace._sets does
    return max(_refcounts(kept[0]))


_BASELINE = _baseline()


class Workspace:
    """Reusable work arrays for repeated attention() calls of one shape (see module docstring)."""

    def __init__(self, sets: int = 2, max_bytes: int | None = None) -> None:
        if sets < 1:
            raise ValueError(f"sets: expected at least 1, got {sets}.")
        self.sets = sets
        self.max_bytes = max_bytes
        self._key: tuple[Shapes, str] | None = None
        self._sets: list[tuple[np.ndarray, ...]] = []
        self._lock = threading.Lock()
        #: How many calls got arrays back from the workspace (for tests and benchmarks).
        self.reused = 0

    def take(self, shapes: Shapes, dtype: np.dtype | type) -> list[np.ndarray]:
        """Arrays of ``shapes`` and ``dtype`` (uninitialised): a kept set nobody uses, or new.

        The list is new: holding it (or any of its arrays, or a view) marks the set as
        in use, so no other call, in any thread, gets it until every reference is gone.
        """
        key = (tuple(tuple(int(n) for n in shape) for shape in shapes), np.dtype(dtype).str)
        size = (
            sum(int(np.prod(shape, dtype=np.int64)) for shape in key[0]) * np.dtype(dtype).itemsize
        )
        if self.max_bytes is not None and size > self.max_bytes:
            return [np.empty(shape, dtype=dtype) for shape in key[0]]  # too big to keep a spare
        with self._lock:
            if key != self._key:
                self._key, self._sets = key, []
            for arrays in self._sets:
                if max(_refcounts(arrays)) <= _BASELINE:  # nobody else refers to them
                    self.reused += 1
                    return list(arrays)  # a new list: its references mark the set in use
            arrays = tuple(np.empty(shape, dtype=dtype) for shape in key[0])
            if len(self._sets) < self.sets:
                self._sets.append(arrays)
            return list(arrays)

    def clear(self) -> None:
        """Forget every kept array (arrays in use stay valid for their users)."""
        with self._lock:
            self._key, self._sets = None, []

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays the workspace keeps."""
        with self._lock:
            return sum(array.nbytes for arrays in self._sets for array in arrays)
