"""The main window's views that are built late: pyqtgraph loads slowly, and most docks wait.

At the app's start the window paints a picture of the heatmaps first
(:class:`~attn_explorer.ui.explorer.heatmap_preview.HeatmapPreview`); :class:`DeferredViews`
puts the interactive heatmaps in its place just after that first paint, the timing charts
when their dock first comes to the front, and the model and vectors views when first
opened. Each ``build_*`` / ``*_view`` method makes its view once and returns it; the
``built`` signal tells the command layer, which wires the view's gestures to commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QSplitter

from attn_explorer.state.app_state import AppState
from attn_explorer.ui.explorer.heatmap_preview import HeatmapPreview
from attn_explorer.ui.window.docks import HEATMAPS_MIN, Docks, show_dock

if TYPE_CHECKING:
    from PySide6.QtWidgets import QDockWidget

    from attn_explorer.ui.explorer.heatmaps import HeatmapGrid
    from attn_explorer.ui.model.model_view import ModelView
    from attn_explorer.ui.timing.timing_panel import TimingPanel
    from attn_explorer.ui.vectors.vectors_view import VectorsView

#: Where the code panel's column and the heatmaps' start: room for the code's longest line.
COLUMN_SIZES = [480, 600]


class FirstPaint(QObject):
    """Calls ``callback`` once, soon after the watched window first paints."""

    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__()
        self.callback = callback
        self.done = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and not self.done:
            self.done = True
            watched.removeEventFilter(self)
            # after this frame is painted and shown; never once the window is gone
            QTimer.singleShot(0, watched, self.callback)
        return False


class DeferredViews(QObject):
    """The late views of one window (see the module docstring).

    ``placeholder``, the heatmap preview, is ``splitter``'s second widget until
    :meth:`build_plots` puts the interactive heatmaps there.
    ``built(name, view)`` is emitted once per view: "heatmaps" or "model".
    """

    built = Signal(str, object)

    def __init__(
        self, state: AppState, splitter: QSplitter, placeholder: HeatmapPreview, docks: Docks
    ) -> None:
        super().__init__(splitter)
        self.state = state
        self.splitter = splitter
        self.docks = docks
        self.heatmaps: HeatmapGrid | None = None
        self.timing_panel: TimingPanel | None = None
        self.model_view: ModelView | None = None
        self.model_dock: QDockWidget | None = None
        self.vectors_view: VectorsView | None = None
        self.vectors_dock: QDockWidget | None = None
        self.placeholder: HeatmapPreview | None = placeholder
        self._timing_in_front = False  # isVisible() stays True behind another dock's tab
        docks.timing.visibilityChanged.connect(self._on_timing_dock_shown)

    def after_first_paint(self, window: QObject) -> None:
        """Build the heatmaps just after ``window`` first paints (the app's start)."""
        self._first_paint = FirstPaint(self.build_plots)
        window.installEventFilter(self._first_paint)

    def build_plots(self) -> None:
        """Create the interactive (pyqtgraph) heatmaps in the preview's place, and the timing
        charts if their dock is in front; they draw the current result."""
        if self.heatmaps is not None:
            return
        from attn_explorer.ui.explorer.heatmaps import HeatmapGrid

        state = self.state
        self.heatmaps = HeatmapGrid(
            state.session, state.results, state.stepper, document=state.document
        )
        self.heatmaps.setObjectName("heatmaps")
        self.heatmaps.setMinimumHeight(HEATMAPS_MIN[1])  # the width: see MainWindow
        sizes = self.splitter.sizes()
        self.splitter.replaceWidget(1, self.heatmaps)
        # Shown: keep the columns where the first paint put them; else room for the code.
        self.splitter.setSizes(sizes if self.splitter.isVisible() else COLUMN_SIZES)
        if self.placeholder is not None:
            self.placeholder.detach()
            self.placeholder.deleteLater()
            self.placeholder = None
        self.built.emit("heatmaps", self.heatmaps)
        if self._timing_in_front:
            self.build_timing()

    def _on_timing_dock_shown(self, visible: bool) -> None:
        self._timing_in_front = visible
        if visible and self.heatmaps is not None:  # else build_plots, after the first paint
            self.build_timing()

    def build_timing(self) -> TimingPanel:
        """The timing charts (pyqtgraph), created when their dock first comes to the front."""
        if self.timing_panel is None:
            from attn_explorer.ui.timing.timing_panel import TimingPanel

            self.timing_panel = TimingPanel(self.state.session)
            self.timing_panel.setObjectName("timing")
            self.docks.timing.setWidget(self.timing_panel)
        return self.timing_panel

    def model(self) -> ModelView:
        """The Model dock's view (real BERT-family attention), created on first use."""
        if self.model_view is None or self.model_dock is None:
            from attn_explorer.ui.model.model_choice import restore_dock_width
            from attn_explorer.ui.model.model_view import ModelView

            self.model_view = ModelView()
            self.built.emit("model", self.model_view)
            self.model_dock = self.docks.add_side("Model", self.model_view, "model-dock", 45)
            restore_dock_width(self.docks.window, self.model_dock)  # as wide as last time
            show_dock(self.model_dock)
            self.docks.leave_heatmaps_room(self.model_dock, self.splitter)
        show_dock(self.model_dock)
        return self.model_view

    def vectors(self) -> VectorsView:
        """The Vectors dock's view (queries and keys as arrows), created on first use."""
        if self.vectors_view is None or self.vectors_dock is None:
            from attn_explorer.ui.vectors.vectors_view import VectorsView

            self.vectors_view = VectorsView(self.state.vectors)
            self.vectors_view.setObjectName("vectors")
            self.vectors_dock = self.docks.add_side(
                "Vectors", self.vectors_view, "vectors-dock", None
            )
            show_dock(self.vectors_dock)
            self.docks.leave_heatmaps_room(self.vectors_dock, self.splitter)
        show_dock(self.vectors_dock)
        return self.vectors_view

    def reveal(self, name: str) -> None:
        """Make the control a lesson points at exist and be in front (before a highlight)."""
        if name == "heatmaps":
            self.build_plots()  # a lesson may point at them before the deferred build
        if name == "timing":
            self.build_timing()
        if name in ("timing", "stepper"):
            show_dock(self.docks.timing if name == "timing" else self.docks.stepper)
        if name.startswith("model_"):  # the batch, head and token axes of a real model
            self.model()

    def shutdown(self) -> None:
        """Stop the late views' timers and jobs (the window is going away)."""
        if self.placeholder is not None:
            self.placeholder.detach()  # closed before the grid replaced it
            self.placeholder = None
        if self.timing_panel is not None:
            self.timing_panel.runner.cancel(quiet=True)
        if self.model_view is not None:
            self.model_view.shutdown()
        if self.vectors_view is not None:
            self.vectors_view.shutdown()
