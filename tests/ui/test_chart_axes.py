"""Chart axes as the user reads them: decade labels, units, placeholders, d1 / d2 columns."""

from __future__ import annotations

import itertools

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage, QPainter
from qt_idle import settle

from attn_explorer.state import Session
from attn_explorer.state.formatting import format_seconds
from attn_explorer.ui.timing.axes import decade_text
from attn_explorer.ui.timing.timing_panel import BARS_PLACEHOLDER, SWEEP_PLACEHOLDER, TimingPanel

TOKENS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
#: Fake timings (seconds) in the shape ``compute.timing.sweep_tokens`` returns.
SWEEP = {
    "tokens": TOKENS,
    "loop": [8e-6 * t * t for t in TOKENS],
    "matmul": [4e-6 + 3e-9 * t * t for t in TOKENS],
    "batched": [2e-6 + 1e-9 * t * t for t in TOKENS],
    "loop_estimated": [t > 64 for t in TOKENS],
}
DECADES = {decade_text(n) for n in range(-12, 13)}
SECONDS = {format_seconds(10.0**n) for n in range(-9, 4)}


def drawn_labels(axis: pg.AxisItem) -> list[tuple[str, object]]:
    """The tick labels the axis paints now (text, rectangle), as pyqtgraph lays them out."""
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    assert specs is not None
    return [(text, rect) for rect, _, text in specs[2] if text]


def assert_apart(labels: list[tuple[str, object]]) -> None:
    for (a, rect_a), (b, rect_b) in itertools.combinations(labels, 2):
        assert not rect_a.intersects(rect_b), f"{a!r} collides with {b!r}"


def placeholders(plot: pg.PlotWidget) -> list[str]:
    return [
        i.textItem.toPlainText() for i in plot.getPlotItem().items if isinstance(i, pg.TextItem)
    ]


@pytest.fixture
def panel(qtbot):
    widget = TimingPanel(Session())
    qtbot.addWidget(widget)
    widget.resize(1000, 320)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    widget.runner.cancel(quiet=True)


def test_sweep_axes_are_labelled_at_whole_decades_only(panel):
    panel.show_sweep(SWEEP)
    settle()  # the axes take the new range on the next layout pass
    tokens = drawn_labels(panel.scaling.getAxis("bottom"))
    seconds = drawn_labels(panel.scaling.getAxis("left"))
    assert [text for text, _ in tokens] == ["10¹", "10²", "10³"]  # T = 4 … 1024
    assert len(seconds) >= 2 and {text for text, _ in seconds} <= SECONDS
    assert_apart(tokens)
    assert_apart(seconds)
    # The minor ticks (2, 3, … 9 × 10ⁿ) are there, unlabelled.
    axis = panel.scaling.getAxis("bottom")
    levels = axis.tickValues(*axis.range, axis.geometry().width())
    minor = [v for _, values in levels for v in values if abs(v - round(v)) > 1e-6]
    assert minor and set(axis.tickStrings(minor, 1.0, 1.0)) == {""}


def test_short_chart_labels_every_other_decade_rather_than_colliding(panel):
    panel.resize(1000, 200)
    panel.show_sweep(SWEEP)
    settle()
    seconds = drawn_labels(panel.scaling.getAxis("left"))
    assert seconds and {text for text, _ in seconds} <= SECONDS
    assert_apart(seconds)


def test_axes_name_their_quantity(panel):
    for plot in (panel.bars, panel.scaling):
        assert plot.getAxis("left").labelText == "time per call"
    assert panel.scaling.getAxis("bottom").labelText == "tokens T"
    assert panel.bars.getAxis("bottom").labelText == "strategy"


def test_empty_charts_say_what_to_press_until_a_result_arrives(qtbot, panel):
    assert placeholders(panel.bars) == [BARS_PLACEHOLDER]
    assert placeholders(panel.scaling) == [SWEEP_PLACEHOLDER]
    assert "Ctrl+T" in BARS_PLACEHOLDER and "Ctrl+Shift+T" in SWEEP_PLACEHOLDER
    for plot in (panel.bars, panel.scaling):
        text = next(i for i in plot.getPlotItem().items if isinstance(i, pg.TextItem))
        box = plot.getPlotItem().getViewBox().sceneBoundingRect()
        assert box.contains(text.sceneBoundingRect().center())
        labels = drawn_labels(plot.getAxis("left"))
        assert 2 <= len(labels) <= 8 and {t for t, _ in labels} <= SECONDS  # 1 µs … 10 s
        assert_apart(labels)
    panel.show_sweep(SWEEP)
    assert placeholders(panel.scaling) == []
    assert placeholders(panel.bars) == [BARS_PLACEHOLDER]  # no timing yet


def test_legend_sits_outside_the_curves(panel):
    panel.show_sweep(SWEEP)
    settle()
    names = [label.text for _, label in panel.legend.items]
    assert names == ["loop", "loop (est.)", "matmul", "batched"]
    view = panel.scaling.getPlotItem().getViewBox().sceneBoundingRect()
    legend = panel.legend.sceneBoundingRect()
    # (a pixel of overlap is layout rounding, not a legend over the curves)
    assert legend.height() > 0 and not legend.adjusted(1, 1, -1, -1).intersects(view)
    assert panel.scaling.rect().contains(legend.toRect())
    chart = panel.scaling.getPlotItem().sceneBoundingRect()
    assert chart.right() <= panel.scaling.width() + 1  # the legend does not push it off


def test_output_stage_names_the_columns_of_v(window):
    window.session.set_option("stage", "output")
    settle()
    axis = window.heatmaps.plots[0].getAxis("bottom")
    assert axis.labelText == "dimension of V"
    assert [text for text, _ in drawn_labels(axis)] == ["d1", "d2"]
    window.session.set_option("stage", "scores")  # back to keys: the token names again
    settle()
    axis = window.heatmaps.plots[0].getAxis("bottom")
    assert [text for text, _ in drawn_labels(axis)] == ["t1", "t2", "t3"]
