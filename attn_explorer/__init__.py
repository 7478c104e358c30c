"""Attention Explorer: make multi-head attention visible.

Only the version lives here so that ``import attn_explorer`` stays instant.
"""

__version__ = "0.1.0"
