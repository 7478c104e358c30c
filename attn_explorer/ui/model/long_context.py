"""The model pass's progress and its Stop button, for texts long enough to take a while.

A decoder at its full context (SmolLM2: 8 192 tokens) runs layer by layer for tens of
seconds in the model view's worker (``ui/common/workers.py``). :class:`PassProgress`
shows which layer it is on and a Stop button; it is hidden while nothing runs. Stop
tells the worker's job to stop after the layer under way (the decoder's
``should_stop`` check) and keeps the previous result on screen.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QWidget

from attn_explorer.ui.common.workers import LatestRunner

#: The progress bar's width in pixels: the options row also holds the strategy and a check box.
BAR_PX = 90


class PassProgress(QWidget):
    """``layer n of L`` as a bar, and Stop, while ``runner`` works; hidden otherwise."""

    def __init__(self, runner: LatestRunner, status: Callable[[str, str], None]) -> None:
        super().__init__()
        self._runner, self._status = runner, status
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setFixedWidth(BAR_PX)
        self.bar.setTextVisible(False)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip(
            "Stop this pass after the layer under way; keep the last result"
        )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.stop_button)
        self.setVisible(False)
        runner.progress.connect(self._on_progress)
        runner.busy.connect(self._on_busy)
        self.stop_button.clicked.connect(self.stop)

    def stop(self) -> None:
        """Stop the pass under way (its late answer is dropped); say so."""
        if self._runner.is_busy():
            self._runner.cancel(quiet=True)
            self._status("Stopped; the previous result stays.", "info")

    def _on_progress(self, fraction: float, text: str) -> None:
        self.setVisible(True)
        self.bar.setValue(round(1000 * fraction))
        self.bar.setToolTip(text)
        self._status(f"Computing… {text}", "info")

    def _on_busy(self, busy: bool) -> None:
        if not busy:
            self.setVisible(False)
            self.bar.setValue(0)
