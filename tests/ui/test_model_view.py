"""The Model dock through the user's hands: type, see the grid, pick a head, take it."""

import numpy as np
import pytest

from attn_explorer.models import load_model
from attn_explorer.models.testing import write_tiny_bert
from attn_explorer.ui.model_view import ModelView


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
    np.testing.assert_array_equal(view._detail_image.image, view.result.weights[1, 0])
    ticks = view._detail_plot.getAxis("bottom")._tickLevels[0]
    assert [label for _, label in ticks] == view.result.tokens

    with qtbot.waitSignal(view.headTaken) as blocker:
        qtbot.mouseClick(view.take_button, __import__("PySide6").QtCore.Qt.MouseButton.LeftButton)
    head = blocker.args[0]
    expected = load_model(tiny_dir).attention("the cat sat", "on the mat")
    assert head["tokens"] == expected.tokens
    assert (head["layer"], head["head"], head["model_name"]) == (1, 0, "tiny-bert")
    for name in ("query", "key", "value"):
        assert head[name].dtype == np.float64 and head[name].shape == (9, 4)
        np.testing.assert_allclose(head[name], getattr(expected, name)[1, 0], atol=1e-6)


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
