"""Journey of issue 23 (item 11): the greyed Step by box shows what a step covers."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.journey


def step_by(user) -> tuple[str, bool]:
    """The Step by box as the user reads it: its text (the placeholder when nothing is
    chosen) and whether it can be changed."""
    combo = user.window.stepper.granularity_combo
    text = combo.currentText() if combo.currentIndex() >= 0 else combo.placeholderText()
    return text, combo.isEnabled()


def test_step_by_box_shows_the_unit_of_the_strategy(user):
    user.choose("View", "Strategy: loop")
    user.window.stepper_dock.raise_()
    combo = user.window.stepper.granularity_combo
    combo.setFocus()
    user.press(Qt.Key.Key_Down, widget=combo)  # multiply-add → cell
    assert step_by(user) == ("cell", True)
    assert user.window.session.options.granularity == "cell"
    user.choose("View", "Strategy: matmul")
    assert step_by(user) == ("head", False)  # matmul steps by head, not by the loop's cell
    assert "one step is one head" in combo.toolTip()
    user.choose("View", "Strategy: batched")
    assert step_by(user) == ("whole run", False)
    user.choose("View", "Strategy: loop")
    assert step_by(user) == ("cell", True)  # the loop's choice was kept
    assert user.window.session.options.granularity == "cell"
    assert "nothing" not in user.status() and "not one of" not in user.status()
