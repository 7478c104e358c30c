"""Journey of issue 23, defect 3: a timing chart says what it was measured on.

After a sweep at H = 1, d = 2, changing d or H marks the chart out of date (its title
names the H and d it was measured at); while a sweep runs again, the chart shown is
marked as the previous run. The bar chart of Ctrl+T follows the same rule for the
whole shape.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def title(plot) -> str:
    """A chart's title as the user reads it (its lines joined by " / ")."""
    return plot.getPlotItem().titleLabel.text.replace("<br>", " / ")


def sweep_title(user) -> str:
    return title(user.window.timing_panel.scaling)


def bars_title(user) -> str:
    return title(user.window.timing_panel.bars)


def faded(plot) -> bool:
    return plot.getPlotItem().vb.opacity() < 1.0


def wait_idle(user) -> None:
    user.qtbot.waitUntil(lambda: not user.window.timing_panel.runner.is_busy(), timeout=60_000)
    user.settle()


def test_sweep_chart_is_marked_out_of_date_and_as_the_previous_run(user):
    panel = user.window.timing_panel
    panel.sweep_sizes = (4, 8, 16)  # a short sweep: the rule does not depend on its length
    assert user.window.session.shape == (1, 1, 3, 2)
    user.press(Qt.Key.Key_T, CTRL | SHIFT, widget=user.window)
    wait_idle(user)
    assert sweep_title(user) == "time vs T (log–log), H = 1, d = 2"
    assert not faded(panel.scaling)
    user.set_size("d", 3)
    assert sweep_title(user) == "time vs T, at H = 1, d = 2 / out of date — run again"
    assert faded(panel.scaling) and faded(panel.memory)
    assert "the session has H = 1, d = 3 now" in panel.scaling.toolTip()
    assert title(panel.memory).endswith("at H = 1, d = 2 / out of date — run again")
    user.set_size("d", 2)  # back where it was measured: the chart holds again
    assert sweep_title(user) == "time vs T (log–log), H = 1, d = 2"
    assert not faded(panel.scaling)
    user.set_size("H", 2)
    assert sweep_title(user) == "time vs T, at H = 1, d = 2 / out of date — run again"
    user._activate()
    user.qtbot.keyClick(user.window, Qt.Key.Key_T, CTRL | SHIFT)  # no settling: still running
    assert panel.runner.is_busy()
    assert sweep_title(user) == "previous run, at H = 1, d = 2 / measuring again …"
    assert "while H = 2, d = 2 is measured" in panel.scaling.toolTip()
    assert faded(panel.scaling)
    wait_idle(user)
    assert sweep_title(user) == "time vs T (log–log), H = 2, d = 2"
    assert not faded(panel.scaling) and not faded(panel.memory)
    user.qtbot.keyClick(user.window, Qt.Key.Key_T, CTRL | SHIFT)
    user.press(Qt.Key.Key_Period, CTRL, widget=user.window)  # cancel: the chart is current again
    assert sweep_title(user) == "time vs T (log–log), H = 2, d = 2"


def test_bar_chart_names_its_shape_and_goes_out_of_date(user):
    user.press(Qt.Key.Key_T, CTRL, widget=user.window)
    wait_idle(user)
    assert bars_title(user) == "time per call, (B,H,T,d) = (1,1,3,2)"
    user.set_size("T", 4)
    assert bars_title(user) == "time per call, at (1,1,3,2) / out of date — run again"
    assert faded(user.window.timing_panel.bars)
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)  # undo: the shape it was measured on
    assert bars_title(user) == "time per call, (B,H,T,d) = (1,1,3,2)"
    assert not faded(user.window.timing_panel.bars)
