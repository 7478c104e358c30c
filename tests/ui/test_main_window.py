"""The explorer window driven as a user drives it (offscreen)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit
from qt_idle import settle

from attn_explorer.compute import STRATEGIES
from attn_explorer.state.colormaps import lut
from attn_explorer.ui.common.workers import LatestRunner
from attn_explorer.ui.window.main_window import MainWindow

S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]


def type_into_cell(qtbot, table, row, col, text):
    """Open the cell's editor, type like a user, press Enter, wait for the commit."""
    index = table.model().index(row, col)
    table.setCurrentIndex(index)
    table.edit(index)
    editor = table.findChild(QLineEdit)
    assert editor is not None and editor.isVisible()
    editor.selectAll()
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    settle()  # the delegate's commit is queued


def grid_numbers(window):
    return [[float(x) for x in row] for row in window.score_grid.text_grid()]


def test_opens_on_worked_example(window):
    assert window.session.tokens == ["t1", "t2", "t3"]
    assert grid_numbers(window) == S
    assert "rows = query i, columns = key j" in window.score_grid.axes.text()
    assert "B=1, H=1, T=3, d=2" in window.shape_label.text()
    assert window.heatmaps.plots[0].titleLabel.text == "head 1"


def test_typing_q1_changes_scores_row_and_heatmap(qtbot, window):
    table = window.tables["query"]
    before = window.heatmaps.images[0].image.copy()
    with qtbot.waitSignal(table.model().dataChanged, timeout=2000):
        type_into_cell(qtbot, table, 0, 0, "2")
    assert window.session.head_matrix("query")[0].tolist() == [2.0, 0.0]
    assert grid_numbers(window)[0] == [2, 0, 2]
    assert window.results.result is not None
    assert window.results.result.scores[0, 0, 0].tolist() == [2.0, 0.0, 2.0]
    after = window.heatmaps.images[0].image
    assert not np.array_equal(before, after)


@pytest.mark.slow
def test_full_precision_is_kept(qtbot, window):
    table = window.tables["key"]
    with qtbot.waitSignal(table.model().dataChanged, timeout=2000):
        type_into_cell(qtbot, table, 1, 1, "0.1234567890123")
    assert window.session.head_matrix("key")[1, 1] == 0.1234567890123


@pytest.mark.parametrize("text", ["abc", "nan", "inf", "1,5"])
@pytest.mark.slow
def test_bad_text_is_rejected_with_a_message_naming_the_cell(qtbot, window, text):
    table = window.tables["query"]
    type_into_cell(qtbot, table, 1, 0, text)
    assert window.session.head_matrix("query")[1, 0] == 0.0
    message = window.statusBar().currentMessage()
    assert "Q[t2, d1]" in message
    assert "kept the old value" in message
    assert grid_numbers(window) == S
    assert not window.session.can_undo()


@pytest.mark.slow
def test_each_strategy_gives_identical_results(qtbot, window):
    window.commands.load_preset("random", heads=3, tokens=6, dim=4, seed=3)
    results = {}
    for name in STRATEGIES:
        qtbot.mouseClick(window.strategy_toggle.buttons[name], Qt.MouseButton.LeftButton)
        assert window.session.options.strategy == name
        assert window.results.used == name
        results[name] = window.results.result.scores.copy()
        assert f"computed with <b>{name}</b>" in window.code_panel.provenance.text()
    np.testing.assert_allclose(results["loop"], results["batched"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results["matmul"], results["batched"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results["tiled"], results["batched"], rtol=1e-12, atol=1e-12)
    qtbot.waitUntil(lambda: bool(window.results.diffs), timeout=5000)  # checked in the background
    assert set(window.results.diffs) == {"loop", "matmul", "batched"}  # tiled was chosen last
    assert max(window.results.diffs.values()) < 1e-9
    assert "they agree" in window.code_panel.provenance.text()


def test_keys_1_2_3_4_switch_strategy(qtbot, window):
    window.heatmaps.setFocus()
    keys = (Qt.Key.Key_1, Qt.Key.Key_2, Qt.Key.Key_3, Qt.Key.Key_4)
    for key, name in zip(keys, STRATEGIES, strict=True):
        window.menu_actions.strategies[name].trigger()
        assert window.session.options.strategy == name
        assert window.menu_actions.strategies[name].shortcut().toString() == chr(key)


@pytest.mark.slow
def test_code_panel_shows_the_compute_source(window):
    import inspect

    from attn_explorer.compute import strategies, tiled

    for name in STRATEGIES:
        source = inspect.getsource(tiled if name == "tiled" else strategies)
        window.commands.set_strategy(name)
        text = window.code_panel.code.toPlainText()
        assert text.strip()
        code = text.split("\n\n# The grid on screen")[0]  # tiled: a note on the shown grid
        for line in code.splitlines():
            assert line.strip() in source
    window.commands.set_strategy("loop")
    assert "total += Q[i][d] * K[j][d]" in window.code_panel.code.toPlainText()


@pytest.mark.slow
def test_paste_block_then_undo_redo(qtbot, window):
    table = window.tables["key"]
    table.setCurrentIndex(table.model().index(1, 0))
    QApplication.clipboard().setText("5\t6\n7, 8\n")
    assert table.paste()
    assert window.session.head_matrix("key").tolist() == [[1, 0], [5, 6], [7, 8]]
    assert grid_numbers(window)[0] == [1, 5, 7]
    window.menu_actions.undo.trigger()
    assert window.session.head_matrix("key").tolist() == [[1, 0], [0, 1], [1, 1]]
    assert grid_numbers(window) == S
    window.menu_actions.redo.trigger()
    assert window.session.head_matrix("key")[2].tolist() == [7, 8]


def test_paste_that_does_not_fit_or_is_not_numbers_keeps_state(window):
    table = window.tables["key"]
    table.setCurrentIndex(table.model().index(2, 1))
    assert not table.paste("1 2\n3 4")
    assert "does not fit" in window.statusBar().currentMessage()
    assert not table.paste("1 x")
    assert "not a number" in window.statusBar().currentMessage()
    assert grid_numbers(window) == S


def test_copy_selection_full_precision(qtbot, window):
    window.session.set_cell("query", 0, 1, 0.1 + 0.2)
    table = window.tables["query"]
    table.selectAll()
    text = table.copy_selection()
    assert text.splitlines()[0] == "1\t0.30000000000000004"
    assert QApplication.clipboard().text() == text


@pytest.mark.slow
def test_resize_and_undo_through_size_controls(qtbot, window):
    controls = window.size_controls
    controls.spins["T"].setValue(5)
    controls.spins["H"].setValue(2)
    controls.apply()
    assert window.session.shape == (1, 2, 5, 2)
    assert window.tables["query"].model().rowCount() == 5
    assert len(window.heatmaps.plots) == 2
    window.menu_actions.undo.trigger()
    assert window.session.shape == (1, 1, 3, 2)
    assert grid_numbers(window) == S


def test_over_limit_resize_is_refused_and_state_kept(window):
    assert not window.session.resize(tokens=9000)
    assert "over the limit" in window.statusBar().currentMessage()
    assert window.session.shape == (1, 1, 3, 2)


@pytest.mark.parametrize(
    "name", ["worked", "exercise", "identity", "duplicates", "large-norms", "causal"]
)
@pytest.mark.slow
def test_presets_load_and_show(window, name):
    assert window.commands.load_preset(name)
    assert window.results.result is not None
    t = window.session.shape[2]
    assert window.tables["key"].model().rowCount() == t
    if name == "exercise":
        assert window.results.result.scores[0, 0, 1, 3] == 0.0
    if name == "identity":
        assert grid_numbers(window) == np.eye(4).tolist()


def test_causal_toggle_hides_upper_triangle(window):
    window.session.set_option("stage", "weights")
    window.options_bar.causal.setChecked(True)
    weights = window.results.result.weights[0, 0]
    assert np.all(np.triu(weights, 1) == 0)
    assert window.score_grid.text_grid()[0][1] == "0.00"


def test_table_models_pass_qtmodeltester(qtmodeltester, window):
    qtmodeltester.check(window.tables["query"].model())
    qtmodeltester.check(window.score_grid.model)


@pytest.mark.slow
def test_large_size_computes_in_worker_and_stays_responsive(qtbot, window):
    window.commands.load_preset("random", heads=4, tokens=512, dim=16, seed=1)
    assert window.score_grid.note.isVisible() or window.score_grid.table.isHidden()
    qtbot.waitUntil(
        lambda: window.results.result is not None and window.results.result.scores.shape[-1] == 512,
        timeout=10000,
    )
    assert len(window.heatmaps.plots) == 4
    assert window.heatmaps.images[0].image.shape[0] <= 256  # downsampled to screen pixels


@pytest.mark.slow
def test_loop_on_big_shape_falls_back_with_a_message(qtbot, window):
    window.commands.load_preset("random", heads=8, tokens=512, dim=64, seed=1)
    window.commands.set_strategy("loop")
    qtbot.waitUntil(
        lambda: window.results.result is not None and window.results.result.scores.shape[-1] == 512,
        timeout=15000,
    )
    assert window.results.used == "batched"
    assert "loop would take about" in window.code_panel.provenance.text()


def test_stale_worker_results_are_dropped(qtbot):
    runner = LatestRunner()
    got = []
    runner.finished.connect(got.append)

    def slow(progress, should_stop):
        import time

        time.sleep(0.2)
        return "old"

    runner.submit(slow)
    runner.submit(lambda p, s: "new")
    qtbot.waitUntil(lambda: runner.dropped >= 1 and bool(got), timeout=3000)
    assert got == ["new"]


def test_worker_cancel(qtbot):
    from attn_explorer.compute import Cancelled

    runner = LatestRunner()
    cancelled = []
    runner.cancelled.connect(lambda: cancelled.append(True))

    def job(progress, should_stop):
        import time

        for _ in range(200):
            if should_stop():
                raise Cancelled()
            time.sleep(0.005)
        return "done"

    runner.submit(job)
    runner.cancel()
    assert cancelled == [True]
    assert not runner.is_busy()


def test_worker_error_is_reported(qtbot):
    runner = LatestRunner()
    with qtbot.waitSignal(runner.failed, timeout=2000) as blocker:
        runner.submit(lambda p, s: 1 / 0)
    assert "ZeroDivisionError" in blocker.args[0]


@pytest.mark.slow
def test_grab_shows_colour_map_extremes(qtbot, window):
    window.commands.load_preset("large-norms")  # softmax saturates: weights ≈ 1 and ≈ 0
    window.session.set_option("stage", "weights")
    settle()
    image = window.grab().toImage()
    assert not image.isNull()
    table = lut("sequential")
    colours = set()
    for y in range(0, image.height(), 3):
        for x in range(0, image.width(), 3):
            c = image.pixelColor(x, y)
            colours.add((c.red(), c.green(), c.blue()))
    assert len(colours) > 50  # not blank
    assert tuple(int(v) for v in table[0]) in colours
    assert tuple(int(v) for v in table[-1]) in colours


def test_hover_text_shows_working(window):
    text = window.score_grid.model.working(2, 2)
    assert "1·1 + 1·1 = 2" in text
    assert "query t3" in text and "key t3" in text
    described = window.heatmaps.describe(0, 0, 1)
    assert "head 1" in described and "key t2" in described and "0" in described


def test_title_shows_unsaved_changes(window):
    assert "*" not in window.windowHandle().title()
    window.session.set_cell("query", 0, 0, 3.0)
    assert "*" in window.windowHandle().title()


@pytest.mark.slow
def test_per_head_colour_scale_and_enlarge(window):
    window.commands.load_preset("random", heads=4, tokens=6, dim=3, seed=2)
    window.session.set_option("shared_scale", False)
    assert len(window.heatmaps.bars) == 4
    ranges = window.heatmaps.ranges
    assert len(set(ranges)) > 1
    window.heatmaps.set_enlarged(2)
    assert len(window.heatmaps.plots) == 1
    assert window.heatmaps.plots[0].titleLabel.text == "head 3"


def test_deferred_plots_are_built_after_first_paint(qtbot):
    w = MainWindow(defer_plots=True)
    w.files.ask_before_discard = False
    qtbot.addWidget(w)
    assert w.heatmaps is None and w.timing_panel is None
    w.show()
    qtbot.waitUntil(lambda: w.heatmaps is not None, timeout=5000)
    assert w.heatmaps.plots[0].titleLabel.text == "head 1"
    assert w.heatmaps.images[0].image.shape[:2] == (3, 3)
    assert w.timing_panel is None  # its dock is behind the stepper's tab
    w.timing_dock.raise_()
    qtbot.waitUntil(lambda: w.timing_panel is not None, timeout=5000)
    assert w.timing_dock.widget() is w.timing_panel


@pytest.mark.slow
def test_many_heads_are_thumbnails_and_wide_tables_scroll(qtbot, window):
    window.commands.load_preset("random", heads=8, tokens=6, dim=12, seed=4)
    plots = window.heatmaps.plots
    assert len(plots) == 8
    assert plots[0].getAxis("left") is None  # thumbnails: no crowded axes
    assert "rows = query i, columns = key j" in window.heatmaps.hover.text()
    header = window.tables["query"].horizontalHeader()
    assert header.sectionSize(0) >= 56  # numbers stay readable; the table scrolls
    window.commands.load_preset("worked")
    assert window.heatmaps.plots[0].getAxis("left").isVisible()


def test_new_token_count_for_the_same_heads_reuses_the_plots(window):
    window.commands.load_preset("random", heads=2, tokens=4, dim=3, seed=1)
    plots = list(window.heatmaps.plots)
    window.session.resize(tokens=6)
    assert window.heatmaps.plots == plots  # updated in place, not rebuilt
    assert window.heatmaps.images[0].image.shape[:2] == (6, 6)
    rect = window.heatmaps.images[0].mapRectToParent(window.heatmaps.images[0].boundingRect())
    assert (rect.width(), rect.height()) == (6, 6)
    ticks = plots[0].left._tickLevels[0]
    assert [label for _, label in ticks][-1] == window.session.tokens[-1]


def test_the_code_panel_shows_the_lines_that_made_the_chosen_stage(qtbot, window):
    """Choosing a stage in the toolbar shows, under the strategy's lines for S, the lines
    that turn S into that stage, highlighted."""
    from attn_explorer.compute import stage_source

    combo = window.options_bar.stage
    code = window.code_panel.code
    assert "softmax_rows" not in code.toPlainText()
    combo.setCurrentIndex(combo.findData("weights"))
    qtbot.waitUntil(lambda: "softmax_rows(scores" in code.toPlainText())
    assert stage_source("weights") in code.toPlainText()
    assert "np.matmul(query, key_t, out=out)" in code.toPlainText()  # the batched S is still shown
    assert len(code.extraSelections()) == stage_source("weights").count("\n") + 1
    combo.setCurrentIndex(combo.findData("scores"))
    qtbot.waitUntil(lambda: "softmax_rows" not in code.toPlainText())
    assert code.extraSelections() == []


@pytest.mark.slow
def test_secondary_text_is_readable_in_the_dark_palette(qtbot, window):
    """View ▸ Dark palette: the dimmed text (placeholders, the stepper's timings) keeps a
    contrast with the window background a reader can see."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    window.menu_actions.dark.trigger()
    try:
        palette = QApplication.instance().palette()
        dim = palette.color(QPalette.ColorRole.PlaceholderText).lightness()
        back = palette.color(QPalette.ColorRole.Window).lightness()
        assert dim - back >= 90
    finally:
        window.menu_actions.dark.trigger()


def test_the_masked_stage_without_a_mask_shows_no_masking_line(qtbot, window):
    """Causal off: the masked stage is the scaled one, and the code panel says so instead of
    highlighting an np.where that did not run."""
    combo = window.options_bar.stage
    code = window.code_panel.code
    combo.setCurrentIndex(combo.findData("masked"))
    qtbot.waitUntil(lambda: "masked = scaled" in code.toPlainText())
    assert "np.where" not in code.toPlainText()
    window.options_bar.causal.click()
    qtbot.waitUntil(lambda: "np.where(self.keep" in code.toPlainText())
