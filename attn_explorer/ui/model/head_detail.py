"""The Model dock's enlarged head: one head's heatmap with its tokens, colour bar and name.

A :class:`HeadDetail` is the plot under the grid: the selected head's (T, T) values
(rows = query i, columns = key j, query 1 at the top, as in a matrix), the tokens on
both axes, a slim colour bar with the scale's label and the head's name as its title.
It never reads the session: the dock hands it what to show
(:meth:`HeadDetail.show_head`) and holds it wide enough for its axes
(:meth:`HeadDetail.hold_width`).

A long text's head (8 192 tokens: a second of work) never stalls the window: the pass's
block preview of it shows at once, marked as such, while a background job (its own
:class:`~attn_explorer.ui.common.workers.LatestRunner`: the newest head wins) computes
the full-resolution head and replaces the picture when it arrives; the exact cells of a
zoomed view are computed in the background too. A short text's head is drawn at once.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer

from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.session import Head, ShownValues, head_name
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.token_axis import TEXT_RGB, TokenAxis
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.model.model_grid import HeatmapItem, color_map

#: The enlarged head's least size (pixels) before any tokens; long tokens widen it.
DETAIL_MIN_PX = (200, 180)
#: A long head zoomed to at most this many rows (and keys) is drawn cell by cell, its rows
#: recomputed on demand; the zoom settles for this many ms first.
ZOOM_ROWS, ZOOM_DEBOUNCE_MS = 1024, 80
#: Rows of a zoomed view computed between two stop checks.
ZOOM_CHUNK = 128
#: How long ``shutdown`` waits for a background job already under way (it stops at its
#: next check, within a chunk of rows).
SHUTDOWN_WAIT_S = 2.0
#: A long head's background job starts this long after its block preview is drawn, so the
#: preview (and a new result's grid) paint on an interpreter the job does not share.
START_DELAY_MS = 100
#: The title's note while the block preview shows, and its tooltip.
COMPUTING = "block preview — computing the full head…"
PREVIEW_TIP = (
    "The pass's block preview of this head: each pixel is the largest weight (or the raw "
    "score farthest from 0) of {block} × {block} tokens. The full head is being computed "
    "in the background; it replaces this picture when it is ready."
)


def zoom_cells(
    stack: HeadStack,
    head: Head,
    rows: tuple[int, int],
    keys: tuple[int, int],
    should_stop: Callable[[], bool],
) -> np.ndarray:
    """The exact cells (rows × keys) of one head of ``stack``, recomputed ZOOM_CHUNK rows at a
    time with a stop check between (``Cancelled``): a zoomed view's work, on a worker."""
    (layer, index), (i0, i1), (j0, j1) = head, rows, keys
    out = np.empty((i1 - i0, j1 - j0), dtype=stack.dtype)
    for r0 in range(i0, i1, ZOOM_CHUNK):
        if should_stop():
            raise Cancelled("zoom stopped")
        r1 = min(r0 + ZOOM_CHUNK, i1)
        out[r0 - i0 : r1 - i0] = stack.rows(layer, index, r0, r1)[:, j0:j1]  # (rows, keys)
    return out


class HeadDetail(pg.PlotWidget):
    """The enlarged head: ``image`` (its heatmap) and ``colorbar`` on token axes.

    ``on_click(head)`` and ``on_hover(head, cell)`` hear the heatmap as the grid's
    thumbnails do (``head`` None: this one). ``showing`` says what ``image`` holds:
    ``"values"`` (a short text's head), ``"preview"`` (a long text's block preview while
    its full head is computed) or ``"full"`` (that full head, arrived).
    """

    def __init__(
        self,
        on_click: Callable[[Head], None],
        on_hover: Callable[[Head | None, tuple[int, int] | None], None],
    ) -> None:
        left, bottom = TokenAxis("left"), TokenAxis("bottom")
        super().__init__(axisItems={"left": left, "bottom": bottom})
        self.setBackground("w")
        self.setMinimumSize(*DETAIL_MIN_PX)  # token axes and colour bar stay whole
        self._color_maps = {name: color_map(name) for name in ("sequential", "diverging")}
        plot = self.getPlotItem()
        plot.setMenuEnabled(False)
        plot.hideButtons()
        box = plot.getViewBox()
        box.invertY(True)  # query i = 1 at the top, as in a matrix
        box.setMouseEnabled(False, False)
        left.setLabel("query i")
        bottom.setLabel("key j")
        self.image = HeatmapItem(None, on_click, on_hover)
        plot.addItem(self.image)
        self.colorbar = pg.ColorBarItem(
            values=(0, 1),
            colorMap=self._color_maps["sequential"],
            interactive=False,
            colorMapMenu=False,
            width=14,  # a slim bar: the dock is narrow, and its numbers matter more
        )
        self.colorbar.setImageItem(self.image, insert_in=plot)
        self.colorbar.axis.setTextPen(TEXT_RGB)
        self.colorbar.axis.setPen(TEXT_RGB)
        self.zoomed = pg.ImageItem(axisOrder="row-major")  # exact cells over the blocks
        self.zoomed.setVisible(False)
        plot.addItem(self.zoomed)
        self.showing, self.title = "values", ""
        self._zoom_source: tuple[HeadStack, Head, ShownValues] | None = None
        self._zoom_timer = QTimer(self, singleShot=True, interval=ZOOM_DEBOUNCE_MS)
        self._zoom_timer.timeout.connect(self._zoom_in)
        self._start_timer = QTimer(self, singleShot=True, interval=START_DELAY_MS)
        self._start_timer.timeout.connect(self._start_pending)
        self._pending: Callable[[], None] | None = None  # the full head's job, not yet started
        box.sigRangeChanged.connect(lambda *_: self._zoom_timer.start())
        # Background work, newest first: the full head, and a zoomed view's exact cells.
        self.head_runner, self.zoom_runner = LatestRunner(self), LatestRunner(self)
        self._then: dict[int, Callable[[object], None]] = {}  # by runner: the newest job's use
        self._jobs_done: list[threading.Event] = []
        for runner in (self.head_runner, self.zoom_runner):
            runner.finished.connect(lambda answer, r=runner: self._then[id(r)](answer))
            runner.failed.connect(self._on_failed)

    # -- what the dock shows -------------------------------------------------------------

    def show_head(self, shown: ShownValues, layer: int, head: int) -> None:
        """Show (layer, head) of ``shown``: a short text's head at once; a long text's block
        preview at once and its full head when the background job brings it."""
        title = head_name(layer, head)
        preview = shown.preview(layer, head)
        if preview is None or not isinstance(shown.values, HeadStack):
            self.set_head(shown.head(layer, head), shown, title, (layer, head))
            return
        self.set_head(preview, shown, title, (layer, head))  # cancels the older jobs
        self.showing = "preview"
        block = -(-shown.values.shape[-1] // preview.shape[-1])
        self._set_title(f"{title} · {COMPUTING}")
        self.setToolTip(PREVIEW_TIP.format(block=block))

        def job(_: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            return shown.head(layer, head, should_stop)  # (n, n) blocks, or (T, T)

        self._pending = lambda: self._submit(
            self.head_runner, job, lambda full: self._full_arrived(full, shown, title)
        )
        self._start_timer.start()

    def _start_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending()

    def set_head(
        self, values: np.ndarray, shown: ShownValues, title: str, head: Head | None = None
    ) -> None:
        """Show one head's (T, T) ``values`` on ``shown``'s colour scale, named ``title``.

        ``values`` may be blocks of a longer head (``shown.values`` a HeadStack, each pixel
        a block): the image is stretched over T × T token units, the title says so, and
        the plot zooms (wheel, drag): a view of at most ZOOM_ROWS rows is drawn cell by
        cell from rows of ``head`` recomputed on demand, in the background. Any
        background job for the head shown before is stopped.
        """
        self.cancel()
        plot = self.getPlotItem()
        extent = shown.values.shape[-1]
        stack = shown.values if isinstance(shown.values, HeadStack) else None
        self._zoom_source = None
        if stack is not None and head is not None and values.shape[1] < extent:
            self._zoom_source = (stack, head, shown)
        self.zoomed.setVisible(False)
        plot.getViewBox().setMouseEnabled(
            self._zoom_source is not None, self._zoom_source is not None
        )
        self._draw(values, shown, title)
        self.showing = "values"
        self.setToolTip("")
        plot.getViewBox().setRange(xRange=(0, extent), yRange=(0, extent), padding=0)

    def _draw(self, values: np.ndarray, shown: ShownValues, title: str) -> None:
        """``values`` over T × T token units, on ``shown``'s scale; the view range is kept."""
        extent = shown.values.shape[-1]
        self.image.setImage(values, autoLevels=False)
        self.image.setRect(QRectF(0, 0, extent, extent))
        self.colorbar.setColorMap(self._color_maps[shown.colormap])
        self.colorbar.setLevels(shown.levels)
        self.colorbar.axis.setLabel(shown.label)
        if values.shape[1] < extent:
            block = -(-extent // values.shape[1])
            title = f"{title} · {block} × {block} tokens a pixel"
        self._set_title(title)

    def _set_title(self, title: str) -> None:
        self.title = title  # what the plot's title says (for the tests)
        self.getPlotItem().setTitle(title, color=TEXT_RGB)

    def _full_arrived(self, full: object, shown: ShownValues, title: str) -> None:
        """The full head replaces the preview; a zoom the user made meanwhile stays."""
        assert isinstance(full, np.ndarray)
        self._draw(full, shown, title)
        self.showing = "full"
        self.setToolTip("")

    # -- background work -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """True while the full head or a zoomed view is being computed."""
        waiting = self._pending is not None  # its job starts in START_DELAY_MS
        return waiting or self.head_runner.is_busy() or self.zoom_runner.is_busy()

    def _submit(
        self,
        runner: LatestRunner,
        job: Callable[[Callable[[float, str], None], Callable[[], bool]], object],
        then: Callable[[object], None],
    ) -> None:
        done = threading.Event()

        def run(progress: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            try:
                return job(progress, should_stop)
            finally:
                done.set()

        self._jobs_done = [event for event in self._jobs_done if not event.is_set()] + [done]
        self._then[id(runner)] = then  # the runner hands on only its newest job's answer
        runner.submit(run)

    def _on_failed(self, message: str) -> None:
        """A background job failed (say, memory): the picture stays, the title says why."""
        self._set_title(f"{self.title.split(' · ')[0]} · not computed: {message}")

    def cancel(self) -> None:
        """Stop the background jobs; their late answers are dropped."""
        self._zoom_timer.stop()
        self._start_timer.stop()
        self._pending = None
        self.head_runner.cancel(quiet=True)
        self.zoom_runner.cancel(quiet=True)

    def shutdown(self) -> None:
        """Stop the background jobs and wait (up to SHUTDOWN_WAIT_S) for them to return."""
        self.cancel()
        for done in self._jobs_done:
            done.wait(SHUTDOWN_WAIT_S)
        self._jobs_done = []

    def _zoom_in(self) -> None:
        """Draw the visible cells exactly when the view spans at most ZOOM_ROWS rows.

        The cells are recomputed in the background; they show when they arrive, unless
        the view moved (or another head came) meanwhile: the newest view wins.
        """
        if self._zoom_source is None:
            return
        stack, head, shown = self._zoom_source
        (x0, x1), (y0, y1) = self.getPlotItem().getViewBox().viewRange()
        t = stack.shape[-1]
        i0, i1 = max(0, int(y0)), min(t, int(np.ceil(y1)))
        j0, j1 = max(0, int(x0)), min(t, int(np.ceil(x1)))
        whole = i0 == 0 and j0 == 0 and i1 == j1 == t  # not zoomed: the image is all there is
        if whole or i1 - i0 > ZOOM_ROWS or j1 - j0 > ZOOM_ROWS or i1 <= i0 or j1 <= j0:
            self.zoom_runner.cancel(quiet=True)
            self.zoomed.setVisible(False)
            return

        def job(_: Callable[[float, str], None], should_stop: Callable[[], bool]) -> object:
            return zoom_cells(stack, head, (i0, i1), (j0, j1), should_stop)

        def draw(cells: object) -> None:
            self.zoomed.setImage(
                cells, levels=shown.levels, lut=lut(shown.colormap), autoLevels=False
            )
            self.zoomed.setRect(QRectF(j0, i0, j1 - j0, i1 - i0))
            self.zoomed.setVisible(True)

        self._submit(self.zoom_runner, job, draw)

    # -- the layout ----------------------------------------------------------------------

    def set_tokens(self, tokens: list[str]) -> None:
        """Write ``tokens`` on both axes (query i on the left, key j at the bottom)."""
        plot = self.getPlotItem()
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            if isinstance(axis, TokenAxis):
                axis.set_tokens(tokens)

    def hold_width(self) -> None:
        """Never narrower than the axes, image and colour bar need.

        A dock that cannot give that room is held wider instead of cutting off the
        colour bar.
        """
        needed = math.ceil(self.getPlotItem().layout.minimumWidth()) + 2
        self.setMinimumWidth(max(DETAIL_MIN_PX[0], needed))
