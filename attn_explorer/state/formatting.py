"""How numbers and durations read in every panel (one definition each, Qt-free).

Reading what the user types is :func:`attn_explorer.state.types.parse_number`.
"""

from __future__ import annotations


def format_number(value: float) -> str:
    """The shortest text that parses back to exactly ``value`` (``1`` rather than ``1.0``)."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def display_number(value: float) -> str:
    """Compact text for a cell: up to 6 significant digits (the editor shows full precision)."""
    text = f"{value:.6g}"
    return "0" if text == "-0" else text


def format_seconds(seconds: float) -> str:
    """A duration with three significant digits: ``12.3 µs``, ``4.56 ms`` or ``1.23 s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
