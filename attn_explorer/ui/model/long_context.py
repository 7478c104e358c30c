"""The model pass's progress, its Stop button and its previews, for texts that take a while.

A decoder at its full context (SmolLM2: 8 192 tokens) runs layer by layer for tens of
seconds in the model view's worker (``ui/common/workers.py``). :class:`PassProgress`
shows which layer it is on and a Stop button; it is hidden while nothing runs. Stop
tells the worker's job to stop after the layer under way (the decoder's
``should_stop`` check) and keeps the previous result on screen.

:class:`PassPreviews` fills the layers × heads grid with each finished layer's block
previews while the pass still runs (the layer under way marked "computing", the later
ones blank), at most a few redraws a second. The worker hands the pass's
:class:`~attn_explorer.models.decoder.long_stats.LongStats` over once, as it starts (a
:class:`~attn_explorer.models.session.PassWatch`); the GUI then reads only the layers
the pass's progress signal has reported done, which the worker never writes again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QStackedWidget, QWidget

from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.requests import AttentionRequest
from attn_explorer.models.session import ModelSession, PassWatch, layer_previews
from attn_explorer.state.colormaps import lut, range_from_extremes
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.model_grid import ThumbnailGrid

#: The progress bar's width in pixels: the options row also holds the strategy and a check box.
BAR_PX = 90
#: Least time between two redraws of the grid while a long pass runs.
MIN_REDRAW_MS = 250
#: A redraw holds the pass (LongStats.hold) and waits, with the event loop running, until
#: its cores have parked, at most this long; then it draws and paints, and lets them go.
PARK_WAIT_MS, PARK_POLL_MS, RELEASE_MS = 120, 5, 30


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
        self.bar.setUpdatesEnabled(False)  # setValue repaints at once (70 ms): later instead
        self.bar.setValue(round(1000 * fraction))
        self.bar.setUpdatesEnabled(True)
        self.bar.update()
        self.bar.setToolTip(text)
        self.setVisible(True)
        self._status(f"Computing… {text}", "info")

    def _on_busy(self, busy: bool) -> None:
        if not busy:
            self.setVisible(False)
            self.bar.setValue(0)


class PassPreviews(QObject):
    """The grid shows a long pass's finished layers while the rest still run.

    :meth:`submit` runs a request in ``runner``; on a long pass's first progress the
    grid takes the pass's shape and its page (page 1 of ``pages``) comes to the front,
    then each progress draws the layers finished since the last redraw (at most one
    redraw every MIN_REDRAW_MS). The dock calls :meth:`end` when the result arrives;
    when the pass ends without one (Stop, a failure) ``restore`` asks the dock to put
    the previous result back (without one, the start page returns). :attr:`active`:
    the grid shows a pass.
    """

    restore = Signal()

    def __init__(
        self,
        runner: LatestRunner,
        grid: ThumbnailGrid,
        session: ModelSession,
        pages: QStackedWidget,
    ) -> None:
        super().__init__(runner)
        self._runner, self._grid, self._session, self._pages = runner, grid, session, pages
        self._watch: PassWatch | None = None
        self._stats: LongStats | None = None  # the pass the grid shows (None: none)
        self._done = self._drawn = 0  # layers finished / drawn
        self._extremes = (math.inf, -math.inf)  # raw scores' over the layers drawn
        self._last = -math.inf  # time.monotonic() of the last redraw
        # (pass, levels, colour map) when the grid shows every layer of a pass: its result
        # needs no redraw (270 thumbnails recoloured: half a second on the GUI thread).
        self._whole: tuple[LongStats, tuple[float, float], str] | None = None
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self._draw)
        self._parking = QTimer(self, interval=PARK_POLL_MS)
        self._parking.timeout.connect(self._poll_parked)
        self._park_start = 0.0
        self._drawn_from = 0  # the first layer the last draw set
        self._held: list[LongStats] = []  # passes held by a draw, released RELEASE_MS later
        self.redraws = 0  # how many times the grid was redrawn (for tests and the benchmark)
        runner.progress.connect(self._on_progress)
        runner.busy.connect(self._on_busy)

    @property
    def active(self) -> bool:
        """True while the grid shows a long pass's layers instead of the result."""
        return self._stats is not None

    @property
    def layers_drawn(self) -> int:
        """How many of the pass's layers the grid shows."""
        return self._drawn if self.active else 0

    def submit(self, request: AttentionRequest) -> threading.Event:
        """Run ``request`` in the runner (newest wins), watching the long pass it may make.

        Returns an event set when the job has returned (whatever its outcome).
        """
        session, done, watch = self._session, threading.Event(), PassWatch(paced=True)

        def job(progress: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            try:
                return session.run(request, should_stop, progress, watch)
            finally:
                done.set()

        self._watch, self._whole = watch, None
        self._runner.submit(job)
        return done

    def shows(self, stats: LongStats | None, levels: tuple[float, float], colormap: str) -> bool:
        """True, once, when the grid already shows every layer of ``stats``'s previews on
        this colour scale: the dock need not draw its result's grid again."""
        whole, self._whole = self._whole, None
        return whole is not None and whole[0] is stats and whole[1:] == (levels, colormap)

    def end(self) -> None:
        """The result has arrived (the dock draws it): stop drawing the pass."""
        self._timer.stop()
        self._parking.stop()
        if self._stats is not None:
            if self._drawn < self._done:  # layers finished since the last redraw: drawn now,
                self._draw_layers(self._stats)  # so the result's grid needs no redraw of 270
            self._stats.release()
        self._stats, self._watch = None, None
        self._grid.set_pending(None)

    def redraw(self) -> bool:
        """Draw the pass's finished layers again (the colours changed); False when no pass
        is shown."""
        if not self.active:
            return False
        self._drawn, self._extremes, self._whole = 0, (math.inf, -math.inf), None
        self._parking.stop()
        assert self._stats is not None
        self._draw_now(self._stats)  # at once: the colours changed under the user's hand
        return True

    def _on_progress(self, fraction: float, _: str) -> None:
        watch = self._watch
        if watch is None or watch.stats is None:
            return  # not a long pass (or not this job's)
        stats = watch.stats
        if stats is not self._stats:  # the pass's first layer: its grid, blank
            self._stats = stats
            if self._grid.shape != (stats.layers, stats.heads):
                self._grid.build(stats.layers, stats.heads)
            # the result's bands and layer kinds now: their arrival re-laid out the grid and
            # repainted all 270 thumbnails in the result's event-loop turn
            self._grid.set_groups(stats.kv_heads)
            self._grid.set_layer_kinds(stats.layer_kinds, stats.window)
            self._pages.setCurrentIndex(1)
            self._drawn, self._extremes = 0, (math.inf, -math.inf)
            self._last = -math.inf  # its first layer drawn at once, while the pass rests
            # the grid is blanked by the first draw, once the pass is held: blanking 270
            # thumbnails now would paint them while two cores contend for the GIL (124 ms)
        self._done = watch.layers_done(fraction)
        wait = MIN_REDRAW_MS / 1e3 - (time.monotonic() - self._last)
        if wait <= 0:  # now, while the pass rests at the layer's end (LongStats.rest)
            self._draw()
            return
        if not self._timer.isActive():
            self._timer.start(math.ceil(wait * 1e3))
        if not self._parking.isActive() and not self._holds(stats):
            stats.release()  # drawn later, by the timer: the pass need not rest for it

    def _draw(self) -> None:
        """Hold the pass, then draw once its cores have parked (or PARK_WAIT_MS passed).

        Two cores running the pass's Python made every step of a redraw wait for the GIL: a
        draw and paint of ~15 ms took 50–130 ms, all in one event-loop turn.
        """
        stats = self._stats
        if stats is None or self._parking.isActive():
            return
        stats.hold()
        self._park_start = time.monotonic()
        self._parking.start()

    def _poll_parked(self) -> None:
        stats = self._stats
        if stats is None:
            self._parking.stop()
            return
        waited = (time.monotonic() - self._park_start) * 1e3
        if not stats.quiet and waited < PARK_WAIT_MS:
            return  # the event loop runs meanwhile: no stall
        self._parking.stop()
        self._draw_now(stats)

    def _draw_now(self, stats: LongStats) -> None:
        stats.hold()  # (again, for a redraw that did not wait)
        try:
            first = self._drawn
            self._draw_layers(stats)  # (may draw every layer again: a wider scale)
            # painted now, on an interpreter the cores leave alone: the new rows only, or all
            # when the pass's first draw blanked the later rows
            changed = range(self._drawn_from, self._drawn) if first else None
            self._grid.repaint_now(changed)
        finally:  # held a little longer: the scene's own update of those rows paints next
            self._held.append(stats)
            QTimer.singleShot(RELEASE_MS, self, self._release_one)

    def _release_one(self) -> None:
        # A method of this QObject, not ``stats.release``: Qt does not keep the object of a
        # plain Python bound method alive, and a timer that outlived its pass called a freed
        # one (AttributeError on a str, then signal 11).
        if self._held:
            stats = self._held.pop(0)
            if not self._holds(stats):  # no later draw still holds it
                stats.release()

    def _holds(self, stats: LongStats) -> bool:
        """True while a draw holds ``stats`` (compared by identity: LongStats holds arrays)."""
        return any(held is stats for held in self._held)

    def _draw_layers(self, stats: LongStats) -> None:
        scores = self._session.show_scores
        new = [layer_previews(stats, layer, scores) for layer in range(self._drawn, self._done)]
        if scores:
            low, high = self._extremes
            for values in new:
                finite = values[np.isfinite(values)]
                if finite.size:
                    low, high = min(low, float(finite.min())), max(high, float(finite.max()))
            if (low, high) != self._extremes and self._drawn:  # a wider scale: all again
                self._extremes, self._drawn = (low, high), 0
                new = [layer_previews(stats, layer, True) for layer in range(self._done)]
            self._extremes = (low, high)
            colormap, levels = "diverging", range_from_extremes(low, high, diverging=True)
        else:
            colormap, levels = "sequential", (0.0, 1.0)
        table = lut(colormap)
        self._drawn_from = self._drawn
        for layer, values in enumerate(new, start=self._drawn):
            self._grid.set_layer(layer, values, levels, table, stats.tokens)
        self._drawn = self._done
        self._grid.set_pending(self._done if self._done < stats.layers else None)
        self._whole = (stats, levels, colormap) if self._done == stats.layers else None
        self._last = time.monotonic()
        self.redraws += 1

    def _on_busy(self, busy: bool) -> None:
        if not busy:  # a result follows at once (and calls end), or none: then restore
            QTimer.singleShot(0, self, self._settle)

    def _settle(self) -> None:
        if self.active and not self._runner.is_busy():
            self.end()
            if self._session.result is None:
                self._pages.setCurrentIndex(0)  # the start page: nothing was computed yet
            else:
                self.restore.emit()
