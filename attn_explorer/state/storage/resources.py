"""Find shipped resources (icons, example sessions) wherever the app runs from."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable


def resource(*parts: str) -> Traversable:
    """A file or folder under the top-level ``resources/`` folder, e.g. ``resource("icons")``."""
    node = resources.files("attn_explorer.resources")
    for part in parts:
        node = node / part
    return node
