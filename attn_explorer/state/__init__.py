"""Qt-free session state: the single source of truth for tokens, Q/K/V and options."""

from attn_explorer.state.events import Event, SessionEvents
from attn_explorer.state.formatting import format_number
from attn_explorer.state.presets import PRESETS, preset
from attn_explorer.state.session import Session
from attn_explorer.state.types import (
    MATRICES,
    Options,
    Preset,
    Snapshot,
    parse_number,
)

__all__ = [
    "MATRICES",
    "PRESETS",
    "Event",
    "Options",
    "Preset",
    "Session",
    "SessionEvents",
    "Snapshot",
    "format_number",
    "parse_number",
    "preset",
]
