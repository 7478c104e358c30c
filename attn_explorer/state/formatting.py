"""How numbers and durations read in every panel (one definition each, Qt-free)."""

from __future__ import annotations


def format_seconds(seconds: float) -> str:
    """A duration with three significant digits: ``12.3 µs``, ``4.56 ms`` or ``1.23 s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
