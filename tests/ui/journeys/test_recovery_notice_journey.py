"""Journey of issue 23 (item 11): after a crash, a notice says what was recovered and from when,
and a button discards it."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt

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
