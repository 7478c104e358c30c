"""The stepper's read-out of the tiled strategy: one key block at a time, m, ℓ and O.

Shown while the strategy is "tiled". It steps :func:`attn_explorer.compute.tiled_trace`
on the selected head (the session's batch entry and head, its scale, causal mask and
block) and writes the query block's running max m, normaliser ℓ and accumulator O
before → after the key block, with the factor exp(m − m_new) the old sums shrank by.
A thin widget: the trace and its numbers come from compute; this only formats them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from attn_explorer.compute.tiled_trace import TiledTrace, tiled_trace
from attn_explorer.state import Session
from attn_explorer.state.events import Event
from attn_explorer.state.formatting import format_number

#: Rows of the query block written out (the rest are summarised as "… n more rows").
SHOWN_ROWS = 4
#: Largest head (T·d) the read-out traces: beyond it, it says so instead.
MAX_TRACED_ENTRIES = 4096 * 512


def _numbers(values: np.ndarray, width: int = 3) -> str:
    """A few numbers the way the tables show them: ``[0.5, -1, …]``."""
    shown = [format_number(float(v)) for v in values[:width]]
    return "[" + ", ".join(shown) + (", …" if len(values) > width else "") + "]"


def step_text(trace: TiledTrace, index: int) -> str:
    """The lines the read-out shows for step ``index``: where, then m, ℓ, O per row."""
    step = trace.step(index)
    lines = [f"step {index + 1} of {len(trace)} · {trace.describe(index)}"]
    lines.append("row   m (before → after)   rescale e^(m−m_new)   ℓ (before → after)   O row")
    for r in range(min(SHOWN_ROWS, step.i1 - step.i0)):
        lines.append(
            f"{step.i0 + r + 1:<5} {format_number(float(step.m_before[r]))} → "
            f"{format_number(float(step.m[r]))}   {format_number(float(step.rescale[r]))}   "
            f"{format_number(float(step.norm_before[r]))} → {format_number(float(step.norm[r]))}"
            f"   {_numbers(step.acc[r])}"
        )
    if step.i1 - step.i0 > SHOWN_ROWS:
        lines.append(f"… {step.i1 - step.i0 - SHOWN_ROWS} more rows in this query block")
    if step.output is not None:
        lines.append(
            f"output rows {step.i0 + 1}–{step.i1} = O / ℓ, e.g. {_numbers(step.output[0])}"
        )
    return "\n".join(lines)


class TiledReadout(QWidget):
    """Back / forward through the tiled strategy's key blocks on the selected head."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.trace: TiledTrace | None = None
        self.index = 0
        self.back_button = QPushButton("◀ key block")
        self.back_button.setToolTip("The tiled strategy one key block back")
        self.back_button.clicked.connect(lambda: self.show_step(self.index - 1))
        self.forward_button = QPushButton("key block ▶")
        self.forward_button.setToolTip(
            "The next key block: m, ℓ and O of the query block's rows before → after"
        )
        self.forward_button.clicked.connect(lambda: self.show_step(self.index + 1))
        for button in (self.back_button, self.forward_button):
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # arrows / Space stay the stepper's
        self.text = QLabel()
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(QLabel("Tiled (online softmax):"))
        buttons.addWidget(self.back_button)
        buttons.addWidget(self.forward_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.text)
        events = session.events
        watched = (events.options, events.shape, events.values)
        listening = tuple((event, self._on_changed) for event in watched)
        for event, callback in listening:
            event.connect(callback)
        # The session outlives the panel: when the read-out goes, it stops listening.
        self.destroyed.connect(functools.partial(_forget, listening))
        self.rebuild()

    def _on_changed(self, *_: object) -> None:
        self.rebuild()

    def rebuild(self) -> None:
        """A new trace of the selected head (shown only while the strategy is tiled)."""
        s = self.session
        self.setVisible(s.options.strategy == "tiled")
        if s.options.strategy != "tiled":
            self.trace = None
            return
        b, h = s.options.batch_index, s.options.head
        query, key, value = (s.matrix(name)[b, h] for name in ("query", "key", "value"))
        if query.size > MAX_TRACED_ENTRIES:
            self.trace = None
            self.text.setText("This head is too big to trace here.")
            return
        d = query.shape[-1]
        factor = 1.0 / float(np.sqrt(d)) if s.options.scale else 1.0
        self.trace = tiled_trace(
            query,
            key,
            value,
            factor,
            causal=s.options.causal,
            block=s.options.block,
            window=s.options.mask_window,
        )
        self.show_step(min(self.index, len(self.trace) - 1))

    def show_step(self, index: int) -> None:
        """Show step ``index`` of the trace (clamped to the steps there are)."""
        if self.trace is None:
            return
        self.index = max(0, min(index, len(self.trace) - 1))
        self.text.setText(step_text(self.trace, self.index))
        self.back_button.setEnabled(self.index > 0)
        self.forward_button.setEnabled(self.index < len(self.trace) - 1)


def _forget(listening: tuple[tuple[Event, Callable[..., object]], ...], *_: object) -> None:
    for event, callback in listening:
        event.disconnect(callback)
