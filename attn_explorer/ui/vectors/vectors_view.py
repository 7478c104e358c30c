"""The Vectors dock: queries and keys as arrows from the origin, draggable when d ≤ 2.

A thin view over :class:`~attn_explorer.state.views.vectors.VectorsState`: it draws
the current head's queries (blue, solid, round tips) and keys (orange, dashed,
square tips) in the state's plane, highlights the selected q_i and k_j with the
projection of k_j onto q_i, and writes the dot product out both ways. Dragging a
tip previews the arrow at once and writes the session at most every
:data:`DRAG_WRITE_MS` (the other views follow within a frame or two); the drag's
writes are one undo entry.

One job: drawing the arrows and taking the hand that moves them. The view box and
the arrowheads and labels are in :mod:`.arrow_plot`, the PNG / SVG painting in
:mod:`.widget_image`, the geometry in :mod:`attn_explorer.compute.geometry` and the
selection, text and drags in :mod:`attn_explorer.state.views.vectors`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtGui import QFont, QHideEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.compute.geometry import project_onto
from attn_explorer.state.storage.safe_files import write_atomic
from attn_explorer.state.views.vectors import SNAP_STEPS, VectorsState
from attn_explorer.ui.common.text import message_box
from attn_explorer.ui.vectors.arrow_plot import (
    KEY_COLOUR,
    PROJECTION_COLOUR,
    QUERY_COLOUR,
    ArrowDecorations,
    ArrowViewBox,
    no_hover_while,
)
from attn_explorer.ui.vectors.widget_image import widget_image_bytes

#: A drag writes the session at most this often (ms); the arrow itself moves at once.
DRAG_WRITE_MS = 30
#: How near (pixels) a press must be to a tip to grab it.
GRAB_PIXELS = 14


class VectorsView(QWidget):
    """The plot, its choices (projection, dimensions, snap step) and the dot-product text."""

    def __init__(self, state: VectorsState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.session = state.session
        self._preview: tuple[str, int, tuple[float, float]] | None = None
        self._pending: tuple[float, float] | None = None
        self._tips: dict[str, np.ndarray] = {}
        self._labels: tuple[str, str] = ("", "")
        self._hovered: tuple[str, int] | None = None  # the tip under the pointer
        self._aspect_locked: bool | None = None
        self._write_timer = QTimer(self)
        self._write_timer.setSingleShot(True)
        self._write_timer.setInterval(DRAG_WRITE_MS)
        self._write_timer.timeout.connect(self._write_pending)
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(0)
        self._redraw_timer.timeout.connect(self.redraw)
        self._build()
        ev = self.session.events
        ev.values.connect(self._on_values_changed)
        ev.shape.connect(self.schedule_redraw)
        ev.tokens.connect(self.schedule_redraw)
        ev.document.connect(self.schedule_redraw)  # the caption names a taken model head
        ev.options.connect(self._on_option_changed)
        state.changed.connect(self.schedule_redraw)
        self.redraw()

    # -- construction ------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        controls = QHBoxLayout()
        self.projection = QComboBox()
        self.projection.addItem("PCA of q and k", "pca")
        self.projection.addItem("two dimensions", "dims")
        self.projection.setToolTip("How a head with d > 2 is flattened to two axes")
        self.first_dim, self.second_dim = QSpinBox(), QSpinBox()
        for spin, value in ((self.first_dim, 1), (self.second_dim, 2)):
            spin.setPrefix("d")
            spin.setRange(1, 2)
            spin.setValue(value)
            spin.valueChanged.connect(self._on_projection_changed)
        self.projection.currentIndexChanged.connect(self._on_projection_changed)
        self.snap = QComboBox()
        for step in SNAP_STEPS:
            self.snap.addItem("off" if step == 0 else f"{step:g}", step)
        self.snap.setCurrentIndex(self.snap.findData(self.state.snap_step))
        self.snap.setToolTip("Dragged tips land on multiples of this step")
        self.snap.currentIndexChanged.connect(
            lambda _n: self.state.set_snap(float(self.snap.currentData()))
        )
        # Two short rows, so the dock fits beside the heatmaps in a 1280-pixel window.
        controls.addWidget(QLabel("view"))
        controls.addWidget(self.projection, 1)
        layout.addLayout(controls)
        second_row = QHBoxLayout()
        for widget in (self.first_dim, self.second_dim):
            second_row.addWidget(widget)
        self.all_labels = QCheckBox("all labels")
        self.all_labels.setToolTip(
            "Label every arrow; otherwise only the chosen q and k and the one under the pointer"
        )
        self.all_labels.toggled.connect(lambda _on: self._decorate())
        second_row.addWidget(self.all_labels)
        second_row.addStretch(1)
        second_row.addWidget(QLabel("snap"))
        second_row.addWidget(self.snap)
        layout.addLayout(second_row)
        self.caption = QLabel()
        self.caption.setObjectName("vectors_caption")
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)

        self.view_box = ArrowViewBox()
        self.plot = pg.PlotWidget(viewBox=self.view_box, background="w")
        self.plot.setObjectName("vectors_plot")
        self.plot.setMinimumSize(160, 140)
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.hideButtons()
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis.setPen(pg.mkPen("k"))
            axis.setTextPen(pg.mkPen("k"))
            # The axes draw the grid across the whole plot; cached as a pixmap, a drag
            # (which never moves the axes) repaints only the arrows.
            axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        for angle in (0, 90):
            axis_line = pg.InfiniteLine(0, angle=angle, pen=pg.mkPen((120, 120, 120), width=1))
            self.plot.addItem(axis_line)
        dashed = Qt.PenStyle.DashLine
        self.query_shafts = pg.PlotDataItem(connect="pairs", pen=pg.mkPen(QUERY_COLOUR, width=2))
        self.key_shafts = pg.PlotDataItem(
            connect="pairs", pen=pg.mkPen(KEY_COLOUR, width=2, style=dashed)
        )
        self.query_tips = pg.ScatterPlotItem(
            symbol="o", size=9, brush=pg.mkBrush(QUERY_COLOUR), pen=pg.mkPen(QUERY_COLOUR)
        )
        self.key_tips = pg.ScatterPlotItem(
            symbol="s", size=9, brush=pg.mkBrush("w"), pen=pg.mkPen(KEY_COLOUR, width=2)
        )
        self.selected_query = pg.PlotDataItem(pen=pg.mkPen(QUERY_COLOUR, width=5))
        self.selected_key = pg.PlotDataItem(pen=pg.mkPen(KEY_COLOUR, width=5, style=dashed))
        self.projection_line = pg.PlotDataItem(pen=pg.mkPen(PROJECTION_COLOUR, width=4))
        self.drop_line = pg.PlotDataItem(
            pen=pg.mkPen(PROJECTION_COLOUR, width=1.5, style=Qt.PenStyle.DotLine)
        )
        for item in (
            self.projection_line, self.drop_line, self.query_shafts, self.key_shafts,
            self.selected_query, self.selected_key, self.query_tips, self.key_tips,
        ):  # fmt: skip
            self.plot.addItem(item)
        self.decorations = ArrowDecorations(self.plot)  # arrowheads and token labels
        layout.addWidget(self.plot, 1)

        legend = QLabel(
            f"<span style='color:{QUERY_COLOUR.name()}'>━ ● queries q</span> &nbsp; "
            f"<span style='color:{KEY_COLOUR.name()}'>╍ ■ keys k</span> &nbsp; "
            f"<span style='color:{PROJECTION_COLOUR.name()}'>━ projection of k onto q</span>"
        )
        legend.setTextFormat(Qt.TextFormat.RichText)
        legend.setWordWrap(True)
        layout.addWidget(legend)
        self.text = QLabel()
        self.text.setObjectName("vectors_text")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        layout.addWidget(self.text)
        self.hover = QLabel(" ")
        self.hover.setObjectName("vectors_hover")
        self.hover.setTextFormat(Qt.TextFormat.PlainText)
        self.hover.setWordWrap(True)
        layout.addWidget(self.hover)

        vb = self.view_box
        vb.grab, vb.move, vb.release = self._grab, self._drag_move, self._drag_release
        vb.click, vb.context = self._click, self._context_menu
        scene = self.plot.scene()
        scene.sigMouseMoved.connect(self._on_mouse_moved)
        no_hover_while(scene, lambda: self.state.dragging is not None)

    # -- state → view ------------------------------------------------------------------------
    def schedule_redraw(self) -> None:
        self._redraw_timer.start()

    def _on_values_changed(self, matrix: str) -> None:
        dragging = self.state.dragging
        if dragging is not None and self._preview is not None and dragging[0] == matrix:
            # Our own drag's write: the arrow is already drawn there; only the words change.
            self.text.setText("\n".join(line for line in self.state.dot_lines() if line))
            self._describe_hovered()
            return
        self.schedule_redraw()

    def _on_option_changed(self, name: str) -> None:
        if name in ("head", "batch_index", "all"):
            self.schedule_redraw()

    def _on_projection_changed(self, _value: object = None) -> None:
        dims = (self.first_dim.value() - 1, self.second_dim.value() - 1)
        self.state.set_projection(str(self.projection.currentData()), dims)

    def tips(self, matrix: str) -> np.ndarray:
        """Where the tips of ``"query"`` or ``"key"`` arrows are drawn, ``(T, 2)``."""
        return self._tips.get(matrix, np.zeros((0, 2)))

    def redraw(self) -> None:
        """Draw the current head's arrows, the selection and its dot product."""
        self._redraw_timer.stop()
        state = self.state
        plane = state.plane()
        query, key = state.head_vectors()
        self._tips = {"query": plane.place(query), "key": plane.place(key)}
        if self._preview is not None:
            matrix, token, tip = self._preview
            if token < len(self._tips[matrix]):
                self._tips[matrix][token] = tip
        d = query.shape[1]
        self._sync_controls(d)
        if plane.labels != self._labels:  # a new label re-lays the axes out: only on change
            self._labels = plane.labels
            self.plot.setLabel("bottom", plane.labels[0])
            self.plot.setLabel("left", plane.labels[1])
        self.caption.setText(state.caption(plane))
        # True angles need equal units on both axes; a projection has none to keep, and
        # locked, a wide plot would stretch x far past the points (−50…40 around −12…2).
        if plane.exact != self._aspect_locked:
            self._aspect_locked = plane.exact
            self.plot.setAspectLocked(plane.exact)
        for matrix, shafts, tips in (
            ("query", self.query_shafts, self.query_tips),
            ("key", self.key_shafts, self.key_tips),
        ):
            points = self._tips[matrix]
            pairs = np.zeros((2 * len(points), 2))  # origin, tip, origin, tip, ...
            pairs[1::2] = points
            shafts.setData(pairs[:, 0], pairs[:, 1])
            tips.setData(points[:, 0], points[:, 1])
        self._draw_selection()
        self._decorate()
        if self.state.dragging is None:  # never move the ground under a dragging hand
            self._fit()
        title, first, second = state.dot_lines()
        self.text.setText("\n".join(line for line in (title, first, second) if line))
        self._describe_hovered()

    def _move_tip(self, matrix: str, token: int, tip: tuple[float, float]) -> None:
        """Redraw what one moved tip changes: its matrix's arrows, the selection if the tip
        is chosen, the arrowheads and labels. What :meth:`redraw` would draw with the tip
        at ``tip``, as the rest (the plane, the other matrix, the words) comes from the
        session, which the drag has not written yet; a drag event costs half as much."""
        points = self._tips[matrix]
        points[token] = tip
        shafts, tips = (
            (self.query_shafts, self.query_tips)
            if matrix == "query"
            else (self.key_shafts, self.key_tips)
        )
        pairs = np.zeros((2 * len(points), 2))  # origin, tip, origin, tip, ...
        pairs[1::2] = points
        shafts.setData(pairs[:, 0], pairs[:, 1])
        tips.setData(points[:, 0], points[:, 1])
        sel = self.state.selection
        if token == (sel.query if matrix == "query" else sel.key):
            self._draw_selection()
        self._decorate()

    def _decorate(self) -> None:
        """Arrowheads and labels: the chosen and hovered arrows', or all (see draw)."""
        sel = self.state.selection
        self.decorations.draw(
            self.tips, self.session.tokens, sel.query, sel.key,
            self._hovered, self.all_labels.isChecked(),
        )  # fmt: skip

    def _describe_hovered(self) -> None:
        """The read-out of the tip under the pointer, from the numbers as they are now
        (after a drag: the moved vector)."""
        found = self._hovered
        if found is not None and found[1] >= len(self.tips(found[0])):
            found = self._hovered = None
        self.hover.setText(" " if found is None else self.state.describe(*found))

    def _fit(self) -> None:
        """Show the origin and every tip, with room for the labels."""
        points = np.concatenate([self.tips("query"), self.tips("key"), np.zeros((1, 2))])
        low, high = points.min(axis=0), points.max(axis=0)
        pad = np.maximum(0.2 * (high - low).max(), 0.3)
        self.view_box.setRange(
            xRange=(low[0] - pad, high[0] + pad), yRange=(low[1] - pad, high[1] + pad), padding=0
        )

    def _sync_controls(self, d: int) -> None:
        projected = d > 2
        for spin, dim in zip((self.first_dim, self.second_dim), self.state.dims, strict=True):
            spin.blockSignals(True)
            spin.setRange(1, max(1, d))
            spin.setValue(min(dim, max(0, d - 1)) + 1)  # the boxes say what the plot shows
            spin.blockSignals(False)
            spin.setEnabled(projected and self.state.projection == "dims")
        self.projection.setEnabled(projected)

    def _draw_selection(self) -> None:
        sel = self.state.selection
        empty: list[float] = []
        for item in (self.selected_query, self.selected_key, self.projection_line, self.drop_line):
            item.setData(empty, empty)
        q_tip = self.tips("query")[sel.query] if sel.query is not None else None
        k_tip = self.tips("key")[sel.key] if sel.key is not None else None
        if q_tip is not None:
            self.selected_query.setData([0, q_tip[0]], [0, q_tip[1]])
        if k_tip is not None:
            self.selected_key.setData([0, k_tip[0]], [0, k_tip[1]])
        if q_tip is not None and k_tip is not None:
            foot = project_onto(k_tip, q_tip)
            self.projection_line.setData([0, foot[0]], [0, foot[1]])
            self.drop_line.setData([k_tip[0], foot[0]], [k_tip[1], foot[1]])

    # -- the user's hand -----------------------------------------------------------------------
    def _nearest_tip(self, scene_pos: QPointF) -> tuple[str, int] | None:
        """The tip within GRAB_PIXELS of a scene position (queries win ties), or None."""
        vb = self.view_box
        at = vb.mapSceneToView(scene_pos)
        pixel = vb.viewPixelSize()  # (view units per pixel in x, in y)
        if not (pixel[0] > 0 and pixel[1] > 0):
            return None
        best: tuple[float, str, int] | None = None
        for matrix in ("query", "key"):
            tips = self.tips(matrix)
            if not len(tips):
                continue
            offsets = (tips - [at.x(), at.y()]) / [pixel[0], pixel[1]]  # (T, 2) in pixels
            distances = np.hypot(offsets[:, 0], offsets[:, 1])
            n = int(np.argmin(distances))
            if distances[n] <= GRAB_PIXELS and (best is None or distances[n] < best[0]):
                best = (float(distances[n]), matrix, n)
        return None if best is None else (best[1], best[2])

    def tip_scene_pos(self, matrix: str, token: int) -> QPointF:
        """Where an arrow's tip is on screen (scene coordinates): for tests and lessons."""
        x, y = self.tips(matrix)[token]
        return self.view_box.mapViewToScene(QPointF(float(x), float(y)))

    def _grab(self, scene_pos: QPointF) -> bool:
        found = self._nearest_tip(scene_pos)
        if found is None:
            return False
        if not self.state.draggable:
            self.session.report(
                "This view is a projection (d > 2): drag arrows where d ≤ 2, or edit Q and K "
                "in the tables",
                "info",
            )
            return False
        self._hovered = found  # the read-out follows the dragged tip
        return self.state.begin_drag(*found)

    def _drag_move(self, view_pos: QPointF) -> None:
        dragging = self.state.dragging
        if dragging is None:
            return
        matrix, token = dragging
        x, y = self.state.snapped(view_pos.x(), view_pos.y())
        if self.session.shape[3] == 1:
            y = 0.0
        if self._preview is not None and self._preview[2] == (x, y):
            return  # the snapped tip did not move
        self._preview = (matrix, token, (x, y))
        self._pending = (x, y)
        # The arrow follows the hand at once; the session (and the words) follow shortly.
        if self._redraw_timer.isActive() or token >= len(self._tips.get(matrix, ())):
            self.redraw()  # something else changed too: draw it all
        else:
            self._move_tip(matrix, token, (x, y))
        if not self._write_timer.isActive():
            self._write_timer.start()

    def _write_pending(self) -> None:
        if self._pending is not None:
            x, y = self._pending
            self._pending = None
            self.state.drag_to(x, y)

    def _drag_release(self) -> None:
        self._write_timer.stop()
        self._write_pending()
        self.state.end_drag()
        self._preview = None
        self.redraw()

    def _click(self, scene_pos: QPointF) -> None:
        found = self._nearest_tip(scene_pos)
        if found is None:
            return
        matrix, token = found
        sel = self.state.selection
        if matrix == "query":
            self.state.select_query(token)
        elif sel.query is not None:
            self.state.select_cell(sel.query, token)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        if self.state.dragging is not None:
            return  # the dragged arrow is the one under the hand
        found = self._nearest_tip(scene_pos)
        if found != self._hovered:
            self._hovered = found
            self._decorate()
        self._describe_hovered()

    def _context_menu(self, screen_pos: object) -> None:
        menu = QMenu(self)
        menu.addAction("Export image…", self.export_dialog)
        menu.addAction("Fit the arrows", self._fit)
        if isinstance(screen_pos, QPointF):
            menu.exec(screen_pos.toPoint())

    # -- export ----------------------------------------------------------------------------------
    def image_bytes(self, fmt: str, scale: float = 2.0) -> bytes:
        """The view as PNG (``scale`` × its size on screen) or SVG bytes."""
        return widget_image_bytes(self, fmt, scale, title="Attention Explorer vectors")

    def export(self, path: str | Path, width: int | None = None) -> Path:
        """Write the view as PNG (``width`` pixels wide; twice its size on screen by default)
        or SVG, by the file's suffix, atomically."""
        target = Path(path)
        fmt = target.suffix.lower().lstrip(".")
        if fmt not in ("png", "svg"):
            raise ValueError(f"{target.name}: choose a .png or .svg file name")
        scale = 2.0 if width is None else width / max(1, self.width())
        return write_atomic(target, self.image_bytes(fmt, scale))

    def export_dialog(self) -> Path | None:
        """The heatmaps' export options (format, PNG width), then a file name."""
        from attn_explorer.ui.common.export_form import image_options
        from attn_explorer.ui.common.settings import last_dir

        options = image_options(self, "Export vectors view", ("png", "svg"), heads=False)
        if options is None:
            return None
        ext, width, _ = options
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export vectors view",
            str(Path(last_dir()) / f"vectors-head{self.session.options.head + 1}.{ext}"),
            f"{ext.upper()} (*.{ext})",
        )
        if not path:
            return None
        if not Path(path).suffix:
            path += f".{ext}"
        try:
            written = self.export(path, width)
        except (OSError, ValueError) as exc:
            self.session.report(f"Export failed: {exc}")
            message_box(self, QMessageBox.Icon.Warning, "Export failed", str(exc))
            return None
        self.session.report(f"Exported {written}", "info")
        return written

    def hideEvent(self, event: QHideEvent) -> None:
        # A drag whose release never arrives (the dock closed or tabbed away mid-drag) ends
        # here, so later edits redraw the arrows again.
        if self.state.dragging is not None:
            self._drag_release()
        super().hideEvent(event)

    def shutdown(self) -> None:
        self._write_timer.stop()
        self._redraw_timer.stop()
