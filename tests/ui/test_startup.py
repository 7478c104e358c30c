"""Start-up: the first paint needs no pyqtgraph, is complete, and the full window follows.

The window paints first with what it needs for that (tables, score grid, code, a picture
of the heatmaps) and builds the interactive heatmaps (pyqtgraph, ~130 ms to import)
just after. These tests check that split by what is loaded and what is on screen, never
by the clock (issue 15 measures the time: ``python bench/gui.py --startup``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QImage

from attn_explorer.state.colormaps import stage_range, to_rgb
from attn_explorer.ui.explorer.heatmap_preview import HeatmapPreview, preview_figure
from attn_explorer.ui.window.main_window import MainWindow

pytestmark = pytest.mark.slow  # each test waits for a whole window start (4–5 s on 2 busy cores)

#: The app's own start (``attn-explorer`` → cli.main → run_app) in a fresh interpreter:
#: what is loaded when the window first paints, and what the window holds then and once
#: its interactive heatmaps are built.
START = """
import json, sys
import attn_explorer.ui.window.launch as app_module
from attn_explorer.cli.main import main

real_qt_application = app_module.qt_application
seen = {}

def loaded():
    heavy = ("pyqtgraph", "numpy.random", "multiprocessing", "attn_explorer.lessons.engine",
             "attn_explorer.ui.explorer.heatmaps", "attn_explorer.ui.timing.timing_panel")
    return sorted(m for m in heavy if m in sys.modules)

def state(window):
    return {"loaded": loaded(), "heatmaps": window.heatmaps is not None,
            "in_place": type(window.splitter.widget(1)).__name__,
            "timing": window.timing_panel is not None,
            "lessons": window.lessons_dock._panel is not None}

def qt_application():
    app = real_qt_application()
    if seen:
        return app
    seen["app"] = True
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QMainWindow

    def wait_for_heatmaps(window):
        if window.heatmaps is None:
            QTimer.singleShot(10, lambda: wait_for_heatmaps(window))
            return
        seen["complete"] = state(window)
        window.files.ask_before_discard = False
        app.exit(0)

    class Watch(QObject):
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint and isinstance(obj, QMainWindow):
                app.removeEventFilter(self)
                seen["first_paint"] = state(obj)
                wait_for_heatmaps(obj)
            return False

    app.watch = Watch()
    app.installEventFilter(app.watch)
    return app

app_module.qt_application = qt_application
main([])
print(json.dumps(seen))
"""


def test_the_first_paint_loads_no_pyqtgraph_and_the_window_completes_after():
    done = subprocess.run(
        [sys.executable, "-c", START], capture_output=True, text=True, env=os.environ, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    first, complete = seen["first_paint"], seen["complete"]
    assert first["loaded"] == [], f"loaded before the first paint: {first['loaded']}"
    assert first == {
        "loaded": [],
        "heatmaps": False,
        "in_place": "HeatmapPreview",  # a picture of the heatmaps, never an empty area
        "timing": False,
        "lessons": False,
    }
    assert complete["heatmaps"] and complete["in_place"] == "HeatmapGrid"
    assert "pyqtgraph" in complete["loaded"]
    assert not complete["timing"] and not complete["lessons"]  # both docks are hidden


def colours(image: QImage) -> set[tuple[int, int, int]]:
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height, stride = rgb.width(), rgb.height(), rgb.bytesPerLine()
    pixels = np.frombuffer(rgb.constBits(), np.uint8)[: stride * height]
    pixels = pixels.reshape(height, stride)[:, : width * 3].reshape(-1, 3)
    return {tuple(int(c) for c in p) for p in np.unique(pixels, axis=0)}


def cell_colours(window: MainWindow) -> set[tuple[int, int, int]]:
    """The colours the shown head's cells should have (scores, diverging map)."""
    values = window.results.result.stage("scores")[0, 0]
    name = window.session.options.colormap_for("scores")
    rgb = to_rgb(values, name, *stage_range(values, "scores", name))
    return {tuple(int(c) for c in p) for p in rgb.reshape(-1, 3)}


class FirstPaint(QObject):
    """Notes the splitter's sizes when ``window`` first paints, and whether the grid was
    built by then."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.sizes: list[int] = []
        self.built: bool | None = None
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and self.built is None:
            self.sizes = self.window.splitter.sizes()
            self.built = self.window.heatmaps is not None
        return False


def test_first_paint_shows_the_heatmaps_then_the_interactive_ones_replace_them(qtbot):
    window = MainWindow(defer_plots=True)
    window.files.ask_before_discard = False
    qtbot.addWidget(window)
    window.resize(1280, 720)
    preview = window.splitter.widget(1)
    assert isinstance(preview, HeatmapPreview) and window.heatmaps is None
    first_paint = FirstPaint(window)
    window.show()
    # What the first paint shows in the heatmaps' place: the worked example's three colours.
    expected = cell_colours(window)
    assert len(expected) == 3
    assert expected <= colours(preview.canvas.grab().toImage())
    assert preview.hint.text() == "Hover a heatmap for (head, query i, key j, value)."

    qtbot.waitUntil(lambda: window.heatmaps is not None, timeout=10_000)
    assert first_paint.sizes and first_paint.built is False
    grid = window.heatmaps
    assert window.splitter.widget(1) is grid
    # nothing moved when the grid took the preview's place
    assert window.splitter.sizes() == first_paint.sizes
    assert expected <= colours(grid.view.grab().toImage())
    assert grid.hover.text() == preview.hint.text()

    # The interactive heatmaps follow an edit: q1 = (3, 0) makes row 1 of S [3, 0, 3] (and
    # the colour scale ±3).
    window.session.set_cell("query", 0, 0, 3.0)
    qtbot.waitUntil(lambda: window.results.result.stage("scores")[0, 0, 0, 0] == 3.0)
    after = cell_colours(window)
    assert after != expected
    qtbot.waitUntil(lambda: after <= colours(grid.view.grab().toImage()), timeout=5000)


def test_the_preview_follows_the_results_until_replaced(qtbot):
    window = MainWindow(defer_plots=True)
    window.files.ask_before_discard = False
    qtbot.addWidget(window)
    preview = window.splitter.widget(1)
    assert isinstance(preview, HeatmapPreview)
    preview.resize(500, 400)
    window.commands.load_preset(
        "random", heads=8, tokens=4, dim=2, seed=3
    )  # before the first paint
    figure = preview_figure(window.session, window.results)
    assert figure is not None and len(figure.panels) == 8
    assert not figure.token_labels  # eight heads: thumbnails, as the grid draws them
    assert preview.hint.text().startswith("rows = query i, columns = key j")
    window.session.set_option("stage", "weights")
    assert preview_figure(window.session, window.results).colormap == "sequential"
    window.commands.load_preset(
        "random", heads=4, tokens=64, dim=2, seed=3
    )  # too big to paint here
    assert preview_figure(window.session, window.results) is None
    assert not colours(preview.canvas.grab().toImage()) <= {(255, 255, 255)}  # a note
