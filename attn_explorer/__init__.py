"""Attention Explorer: make multi-head attention visible.

Only the version lives here so that ``import attn_explorer`` stays instant; the Python
API (``attn_explorer.view``, ``attn_explorer.run``, ``attn_explorer.Viewer``, see
docs/guide/python-api.md) is imported on first use.
"""

TYPE_CHECKING = False  # not typing's: importing typing costs ~15 ms of the start-up
if TYPE_CHECKING:
    from typing import Any

    from attn_explorer.api import Viewer, run, view  # noqa: F401  (for type checkers)

__version__ = "0.1.0"

#: Names loaded from attn_explorer.api when first asked for (numpy and Qt come with it).
_API = ("Viewer", "run", "view")

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> "Any":  # a string: no __future__ import (0.4 ms)
    if name in _API:
        from attn_explorer import api

        return getattr(api, name)
    raise AttributeError(f"module 'attn_explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
