"""The tiled strategy through the user's hands: its toolbar button and block setting, the
stepper's key-block read-out, and the timing sweep's memory chart."""

import numpy as np
import pytest
from PySide6.QtWidgets import QWidget

from attn_explorer.compute import attention
from attn_explorer.compute.tiled import TiledResult
from attn_explorer.compute.tiled_trace import tiled_trace
from attn_explorer.state import Session, preset
from attn_explorer.state.formatting import format_number
from attn_explorer.ui.explorer.toolbar import StrategyToggle
from attn_explorer.ui.stepper.tiled_readout import TiledReadout
from attn_explorer.ui.timing.axes import DecadeAxis
from attn_explorer.ui.timing.memory_chart import (
    MemoryChart,
    bytes_text,
    format_bytes,
    memory_summary,
)
from attn_explorer.ui.timing.timing_panel import COLOURS


@pytest.fixture
def session():
    p = preset("worked")
    return Session(p.snapshot, p.options)


def test_fourth_button_chooses_tiled_and_enables_the_block(qtbot, session):
    toggle = StrategyToggle(session)
    qtbot.addWidget(toggle)
    button = toggle.buttons["tiled"]
    assert button.text() == "4 tiled" and "Alt+4" in button.toolTip()
    assert not toggle.block.isEnabled()  # the block means nothing to batched
    button.click()
    assert session.options.strategy == "tiled" and toggle.block.isEnabled()
    assert toggle.block.value() == session.options.block == 128
    toggle.block.setValue(2)
    assert session.options.block == 2
    session.set_option("block", 5)  # state → widget
    assert toggle.block.value() == 5
    assert not session.set_option("block", 0)  # refused, as typed values are
    assert session.options.block == 5


def test_tiled_session_result_holds_no_grid_and_equals_batched(session):
    session.set_option("strategy", "tiled")
    session.set_option("block", 2)
    from attn_explorer.state.results.results import Results

    result = Results(session).request().run().result  # AppState owns one; here, our own
    assert isinstance(result, TiledResult) and result.block == 2
    q, k, v = (session.matrix(name) for name in ("query", "key", "value"))
    batched = attention(q, k, v, scale=session.options.scale, causal=session.options.causal)
    np.testing.assert_allclose(result.stage("weights"), batched.weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, batched.output, rtol=1e-12)


def test_readout_steps_key_blocks_showing_m_l_and_o(qtbot, session):
    parent = QWidget()  # as in the stepper panel: a child, hidden while not tiled
    readout = TiledReadout(session, parent)
    qtbot.addWidget(parent)
    parent.show()
    assert readout.isHidden()  # batched: nothing to show
    session.set_option("block", 2)
    session.set_option("strategy", "tiled")
    assert readout.isVisible()
    q, k, v = (session.matrix(name)[0, 0] for name in ("query", "key", "value"))
    factor = 1 / np.sqrt(q.shape[-1]) if session.options.scale else 1.0
    trace = tiled_trace(q, k, v, factor, causal=session.options.causal, block=2)
    assert len(trace) == 4  # T = 3 in blocks of 2: 2 query blocks × 2 key blocks
    assert not readout.back_button.isEnabled()
    readout.forward_button.click()
    step = trace.step(1)
    text = readout.text.text()
    assert "step 2 of 4 · query block 1 of 2 (rows 1–2) · key block 2 of 2 (keys 3–3)" in text
    for r in range(2):  # m before → after and ℓ before → after of each row
        assert f"{format_number(float(step.m_before[r]))} → {format_number(float(step.m[r]))}" in (
            text
        )
        assert (
            f"{format_number(float(step.norm_before[r]))} → {format_number(float(step.norm[r]))}"
            in text
        )
    assert "output rows 1–2 = O / ℓ" in text  # the query block's last key block
    for _ in range(5):
        readout.forward_button.click()
    assert readout.index == 3 and not readout.forward_button.isEnabled()
    readout.back_button.click()
    assert readout.index == 2 and "step 3 of 4" in readout.text.text()
    session.set_option("strategy", "loop")
    assert readout.isHidden()


def test_memory_chart_draws_each_strategy_and_says_the_ratio(qtbot):
    sweep = {
        "tokens": [64, 1024],
        "batched": [1e-4, 1e-2],
        "tiled": [2e-4, 2e-2],
        "batched_bytes": [16 * 64 * 64 * 4.0, 16 * 1024 * 1024 * 4.0],
        "tiled_bytes": [300e3, 5e6],
        "loop_bytes": [1e5, float("nan")],
    }
    chart = MemoryChart(COLOURS, DecadeAxis)
    qtbot.addWidget(chart)
    chart.show_sweep(sweep)
    names = [label.text for _, label in chart.legend.items]
    assert names == ["loop", "batched", "tiled"]  # no matmul list: no matmul line
    loop_line = chart.getPlotItem().listDataItems()[0]
    assert list(loop_line.getOriginalDataset()[0]) == [64]  # the NaN point is left out
    assert format_bytes(16 * 1024 * 1024 * 4.0) == "67.1 MB"  # SI units, as the axis
    assert [bytes_text(p) for p in (2, 3, 4, 8, 9)] == ["100 B", "1 kB", "10 kB", "100 MB", "1 GB"]
    text = memory_summary(sweep)
    assert "Peak memory at T = 1024: batched 67.1 MB, tiled 5 MB" in text
    assert "tiled holds 7.5% of batched's" in text


def test_timing_panel_switches_the_sweep_between_time_and_memory(qtbot, session):
    from attn_explorer.ui.timing.timing_panel import TimingPanel

    panel = TimingPanel(session)
    qtbot.addWidget(panel)
    panel.resize(900, 260)  # the timing dock at 1280 × 720: each chart about 450 px wide
    panel.show()
    qtbot.waitExposed(panel)
    tokens = [64, 1024]
    sweep = {"tokens": tokens, "loop_estimated": [False, True]}
    for name, scale in (("loop", 1e-5), ("matmul", 1e-8), ("batched", 1e-9), ("tiled", 2e-9)):
        sweep[name] = [scale * t * t for t in tokens]
    sweep.update(batched_bytes=[4.0 * t * t for t in tokens], tiled_bytes=[4e3 * t for t in tokens])
    panel.show_sweep(sweep)
    assert panel.sweep_charts.currentWidget() is panel.scaling
    assert "tiled" in [label.text for _, label in panel.legend.items]
    panel.sweep_view.setCurrentIndex(1)
    assert panel.sweep_charts.currentWidget() is panel.memory
    assert [label.text for _, label in panel.memory.legend.items] == ["batched", "tiled"]
    assert "Peak memory at T = 1024: batched 4.19 MB, tiled 4.1 MB" in panel.summary.text()

    def names_inside() -> bool:  # every legend name drawn whole, inside the chart
        chart = panel.memory
        return all(
            label.mapRectToScene(label.boundingRect()).right() <= chart.width()
            for _, label in chart.legend.items
        )

    qtbot.waitUntil(names_inside, timeout=2000)
