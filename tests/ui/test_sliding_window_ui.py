"""The explorer's sliding-window control beside causal: what the learner types, the band
the grid shows, and the file the window saves."""

from __future__ import annotations

import json

import numpy as np
from PySide6.QtCore import Qt
from qt_idle import settle


def test_the_window_control_makes_a_band_on_the_toy_example(qtbot, window, tmp_path):
    bar = window.options_bar
    spin = bar.sliding_window
    assert spin.accessibleName() == "sliding window"
    assert spin.objectName() == "window"
    assert not spin.isEnabled()  # a window is a kind of causal mask: off until causal is on
    window.commands.load_preset("random", heads=2, tokens=6, dim=3, seed=2)
    window.session.set_option("stage", "masked")
    bar.causal.click()
    assert spin.isEnabled() and spin.text() == "no window"
    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin, "3")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    settle()
    assert window.session.options.window == 3
    masked = window.results.result.masked[0, 0]
    band = np.array([[i - 3 < j <= i for j in range(6)] for i in range(6)])
    np.testing.assert_array_equal(np.isfinite(masked), band)
    shown = window.score_grid.text_grid()
    hidden = {shown[i][j] for i in range(6) for j in range(6) if not band[i, j]}
    visible = {shown[i][j] for i in range(6) for j in range(6) if band[i, j]}
    assert len(hidden) == 1 and not hidden & visible  # one mark for a hidden key
    assert shown[5][2] in hidden and shown[5][3] in visible  # row 6 sees keys 4..6 only
    assert "sliding window of 3 keys" in window.code_panel.code.toPlainText()
    path = tmp_path / "band.json"
    assert window.files.save_to(path)
    assert json.loads(path.read_text(encoding="utf-8"))["options"]["window"] == 3
    window.session.set_option("window", 0)
    assert spin.text() == "no window"
    assert np.isfinite(window.results.result.masked[0, 0]).sum() == 21  # causal: 6·7/2
    assert window.files.open_path(path)
    settle()
    assert spin.value() == 3 and spin.isEnabled()
    np.testing.assert_array_equal(np.isfinite(window.results.result.masked[0, 0]), band)
