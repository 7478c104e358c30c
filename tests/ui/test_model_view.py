"""The Model dock through the user's hands: type, see the grid, pick a head, take it."""

import itertools

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFontMetrics
from qt_idle import settle

from attn_explorer.models import load_model
from attn_explorer.models.take_head import explorer_inputs, head_title
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.ui.model.model_grid import CELL_GAP_PX, HEAD_LABEL_PX
from attn_explorer.ui.model.model_view import ModelView


@pytest.fixture
def tiny_dir(tmp_path):
    return write_tiny_bert(tmp_path / "tiny-bert")


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    widget = ModelView()
    qtbot.addWidget(widget)
    yield widget
    widget.shutdown()


def wait_idle(qtbot, view):
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)


def test_typing_a_sentence_updates_the_grid(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    qtbot.keyClicks(view.sentence_edit, "the cat sat")
    assert view.busy  # debounced, not computed per key
    with qtbot.waitSignal(view.resultChanged, timeout=10_000):
        pass
    wait_idle(qtbot, view)
    result = view.result
    assert result.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert len(view._thumbnails) == 4  # 2 layers × 2 heads
    _, item = view._thumbnails[(1, 1)]
    np.testing.assert_array_equal(item.image, result.weights[1, 1])
    assert view.summary_table.rowCount() == 2 and view.summary_table.columnCount() == 2
    assert "5 tokens" in view.status_label.text()

    view.sentence_edit.setText("the dog ran on the mat")
    qtbot.waitUntil(lambda: view.result is not result and not view.busy, timeout=10_000)
    assert view.result.tokens[1:3] == ["the", "dog"]
    _, item = view._thumbnails[(0, 0)]
    assert item.image.shape == (8, 8)


@pytest.mark.slow
def test_scores_toggle_uses_raw_scores_centred_at_zero(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None, timeout=10_000)
    view.set_show_scores(True)
    _, item = view._thumbnails[(0, 1)]
    np.testing.assert_array_equal(item.image, view.result.scores[0, 1])
    low, high = item.levels
    assert low == -high and high == pytest.approx(np.abs(view.result.scores).max())


def test_click_enlarges_and_take_head_emits_the_arrays(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat", "on the mat")
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    view.summary_table.cellClicked.emit(1, 0)  # a click on the table picks layer 1, head 0
    assert view.selected_head == (1, 0)
    np.testing.assert_array_equal(view.detail.image.image, view.result.weights[1, 0])
    ticks = view.detail.getPlotItem().getAxis("bottom")._tickLevels[0]
    assert [label for _, label in ticks] == view.result.tokens

    with qtbot.waitSignal(view.headTaken) as blocker:
        qtbot.mouseClick(view.take_button, __import__("PySide6").QtCore.Qt.MouseButton.LeftButton)
    assert blocker.args == [1, 0]  # which head; the explorer reads its arrays from the result
    head = explorer_inputs(view.result, *blocker.args)
    expected = load_model(tiny_dir).attention("the cat sat", "on the mat")
    assert list(head.tokens) == expected.tokens
    assert head_title(view.result, *blocker.args) == "tiny-bert layer 2 head 1"
    for name in ("query", "key", "value"):
        assert getattr(head, name).shape == (1, 1, 9, 4)
        np.testing.assert_allclose(
            getattr(head, name)[0, 0], getattr(expected, name)[1, 0], atol=1e-6
        )


def test_hover_reports_the_token_pair_and_value(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None, timeout=10_000)
    view._on_hover((0, 1, 2, 1))
    text = view.hover_label.text()
    assert "'cat'" in text and "'the'" in text
    assert f"{view.result.weights[0, 1, 2, 1]:.4f}" in text


def test_bad_folder_shows_a_message(qtbot, view, tmp_path):
    (tmp_path / "not-a-model").mkdir()
    view.set_model_folder(tmp_path / "not-a-model")
    view.set_sentence("the cat")
    qtbot.waitUntil(lambda: "config.json" in view.status_label.text(), timeout=10_000)
    assert view.result is None
    assert not view.take_button.isEnabled()


@pytest.mark.slow
def test_empty_sentence_and_truncation_messages(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("   ")
    view.compute_now()
    assert "empty" in view.status_label.text()
    view.set_sentence("the cat sat on the mat " * 4)
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    assert "truncated" in view.status_label.text()


def test_newest_request_wins(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    for text in ("the", "the cat", "the cat sat"):
        view.sentence_edit.setText(text)
        view.compute_now()
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    assert view.result.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]


@pytest.mark.slow
def test_an_answer_to_a_request_no_longer_current_is_dropped(qtbot, view, tiny_dir, monkeypatch):
    """Clearing the sentence while the model runs: the old answer must not come back."""
    import threading

    release = threading.Event()
    real_run = view.session.run

    def slow_run(request, should_stop=lambda: False):
        release.wait(5)
        return real_run(request)

    monkeypatch.setattr(view.session, "run", slow_run)
    view.set_model_folder(tiny_dir)
    view.sentence_edit.setText("the cat")
    view.compute_now()  # running, blocked in slow_run
    view.sentence_edit.setText("")
    view.compute_now()
    assert "empty" in view.status_label.text()
    dropped = view._runner.dropped
    release.set()
    qtbot.waitUntil(lambda: view._runner.dropped > dropped, timeout=10_000)  # the old answer
    assert view.result is None and "empty" in view.status_label.text()
    assert not view.take_button.isEnabled()


# -- how it looks: placeholder, square labelled grid, whole enlarged head -------------------------


@pytest.fixture
def twelve_dir(tmp_path):
    """12 layers × 12 heads, as a real BERT-base has."""
    from attn_explorer.models.testing.tiny_bert import tiny_config

    config = tiny_config(
        num_hidden_layers=12, num_attention_heads=12, hidden_size=48, max_position_embeddings=64
    )
    return write_tiny_bert(tmp_path / "tiny-bert-12", config=config)


def show_result(qtbot, view, folder, size, text="the cat sat on the mat and the dog ran"):
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    view.set_model_folder(folder)
    view.set_sentence(text)
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    settle()  # layouts settle


def inside(outer, inner) -> bool:
    return outer.adjusted(-0.5, -0.5, 0.5, 0.5).contains(inner)


@pytest.mark.slow
def test_placeholder_says_what_to_do_until_a_result(qtbot, view, tiny_dir):
    view.resize(640, 600)
    view.show()
    qtbot.waitExposed(view)
    assert view.placeholder.isVisible() and not view.grid.isVisible()
    text = view.placeholder.text()
    assert "Choose a model" in text and "Type a sentence" in text
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat")
    qtbot.waitUntil(lambda: view.result is not None, timeout=10_000)
    assert not view.placeholder.isVisible()
    assert view.grid.isVisible() and view.detail.isVisible() and view.take_button.isVisible()


@pytest.mark.slow
def test_twelve_heads_fill_the_grid_square_and_labelled(qtbot, view, twelve_dir):
    show_result(qtbot, view, twelve_dir, (1100, 680))
    grid = view.grid
    assert len(view._thumbnails) == 144
    sides = {(box.width(), box.height()) for box, _ in view._thumbnails.values()}
    assert sides == {(grid.cell, grid.cell)}  # square, all alike
    # all of it shows at this size: nothing to scroll, and the cells use the room they have
    assert grid.canvas.width() <= grid.viewport().width()
    assert grid.canvas.height() <= grid.viewport().height()
    assert grid.cell >= min(grid.viewport().width() // 12, grid.viewport().height() // 12) - 5
    assert [t.replace("\n", " ") for t in grid._head_header.texts()] == [
        f"head {n}" for n in range(1, 13)
    ]
    assert grid._layer_header.texts() == [f"layer {n}" for n in range(1, 13)]
    assert view._heads.orientation() == Qt.Orientation.Horizontal


@pytest.mark.slow
def test_a_narrow_dock_scrolls_to_the_selected_head(qtbot, view, twelve_dir):
    show_result(qtbot, view, twelve_dir, (400, 625))
    assert view._heads.orientation() == Qt.Orientation.Vertical  # grid above the head
    view.select_head(11, 11)
    box, _ = view._thumbnails[(11, 11)]
    corner = box.mapRectToScene(box.boundingRect())  # canvas pixels
    shown = view.grid.viewport().rect().translated(-view.grid.canvas.pos())
    assert inside(shown.toRectF(), corner)


@pytest.mark.parametrize("size", [(400, 625), (564, 625), (1100, 680)])
@pytest.mark.slow
def test_enlarged_head_title_axes_and_colour_bar_are_whole(qtbot, view, twelve_dir, size):
    show_result(qtbot, view, twelve_dir, size, "the cat sat on the mat and the dog ran " * 2)
    view.select_head(3, 5)
    settle()
    plot = view.detail.getPlotItem()
    scene = view.detail.sceneRect()
    assert plot.titleLabel.text == "layer 4 · head 6"
    colorbar = view.detail.colorbar
    for item in (plot.titleLabel, plot.getAxis("left"), plot.getAxis("bottom"), colorbar):
        assert inside(scene, item.sceneBoundingRect()), item
    placed = QRect(view.detail.mapTo(view, QPoint(0, 0)), view.detail.size())
    assert view.rect().contains(placed)  # the plot itself is not cut by the dock


@pytest.mark.slow
def test_token_labels_are_thinned_never_overlapping(qtbot, view, twelve_dir):
    from PySide6.QtGui import QPainter, QPicture

    show_result(qtbot, view, twelve_dir, (564, 625), "the cat sat on the mat and the dog ran " * 2)
    tokens = view.result.tokens
    for name in ("left", "bottom"):
        axis = view.detail.getPlotItem().getAxis(name)
        assert [label for _, label in axis._tickLevels[0]] == tokens  # every token ticked
        picture = QPicture()
        painter = QPainter(picture)
        _, _, texts = axis.generateDrawSpecs(painter)
        painter.end()
        drawn = [text for _, _, text in texts]
        assert drawn[0] == tokens[0] and 1 < len(drawn) < len(tokens)
        rects = [rect for rect, _, _ in texts]
        assert not any(a.intersects(b) for a, b in itertools.pairwise(rects))


@pytest.mark.slow
def test_colours_come_from_colormaps(qtbot, view, tiny_dir):
    from attn_explorer.state.colormaps import lut

    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None, timeout=10_000)
    _, item = view._thumbnails[(0, 0)]
    np.testing.assert_array_equal(item.lut, lut("sequential"))
    bar = view.detail.colorbar.colorMap().getLookupTable(nPts=256)
    np.testing.assert_array_equal(bar[:, :3], lut("sequential"))
    view.set_show_scores(True)
    np.testing.assert_array_equal(item.lut, lut("diverging"))
    bar = view.detail.colorbar.colorMap().getLookupTable(nPts=256)
    np.testing.assert_array_equal(bar[:, :3], lut("diverging"))
    assert view.detail.colorbar.axis.labelText == "raw score Q·Kᵀ"


def test_hover_on_the_enlarged_head_reads_the_selected_head(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    qtbot.waitUntil(lambda: view.result is not None, timeout=10_000)
    view.select_head(1, 0)
    view._on_heatmap_hovered(None, (2, 1))
    assert view.hover_label.text().startswith("layer 2 · head 1: query 'cat' (i=3)")
    view._on_heatmap_hovered(None, None)
    assert view.hover_label.text().strip() == ""


@pytest.mark.slow
def test_shutdown_stops_the_timer_and_drops_a_late_answer(qtbot, view, tiny_dir):
    view.set_model_folder(tiny_dir)
    view.set_sentence("the cat sat")
    assert view._debounce.isActive()
    view.shutdown()
    assert not view._debounce.isActive() and not view.busy
    view.compute_now()  # a request in flight when the window closes
    view.shutdown()
    assert not view.busy
    # The worker's answer (finished, or cancelled before it started) arrives, and is stale.
    qtbot.waitUntil(lambda: view._runner.dropped >= 1)
    assert view.result is None
    assert view._runner.dropped + (view.status_label.text() == "Computing…") >= 1


def test_the_dock_can_be_narrow(view):
    """A 1280 × 720 window must not grow to fit the dock (issue 14): small minimum size."""
    hint = view.minimumSizeHint()
    assert hint.width() <= 360 and hint.height() <= 540


# -- MiniLM's shape (6 layers × 12 heads) in a side dock ----------------------------------------


@pytest.fixture
def minilm_dir(tmp_path):
    """6 layers × 12 heads, as all-MiniLM-L6-v2 has."""
    from attn_explorer.models.testing.tiny_bert import tiny_config

    config = tiny_config(num_hidden_layers=6, num_attention_heads=12, hidden_size=24)
    return write_tiny_bert(tmp_path / "minilm-like", config=config)


@pytest.mark.parametrize("size", [(300, 625), (430, 625), (650, 900)])
@pytest.mark.slow
def test_twelve_heads_are_all_labelled_and_shown_or_scrollable(qtbot, view, minilm_dir, size):
    show_result(qtbot, view, minilm_dir, size)
    grid = view.grid
    assert [t.replace("\n", " ") for t in grid._head_header.texts()] == [
        f"head {n}" for n in range(1, 13)
    ]
    assert grid._layer_header.texts() == [f"layer {n}" for n in range(1, 7)]
    port = grid.viewport()
    if grid.canvas.width() > port.width():  # too narrow: the user can scroll to the rest
        assert grid.horizontalScrollBar().isVisible() and grid.horizontalScrollBar().maximum() > 0
    else:
        for head in range(12):
            box, _ = view._thumbnails[(5, head)]
            shown = port.rect().translated(-grid.canvas.pos()).toRectF()
            assert inside(shown, box.mapRectToScene(box.boundingRect()))
    # the grid above the head gets only the height its cells fill: no empty band
    if view._heads.orientation() == Qt.Orientation.Vertical:
        assert grid.height() - grid.canvas.height() <= HEAD_LABEL_PX + 2 + (
            grid.horizontalScrollBar().height() if grid.horizontalScrollBar().isVisible() else 0
        )
    # "head n" fits over its own cell, even in bold (the selected head's): neighbours never
    # overlap, and the first column's label keeps its first letter at the grid's left edge
    header = grid._head_header
    plain = header.label_font()
    assert QFontMetrics(plain).horizontalAdvance("head") <= grid.cell + CELL_GAP_PX - 2
    # the selected head's label is marked (bold, or underlined where bold would not fit)
    # and is no wider than its room either: it never runs into its neighbour's label
    font = header.selected_font(plain, header.texts()[0])
    assert font.bold() != font.underline()
    assert QFontMetrics(font).horizontalAdvance("head") <= grid.cell + CELL_GAP_PX - 2
    left, right = grid.canvas.pos().x(), grid.canvas.pos().x() + grid.canvas.width()
    for head in (0, 11):  # the first and last labels, marked, whole and over the grid
        text = header.texts()[head]
        rect = header.column_label_rect(head, text, font)
        widest = max(QFontMetrics(font).horizontalAdvance(line) for line in text.split("\n"))
        assert rect.width() >= widest and left <= rect.left() and rect.right() <= right + 0.5
        cell_centre = left + head * (grid.cell + CELL_GAP_PX) + grid.cell / 2
        assert rect.left() <= cell_centre <= rect.right()  # still over its own cell


@pytest.mark.slow
def test_selection_frame_is_the_thumbnail(qtbot, view, minilm_dir):
    show_result(qtbot, view, minilm_dir, (430, 625))
    view.select_head(2, 7)
    box, item = view._thumbnails[(2, 7)]
    frame = box.mapRectToScene(box.boundingRect())
    image = item.mapRectToScene(item.boundingRect())
    assert abs(frame.width() - image.width()) <= 1 and abs(frame.height() - image.height()) <= 1
    assert abs(frame.width() - view.grid.cell) <= 1 and abs(frame.height() - view.grid.cell) <= 1


@pytest.mark.parametrize("size", [(300, 625), (430, 625)])
@pytest.mark.slow
def test_enlarged_head_fits_inside_its_widget(qtbot, view, minilm_dir, size):
    show_result(qtbot, view, minilm_dir, size, "the cat sat on the mat and the dog ran " * 2)
    view.select_head(1, 11)
    settle()
    plot, shown = view.detail.getPlotItem(), view.detail.viewport().rect().toRectF()
    assert plot.titleLabel.text == "layer 2 · head 12"
    for item in (plot.titleLabel, view.detail.colorbar, view.detail.colorbar.axis):
        rect = view.detail.mapFromScene(item.sceneBoundingRect()).boundingRect().toRectF()
        assert rect.width() > 0 and inside(shown, rect), item
    placed = QRect(view.detail.mapTo(view, QPoint(0, 0)), view.detail.size())
    assert view.rect().contains(placed)


@pytest.mark.slow
def test_summary_table_shows_every_layer(qtbot, view, minilm_dir):
    show_result(qtbot, view, minilm_dir, (300, 625))
    view.lower_tabs.setCurrentIndex(1)
    settle()
    table = view.summary_table
    assert table.isVisible() and table.rowCount() == 6
    rows = sum(table.rowHeight(row) for row in range(6))
    assert table.viewport().height() >= rows  # every layer's row, none cut off
    table.cellClicked.emit(4, 10)  # a click picks the head and shows it enlarged
    assert view.selected_head == (4, 10) and view.detail.isVisible()


def test_a_remembered_model_that_is_gone_is_not_chosen(qtbot, monkeypatch, tmp_path):
    """The last launch's model was deleted since: nothing is chosen, and nothing breaks."""
    from attn_explorer.ui.common.settings import settings
    from attn_explorer.ui.model.model_choice import FOLDER_KEY

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings().setValue(FOLDER_KEY, str(tmp_path / "deleted.gguf"))
    widget = ModelView()
    qtbot.addWidget(widget)
    assert widget.current_folder() is None and widget.session.folder is None
    assert "b00020" not in widget.status_label.styleSheet()
    widget.shutdown()


def test_a_remembered_model_folder_is_chosen_again(qtbot, monkeypatch, tmp_path, tiny_dir):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    first = ModelView()
    qtbot.addWidget(first)
    first.set_model_folder(tiny_dir)
    first.shutdown()
    second = ModelView()
    qtbot.addWidget(second)
    assert second.current_folder() == str(tiny_dir)
    assert second.model_combo.currentText() == "tiny-bert (folder)"
    assert second.status_label.text().startswith("Now type a sentence")
    second.shutdown()
