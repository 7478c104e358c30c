"""Keyboard only (issue 23, defect 6): no mouse event anywhere, every key pressed on the widget
that has the keyboard (or on the window, or on the dialog in front), and what the screen
shows asserted after each step."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QFileDialog, QLineEdit, QMessageBox

from attn_explorer.state.storage.export import DEFAULT_WIDTH

Key = Qt.Key
CTRL, ALT = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.AltModifier


def focused():
    return QApplication.focusWidget()


def test_keyboard_only_cell_strategy_stage_step_and_export(user, tmp_path):
    """Launch → change a cell → strategy → stage → step the loop → export a PNG, by keys."""
    w = user.window
    # F6 from the start: the toolbar, the explorer's views, then the inputs (the B box).
    for _ in range(3):
        user.press(Key.Key_F6)
        if focused() is w.size_controls.spins["B"]:
            break
    assert focused() is w.size_controls.spins["B"]
    for _ in range(8):  # Tab on through H, T, d and the fill box to the Q table
        user.press(Key.Key_Tab)
        if focused() is w.tables["query"]:
            break
    assert focused() is w.tables["query"]
    assert w.tables["query"].currentIndex().row() == 0  # Tab put the cursor on Q's first cell
    user.press(Key.Key_Right)  # to Q[t1, d2]
    user.type_text("3")
    editor = w.tables["query"].findChild(QLineEdit)
    assert editor is not None and editor.isVisible() and editor is focused()
    user.press(Key.Key_Return)  # the commit is queued: wait for the editor to close
    table = w.tables["query"]
    user.qtbot.waitUntil(lambda: table.findChild(QLineEdit) is None or
                         not table.findChild(QLineEdit).isVisible(), timeout=2000)  # fmt: skip
    user.settle()
    assert w.session.matrix("query")[0, 0, 0, 1] == 3.0
    assert w.tables["query"].model().index(0, 1).data() == "3"
    user.assert_grid_is_the_result()
    assert user.title().endswith("*")

    # Strategy: Escape gives the keyboard back, then the bare key 1 is the loop.
    user.press(Key.Key_Escape)
    assert not w.tables["query"].hasFocus()
    user.press(Key.Key_1)
    assert w.session.options.strategy == "loop" and w.strategy_toggle.buttons["loop"].isChecked()

    # Stage: Ctrl+4, the softmax weights, in the toolbar's box and the grid.
    user.press(Key.Key_4, CTRL)
    assert w.session.options.stage == "weights"
    assert w.options_bar.stage.currentText() == "softmax weights"
    user.assert_grid_is_the_result()
    rows = np.array(user.grid_numbers(), dtype=float)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=0.016)  # each row sums to 1 (2 dp shown)

    # Step the loop: F6 to the stepper, Right three times.
    for _ in range(6):
        user.press(Key.Key_F6)
        if focused() is w.stepper or w.stepper.isAncestorOf(focused()):
            break
    assert focused() is w.stepper or w.stepper.isAncestorOf(focused())
    if focused() is not w.stepper:
        user.press(Key.Key_Escape)  # a control of the panel: give it back, then to the panel
        for _ in range(6):
            user.press(Key.Key_F6)
            if focused() is w.stepper:
                break
    for _ in range(3):
        user.press(Key.Key_Right)
    frame = w.stepper.frame()
    assert frame is not None and frame.index == 2
    assert w.stepper.scrub_slider.value() == 3
    assert w.stepper.counter_label.text()

    # Export: Ctrl+E, Enter takes the form's defaults (current head, PNG, 1600 px), then the
    # file name typed into the file dialog and Enter.
    target = tmp_path / "keyboard-only.png"

    def form_by_keys(dialog) -> bool:
        user.qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=2000)
        user.qtbot.keyClick(dialog.focusWidget() or dialog, Key.Key_Return)
        return True

    def file_by_keys(dialog) -> bool:
        assert isinstance(dialog, QFileDialog)
        user.qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=2000)
        box = dialog.focusWidget()
        assert isinstance(box, QLineEdit), "the file name box has the keyboard"
        user.qtbot.keyClick(box, Key.Key_A, CTRL)
        user.qtbot.keyClicks(box, str(target))
        user.qtbot.keyClick(box, Key.Key_Return)
        return True

    from PySide6.QtWidgets import QDialog

    user.answer(QDialog, form_by_keys)
    user.answer(QFileDialog, file_by_keys)
    user.press(Key.Key_E, CTRL)
    user.qtbot.waitUntil(target.exists, timeout=10_000)
    user.settle()
    assert user.dialogs_seen[-2:] == ["Export heatmap", "Export heatmap"]
    image = QImage(str(target))
    assert not image.isNull() and image.width() == DEFAULT_WIDTH
    assert f"Exported {target}" in user.status()


def test_alt_d_discards_in_the_save_question(user):
    """Failed before the fix: the buttons had no mnemonics, Alt+D did nothing."""
    user.type_cell("query", 0, 0, "7")
    assert user.title().endswith("*")
    texts = []

    def discard_by_keyboard(dialog) -> bool:
        texts.extend(b.text() for b in dialog.buttons())
        user.qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=2000)
        user.qtbot.keyClick(dialog, Key.Key_D, ALT)
        return True

    user.answer(QMessageBox, discard_by_keyboard)
    user.press(Key.Key_N, CTRL, widget=user.window)
    user.qtbot.waitUntil(lambda: QApplication.activeModalWidget() is None, timeout=3000)
    user.settle()
    assert {"&Save", "&Discard", "&Cancel"} <= set(texts)
    assert not user.title().endswith("*")
    assert user.window.session.matrix("query")[0, 0, 0, 0] != 7.0
