"""The real window on 1280 × 720, 1366 × 768, 1920 × 1080 and the minimum-size screen.

Each size runs ``attn_explorer.tools.layout_check`` in its own process on an offscreen
virtual screen of that size (Qt reads the screen size once per process). The checks are
made from widget geometry: the window inside the screen, every visible widget inside its
parent, and the score grid, heatmaps, colour bar, stepper code line and locals, status bar,
dock tabs and "Start here" button in sight. The PNGs stay in ``tests/artifacts/layout/``
to be looked at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from qt_idle import settle

from attn_explorer.tools import layout_check, layout_rules

SCREENS = Path(__file__).parents[1] / "screens"
ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "layout"
SIZES = ["1280x720", "1366x768", "1920x1080", "1000x650"]


def run_check(size: str, tmp_path: Path) -> dict:
    env = dict(os.environ)
    env["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREENS / f'{size}.json'}"
    env["ATTN_EXPLORER_SETTINGS_DIR"] = str(tmp_path / "settings")
    env["ATTN_EXPLORER_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "attn_explorer.tools.layout_check", str(ARTIFACTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
def test_every_view_fits_the_screen_and_shows_what_matters(size, tmp_path):
    report = run_check(size, tmp_path)
    width, height = (int(n) for n in size.split("x"))
    assert report["screen"] == [width, height]
    assert set(report["views"]) == set(layout_check.VIEWS)
    for view, found in report["views"].items():
        x, y, w, h = found["window"]
        assert x >= 0 and y >= 0 and x + w <= width and y + h <= height, view
        assert found["problems"] == [], f"{view} at {size}: {found['problems']}"
        assert Path(found["png"]).stat().st_size > 10_000  # a real picture, not a blank


def test_the_checker_finds_a_widget_cut_off_by_its_parent(qtbot):
    """The geometry rule itself: a child running past its parent's edge is reported."""
    from PySide6.QtWidgets import QLabel, QWidget

    top = QWidget()
    qtbot.addWidget(top)
    top.resize(200, 100)
    label = QLabel("a long label cut off at the right edge", top)
    label.setObjectName("cut")
    label.setGeometry(120, 10, 150, 20)
    top.show()
    problems = layout_rules.overhangs(top)
    assert len(problems) == 1 and "QLabel(cut)" in problems[0]
    label.setGeometry(10, 10, 150, 20)
    assert layout_rules.overhangs(top) == []


@pytest.mark.slow
def test_the_checker_sees_a_plot_larger_than_its_view(qtbot):
    """A heatmap grid squeezed into a tiny view reports its cut-off colour bar."""
    from attn_explorer.ui.window.main_window import MainWindow

    window = MainWindow(defer_plots=False)
    qtbot.addWidget(window)
    window.files.ask_before_discard = False
    window.show()
    qtbot.waitExposed(window)
    assert window.heatmaps is not None
    qtbot.waitUntil(lambda: bool(window.heatmaps.bars))
    assert layout_rules._plot_problems(window) == []
    window.heatmaps.view.setFixedWidth(90)  # narrower than the colour bar's minimum
    settle()
    problems = layout_rules._plot_problems(window)
    assert any("colour bar" in p or "cells" in p for p in problems), problems
