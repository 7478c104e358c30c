"""Journey of issue 23 (item 11): after a crash, a notice says what was recovered and from when,
and a button discards it."""

from __future__ import annotations

import time
from itertools import pairwise

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLabel, QWidget
from qt_idle import settle

from attn_explorer.lessons.engine import check_expectation
from attn_explorer.ui.window.file_commands import autosave_path, when_text
from tests.ui.journeys.test_journeys import WORKED_S, restart

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier


def crash_with_an_edit(user, qtbot, path) -> float:
    """Save ``path``, change a cell, wait for the autosave, die. Returns the autosave's time."""
    user.pick_file(path)
    user.press(Qt.Key.Key_S, CTRL, widget=user.window)
    user.type_cell("query", 2, 1, "7")
    qtbot.waitUntil(autosave_path().exists, timeout=5000)
    stamp = autosave_path().stat().st_mtime
    user.window.shutdown()  # the process dies here: no question, no clean-up
    return stamp


def test_recovery_notice_says_what_and_when_and_discard_reopens_the_file(user, qtbot, tmp_path):
    stamp = crash_with_an_edit(user, qtbot, tmp_path / "session1.json")
    again = restart(qtbot)
    notice = again.files.notice
    assert notice is not None and notice.isVisible()
    text = notice.label.text()
    assert text.startswith("Recovered unsaved changes to session1 (T = 3 tokens, H = 1, d = 2)")
    assert f"autosaved {when_text(stamp)}" in text and "today at" in text
    assert str(tmp_path / "session1.json") in text
    assert again.windowHandle().title() == "session1*"
    qtbot.mouseClick(notice.discard_button, Qt.MouseButton.LeftButton)
    assert not notice.isVisible()
    assert again.windowHandle().title() == "session1" and not again.isWindowModified()
    assert [[float(c) for c in row] for row in again.score_grid.text_grid()] == WORKED_S
    assert not autosave_path().exists()
    assert "Discarded the recovered changes" in again.statusBar().currentMessage()


def test_keep_hides_the_notice_and_the_changes_stay_unsaved(user, qtbot, tmp_path):
    crash_with_an_edit(user, qtbot, tmp_path / "session1.json")
    again = restart(qtbot)
    notice = again.files.notice
    qtbot.mouseClick(notice.keep_button, Qt.MouseButton.LeftButton)
    assert not notice.isVisible()
    assert again.session.head_matrix("query")[2, 1] == 7.0 and again.isWindowModified()


def test_when_text_names_the_day_unless_it_is_today():
    now = time.mktime((2026, 12, 1, 14, 30, 0, 0, 0, -1))
    assert when_text(now - 600, now) == "today at 14:20"
    assert when_text(now - 86_400, now) == "on 30 Nov 2026 at 14:30"


def overlaps_in(pane: QWidget) -> list[str]:
    """What the user would see run together in ``pane``: two of its shown parts sharing
    rows (their tops and heights in the pane's coordinates), or a wrapped label given less
    height than its lines need."""
    shown = [
        w
        for w in pane.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        if w.isVisible()
    ]
    spans = sorted(
        ((w.mapTo(pane, QPoint(0, 0)).y(), w.height(), w) for w in shown), key=lambda s: s[0]
    )
    problems = []
    for (top, height, upper), (below, _, lower) in pairwise(spans):
        if top + height > below:
            problems.append(f"{_name(upper)} runs {top + height - below} px into {_name(lower)}")
    for label in shown:
        if isinstance(label, QLabel) and label.wordWrap():
            need = label.heightForWidth(label.width())
            if label.height() < need:
                problems.append(f"{_name(label)} has {label.height()} of the {need} px it needs")
    return problems


def _name(widget: QWidget) -> str:
    text = widget.text()[:30] if isinstance(widget, QLabel) else ""
    return f"{type(widget).__name__} {text!r}"


def test_the_notice_on_a_1000_x_650_window_leaves_the_grid_its_wrapped_lines(user, qtbot):
    """The notice's two lines took the room of the score grid's: at 1000 × 650 its pane got
    less than its wrapped labels need, and the axes line ran over the grid's note (T > 16)."""
    user.set_size("T", 20)  # unsaved work: the autosave keeps it
    qtbot.waitUntil(autosave_path().exists, timeout=5000)
    user.window.shutdown()  # the process dies here
    again = restart(qtbot)
    again.resize(1000, 650)
    settle()
    assert again.files.notice is not None and again.files.notice.isVisible()
    bar = again.statusBar()
    message = bar.currentMessage()  # the status bar says it too, and all of it is readable:
    assert message.startswith("Recovered unsaved changes") and message.endswith("discard them.")
    shapes = again.shape_label  # the shapes give way while it is shown: Q, K, V's only
    assert shapes.isVisible() and shapes.text() == "Q, K, V: (B=1, H=1, T=20, d=2)"
    assert "S = Q Kᵀ: (B=1, H=1, T_q=20, T_k=20)" in shapes.toolTip()  # the whole, on hover
    # a lesson that checks the shapes still reads them whole
    found = check_expectation(again.commands, {"check": "shape_text", "contains": "T_k=20"})
    assert found == ""
    assert bar.fontMetrics().horizontalAdvance(message) < shapes.geometry().left()
    grid = again.score_grid
    assert grid.note.isVisible() and "up to 16 tokens" in grid.note.text()
    assert overlaps_in(grid) == []
    tokens = again.size_controls.spins["T"]  # T ≤ 16: the numeric grid under the axes line
    tokens.setFocus()
    tokens.selectAll()
    qtbot.keyClicks(tokens, "3")
    qtbot.keyClick(tokens, Qt.Key.Key_Return)
    settle()
    assert again.session.shape[2] == 3
    assert again.files.notice.isVisible() and grid.table.isVisible()
    assert overlaps_in(grid) == []
    again.resize(1280, 720)
    settle()
    assert overlaps_in(grid) == []
    bar.clearMessage()  # the message's time is up: the shapes are whole again
    assert shapes.text() == again.session.shape_text() and "T_k=3" in shapes.text()


def test_a_short_message_leaves_the_shapes_where_they_are(window):
    window.session.events.message.emit("Saved.", "info")
    assert window.statusBar().currentMessage() == "Saved."
    assert window.shape_label.text() == window.session.shape_text()
