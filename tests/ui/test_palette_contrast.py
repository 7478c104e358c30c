"""Issue 23, defect 5: switching the palette leaves no label in the old palette's colours.

Measured on the window's pixels (``attn_explorer.tools.label_contrast``): every visible
label's text contrasts at least 4.5 : 1 (WCAG 2) with what is behind it, after dark → light
→ dark. Before the fix the labels with a style sheet (the grid title, the lesson title, the
"You changed the example…" note, the stepper's "measured per call" line) kept the palette
they were polished with: 1.1–1.5 : 1.
"""

from __future__ import annotations

import pytest
from qt_idle import settle

from attn_explorer.lessons.engine import RESTORED_NOTE
from attn_explorer.tools.label_contrast import contrast_ratio, label_contrasts, low_contrast


def test_the_contrast_formula_matches_wcag():
    """WCAG's own reference points: black on white is 21 : 1, #777 on white about 4.48 : 1."""
    assert contrast_ratio((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast_ratio((119, 119, 119), (255, 255, 255)) == pytest.approx(4.48, abs=0.01)
    assert contrast_ratio((10, 20, 30), (10, 20, 30)) == pytest.approx(1.0)


def test_the_measure_sees_a_label_that_cannot_be_read(qtbot):
    """The measure itself: light grey text on the light window is reported, black is not."""
    from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

    top = QWidget()
    qtbot.addWidget(top)
    layout = QVBoxLayout(top)
    faint, plain = QLabel("faint text here"), QLabel("plain text here")
    faint.setStyleSheet("color: rgb(225, 225, 225)")
    layout.addWidget(faint)
    layout.addWidget(plain)
    top.show()
    qtbot.waitExposed(top)
    problems = low_contrast(top)
    assert len(problems) == 1 and "faint text" in problems[0], problems


@pytest.mark.slow
def test_every_label_is_readable_after_dark_light_dark(qtbot, window):
    window.lessons_dock.open()
    panel = window.lessons
    panel.start_lesson("02-loop-visits-every-pair", 2)
    window.session.set_cell("query", 0, 0, 5.0)
    panel.next()  # the lesson puts its numbers back and says so
    assert panel.note.isVisible() and panel.note.text() == RESTORED_NOTE
    window.stepper_dock.raise_()
    qtbot.waitUntil(lambda: "measured per call" in _texts(window.stepper), timeout=10_000)
    try:
        for dark in (False, True, False, True):  # as launched, then switched both ways
            if window.menu_actions.dark.isChecked() != dark:
                window.menu_actions.dark.trigger()
            settle()
            seen = label_contrasts(window)
            for part in ("scores S", "measured per call", "You changed", "2. "):
                assert any(part in name for name in seen), (part, list(seen))
            assert low_contrast(window) == [], "dark" if dark else "light"
    finally:
        if window.menu_actions.dark.isChecked():
            window.menu_actions.dark.trigger()


def _texts(widget) -> str:
    from PySide6.QtWidgets import QLabel

    return " ".join(label.text() for label in widget.findChildren(QLabel))


def test_a_switch_repolishes_the_shown_windows_and_leaves_closed_ones_alone(qtbot, monkeypatch):
    """A style-sheet label of a shown window (and of its hidden dialog) gets the new palette;
    a closed window's tree is not walked (a new window restoring the palette crashed in one)."""
    from PySide6.QtWidgets import QDialog, QLabel, QVBoxLayout, QWidget

    from attn_explorer.ui.common import palette

    def window_with_label():
        top = QWidget()
        label = QLabel("text", top)
        label.setStyleSheet("padding: 2px")
        QVBoxLayout(top).addWidget(label)
        qtbot.addWidget(top)
        return top, label

    shown, shown_label = window_with_label()
    dialog = QDialog(shown)  # hidden, parented to the shown window
    dialog_label = QLabel("dialog", dialog)
    dialog_label.setStyleSheet("padding: 2px")
    shown.show()
    qtbot.waitExposed(shown)
    closed, closed_label = window_with_label()
    closed.show()
    qtbot.waitExposed(closed)
    closed.close()
    touched = []
    real = QLabel.setStyleSheet
    monkeypatch.setattr(
        QLabel, "setStyleSheet", lambda self, sheet: (touched.append(self), real(self, sheet))[1]
    )
    try:
        palette.apply(True)
        assert shown_label in touched and dialog_label in touched
        assert closed_label not in touched
        assert shown_label.styleSheet() == "padding: 2px"  # the sheet itself kept
    finally:
        monkeypatch.undo()
        palette.apply(False)
