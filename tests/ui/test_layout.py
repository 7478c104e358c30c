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
from PySide6.QtCore import Qt
from qt_idle import settle

from attn_explorer.tools import layout_check, layout_rules

SCREENS = Path(__file__).parents[1] / "screens"
ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "layout"
SIZES = ["1280x720", "1366x768", "1920x1080", "1000x650"]


def run_check(size: str, tmp_path: Path, *options: str) -> dict:
    env = dict(os.environ)
    env["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREENS / f'{size}.json'}"
    env["ATTN_EXPLORER_SETTINGS_DIR"] = str(tmp_path / "settings")
    env["ATTN_EXPLORER_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "attn_explorer.tools.layout_check", str(ARTIFACTS), *options],
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


@pytest.mark.slow
def test_every_docks_combination_leaves_the_heatmaps_35_percent_at_1280x720(tmp_path):
    """Issue 36: with the Model dock open at 1280 × 720 the heatmaps had 34 % of the width
    (the dock took 45 %). Every combination of Model, Vectors, Lessons, Inputs, Timing and
    the stepper: the heatmaps keep at least 35 % and every dock asked for stays open (the
    side docks share a place as tabs rather than squeeze the views)."""
    from attn_explorer.tools.layout_check import OPENED_DOCKS, TOGGLED_DOCKS

    report = run_check("1280x720", tmp_path, "--docks")
    rows = report["combinations"]
    assert report["screen"] == [1280, 720]
    assert len(rows) == 2 ** (len(OPENED_DOCKS) + len(TOGGLED_DOCKS)) == 64
    assert len({tuple(row["open"]) for row in rows}) == 64
    for row in rows:
        assert row["heatmaps"] >= 0.35, row
        assert sorted(row["shown"]) == sorted(row["open"]), row
        assert row["window"] >= 1200, row  # the window kept its size: no dock widened it
    assert (ARTIFACTS / "docks-least-1280x720.png").stat().st_size > 10_000


@pytest.mark.slow
def test_a_model_dock_restored_wide_still_leaves_the_heatmaps_their_share(qtbot, window, tmp_path):
    """The Model dock comes back as wide as the last window had it: at 900 px of a 1280 px
    window only the heatmaps' least width held (34 %); it is narrowed to leave them
    HEATMAPS_SHARE."""
    from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert
    from attn_explorer.ui.common.settings import settings
    from attn_explorer.ui.model.model_choice import WIDTH_KEY
    from attn_explorer.ui.window.docks import HEATMAPS_SHARE

    settings().setValue(WIDTH_KEY, 900)
    _sized(window, 1280, 720)
    _sixteen_heads(window, qtbot, tokens=12)
    write_tiny_bert(tmp_path / "m", config=tiny_config(num_attention_heads=12, hidden_size=48))
    view = window.commands.open_model_view()
    view.set_model_folder(tmp_path / "m")
    settle()
    share = window.heatmaps.width() / window.width()
    assert HEATMAPS_SHARE - 0.01 <= share <= HEATMAPS_SHARE + 0.05, share
    assert window.model_dock.isVisible() and window.model_dock.width() >= 300
    assert layout_rules.tile_problems(window) == []


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


# -- issue 23, defect 4: dock combinations, in this process (the tests' 1920 × 1080 screen) --
def _sized(window, width: int, height: int) -> None:
    window.resize(width, height)
    settle()


def _sixteen_heads(window, qtbot, tokens: int) -> None:
    from attn_explorer.state.presets import preset

    chosen = preset("random")
    window.session.load(chosen.snapshot, chosen.options, text="sixteen heads")
    window.session.resize(heads=16, tokens=tokens)
    qtbot.waitUntil(lambda: len(window.heatmaps.plots) == 16, timeout=10_000)
    qtbot.wait(400)  # the grid re-flows its columns once its size settles
    settle()


@pytest.mark.slow
def test_lessons_beside_the_inputs_on_a_narrow_window_squeeze_no_view(qtbot, window):
    """1000 × 650, Inputs open, Lessons (F3) mid-lesson: before, the three columns needed
    1217 px, the tiles became strips and the grid showed 2.7 of 3 columns."""
    _sized(window, 1000, 650)
    window.commands.open_lessons()
    window.lessons.start_lesson("02-loop-visits-every-pair", 2)
    qtbot.wait(400)
    settle()
    assert window.lessons_dock.isVisible() and window.inputs_dock.isVisible()
    assert window.minimumSizeHint().width() <= 1000
    assert window.heatmaps.width() >= 320 and window.splitter.widget(0).width() >= 260
    assert layout_rules.tile_problems(window) == []
    assert layout_rules.grid_problems(window) == []
    assert layout_rules.cut_labels(window.centralWidget()) == []


@pytest.mark.slow
def test_a_grid_showing_only_its_note_lends_its_width_to_the_heads(qtbot, window):
    """H = 16, T = 64: the grid's column says "shown for up to 16 tokens"; before, it kept
    its width while sixteen heads sat in the narrower column."""
    _sized(window, 1280, 720)
    before = window.splitter.sizes()
    _sixteen_heads(window, qtbot, tokens=64)
    grid, heads = window.splitter.sizes()
    assert window.score_grid.note.isVisible()
    assert heads >= 2 * grid, (grid, heads)
    assert layout_rules.grid_problems(window) == []
    assert layout_rules.tile_problems(window) == []
    window.session.resize(heads=16, tokens=8)  # the grid is back: so is its column
    settle()
    assert abs(window.splitter.sizes()[0] - before[0]) <= 8


@pytest.mark.slow
def test_the_model_dock_cannot_squeeze_the_heatmaps(qtbot, window, tmp_path):
    """1920 × 1080 with the model view as a third column: the explorer's heatmaps keep
    their least size (before: ~70 px wide, no key labels)."""
    from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert

    _sized(window, 1600, 1000)
    _sixteen_heads(window, qtbot, tokens=12)
    write_tiny_bert(tmp_path / "m", config=tiny_config(num_attention_heads=12, hidden_size=48))
    view = window.commands.open_model_view()
    view.set_model_folder(tmp_path / "m")
    view.set_sentence("The teacher projects attention on the wall.")
    view.compute_now()
    window.resizeDocks([window.model_dock], [1400], Qt.Orientation.Horizontal)  # greedy
    qtbot.wait(400)
    settle()
    assert window.heatmaps.width() >= 320
    assert layout_rules.tile_problems(window) == []
    assert layout_rules._plot_problems(window) == []


@pytest.mark.slow
def test_the_layout_comes_back_when_lessons_close(qtbot, window):
    _sized(window, 1280, 720)
    _sixteen_heads(window, qtbot, tokens=64)
    before = layout_rules.central_geometry(window)
    window.commands.open_lessons()
    qtbot.wait(400)
    settle()
    window.lessons_dock.close()
    qtbot.wait(400)
    settle()
    assert layout_rules.recovered(before, layout_rules.central_geometry(window), "closed") == []
    assert layout_rules.tile_problems(window) == []


@pytest.mark.slow
def test_the_timing_charts_keep_titles_legend_and_axes_at_1000_px(qtbot, window):
    """Before: the titles widened each plot past its chart, cutting the title, the legend
    and the last bar; the summary ran over the axis labels."""
    from attn_explorer.tools.layout_check import SETUPS

    _sized(window, 1000, 650)
    window.docks.default_sizes()
    SETUPS["sweep"](window)
    qtbot.wait(400)
    settle()
    assert layout_rules.chart_problems(window) == []
    titles = [window.timing_panel.bars, window.timing_panel.scaling]
    for chart in titles:
        item = chart.getPlotItem()
        assert item.geometry().width() <= chart.width() + 1  # the plot fits its chart


def test_the_label_rule_sees_text_cut_by_its_own_size(qtbot):
    from PySide6.QtWidgets import QLabel, QWidget

    top = QWidget()
    qtbot.addWidget(top)
    top.resize(400, 100)
    line = QLabel("a sentence far too long for the forty pixels it is given", top)
    line.setGeometry(0, 0, 40, 20)
    wrapped = QLabel("a wrapped sentence that needs three or four lines here", top)
    wrapped.setWordWrap(True)
    wrapped.setGeometry(0, 30, 120, 14)
    top.show()
    problems = layout_rules.cut_labels(top)
    assert len(problems) == 2, problems
    line.setGeometry(0, 0, line.sizeHint().width(), 20)
    wrapped.setGeometry(0, 30, 120, wrapped.heightForWidth(120))
    assert layout_rules.cut_labels(top) == []
