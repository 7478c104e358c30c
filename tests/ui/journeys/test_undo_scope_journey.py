"""Journeys of issue 23, defects 1 and 2: what Undo covers, and the modified mark.

The rule (docs/guide/sessions.md, "What Undo covers"): Undo and Redo cover the numbers and
the shape — cell edits, pastes, drags, tokens, B/H/T/d, and loading a preset, an example or a
lesson's numbers. View settings — stage, 1/√d, causal, strategy, head, shared
scale, the step-through position — are not edits: they survive Undo and Redo.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.ui.journeys.test_journeys import WORKED_S, focus_stepper

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def view_settings(user) -> tuple:
    """What the user sees of the view settings: the toolbar, the View menu, the stepper."""
    bar = user.window.options_bar
    checked = [name for name, a in user.window.menu_actions.strategies.items() if a.isChecked()]
    return (
        bar.stage.currentText(),
        bar.causal.isChecked(),
        bar.scale.isChecked(),
        checked,
        user.window.stepper.counter_label.text(),
    )


def test_undo_keeps_stage_causal_strategy_and_step_and_redo_restores_the_numbers(user):
    user.choose("Presets", "Worked example")
    user.press(Qt.Key.Key_4, CTRL, widget=user.window)  # the weights stage
    user.click(user.window.options_bar.causal)  # causal on
    user.choose("View", "Strategy: loop")
    focus_stepper(user)
    for _ in range(5):
        user.press(Qt.Key.Key_Right)
    settings = view_settings(user)
    assert settings[:4] == ("softmax weights", True, False, ["loop"]), settings
    assert settings[4].startswith("multiply-add 5 of"), settings
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)  # undoes the preset's numbers only
    assert view_settings(user) == settings
    assert user.window.session.options.step == 4
    user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=user.window)
    assert view_settings(user) == settings


def test_undo_of_a_preset_brings_back_the_numbers_not_the_old_view(user):
    user.choose("Presets", "Identity")
    assert user.grid_numbers() == np.eye(4).tolist()
    user.press(Qt.Key.Key_3, CTRL, widget=user.window)  # masked scores
    user.click(user.window.options_bar.causal)
    user.choose("View", "Strategy: matmul")
    settings = view_settings(user)
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.window.session.shape == (1, 1, 3, 2)  # the worked example's numbers are back
    assert view_settings(user) == settings  # and the view the user chose since is kept
    user.assert_grid_is_the_result()
    # Identity's 1/√d stays on too: the worked example's scores, scaled and masked.
    assert user.grid() == [["0.7071", "−∞", "−∞"], ["0", "0.7071", "−∞"],
                           ["0.7071", "0.7071", "1.414"]]  # fmt: skip
    user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=user.window)
    assert user.window.session.shape == (1, 1, 4, 4)
    assert view_settings(user) == settings
    user.assert_grid_is_the_result()


def test_undoing_back_to_the_saved_numbers_clears_the_mark_and_quit_does_not_ask(user, tmp_path):
    user.pick_file(tmp_path / "mine.json")
    user.press(Qt.Key.Key_S, CTRL | SHIFT, widget=user.window)
    assert user.title() == "mine"
    user.type_cell("query", 0, 0, "2")
    user.set_size("T", 4)
    assert user.title() == "mine*"
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.title() == "mine*"  # the edit of Q is still there
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.title() == "mine" and not user.window.isWindowModified()
    assert user.grid_numbers() == WORKED_S
    user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=user.window)  # redo past the saved state
    assert user.title() == "mine*"
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.title() == "mine"
    user.choose("View", "Strategy: matmul")  # the file keeps the strategy: a change of it
    assert user.title() == "mine*"
    user.choose("View", "Strategy: batched")  # as saved again
    assert user.title() == "mine"
    user.press(Qt.Key.Key_Q, CTRL, widget=user.window)
    assert not user.window.isVisible()  # closed without asking to save an unchanged file
    assert user.dialogs_seen == ["Save session"]
