"""Deleting pyqtgraph items taken off their scene, safely.

Letting the last Python reference to a removed plot go deleted its C++ tree from inside
Python's deallocation, after the wrappers of some of its parts were freed: PySide then
crashed with signal 11 in ``Shiboken::BindingManager::releaseWrapper`` (gdb caught it
under the suite, from ``self.plots = []`` after ``view.clear()`` in the heatmaps; about
one full run in two crashed there). :func:`retire` deletes each tree once the event
under way is done, every wrapper still held, and lets the wrappers go after.
"""

from __future__ import annotations

from collections.abc import Iterable

import shiboken6
from PySide6.QtCore import QObject, QTimer


def retire(items: Iterable[QObject]) -> None:
    """Delete ``items`` (graphics items already removed from their scene) soon, by Qt,
    while their Python wrappers are kept; then let the wrappers go."""
    kept = list(items)

    def delete() -> None:
        for item in kept:
            if shiboken6.isValid(item):  # a part of a tree deleted before it is gone already
                shiboken6.delete(item)
        kept.clear()

    QTimer.singleShot(0, delete)
