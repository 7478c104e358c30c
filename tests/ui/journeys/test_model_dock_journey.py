"""The Model dock as a new user meets it (issue 23, defects 9 and 11): the Generate tab's
empty state, titles and rows that fit a 1000 × 650 window, the continuation shown in the
grid, a chosen model that waits for a sentence without an error, and a dock that comes
back with the same model and width at the next launch."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QPushButton,
    QStyle,
    QStyleOptionTab,
    QWidget,
)

from attn_explorer.models.session import head_name
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.window.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier


def open_dock(user, width: int = 1000, height: int = 650):
    user.window.resize(width, height)
    user.settle()
    user.press(Qt.Key.Key_M, CTRL, widget=user.window)
    return user.window.model_view


def open_gguf(user, path) -> None:
    user.pick_file(path)
    user.choose("Model", "Open model file…")


def type_sentence(user, view, text: str) -> None:
    user.click(view.sentence_edit)
    user.type_text(text, widget=view.sentence_edit)
    user.qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)


def click_tab(user, view, name: str) -> None:
    bar = view.lower_tabs.tabBar()
    index = [bar.tabText(i) for i in range(bar.count())].index(name)
    user.click(bar, bar.tabRect(index).center())
    assert view.lower_tabs.currentIndex() == index


def button(panel: QWidget, text: str) -> QPushButton:
    """The visible button labelled ``text`` in ``panel``, as a user finds it."""
    found = [b for b in panel.findChildren(QPushButton) if b.text() == text and b.isVisible()]
    assert found, f"no button {text!r} in {[b.text() for b in panel.findChildren(QPushButton)]}"
    return found[0]


def shows_whole(label: QLabel) -> bool:
    """The label's whole text is drawn: it wraps within its height, or fits on one line."""
    room = label.contentsRect().adjusted(label.margin(), 0, -label.margin(), 0)
    if label.wordWrap():
        return label.heightForWidth(label.width()) <= label.height()
    return label.fontMetrics().horizontalAdvance(label.text()) <= room.width()


def visible_labels(panel: QWidget, words: str) -> list[QLabel]:
    return [
        label for label in panel.findChildren(QLabel) if label.isVisible() and words in label.text()
    ]


def assert_tabs_whole(view) -> None:
    """Every tab inside the bar, its name inside the rectangle the style writes it in."""
    bar = view.lower_tabs.tabBar()
    for i in range(bar.count()):
        rect, text = bar.tabRect(i), bar.tabText(i)
        assert QRect(0, 0, bar.width(), bar.height()).contains(rect), (text, rect, bar.width())
        option = QStyleOptionTab()
        bar.initStyleOption(option, i)
        room = bar.style().subElementRect(QStyle.SubElement.SE_TabBarTabText, option, bar)
        assert bar.fontMetrics().horizontalAdvance(text) <= room.width(), (text, room)


@pytest.mark.slow
def test_the_generate_tab_starts_with_what_to_do_and_every_tab_name_whole(user, tmp_path):
    """Before the fix: five tabs wider than the dock (the last one cut: "Gener"/"Positi"),
    and an empty plot with axes from -400 to 400 under an elided placeholder."""
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    view = open_dock(user)
    open_gguf(user, path)
    type_sentence(user, view, "the cat sat")
    assert_tabs_whole(view)
    click_tab(user, view, "Generate")
    panel = view.generation
    assert not panel.plot.isVisible()  # no empty axes
    hints = visible_labels(panel, "press Generate")
    assert hints and all(shows_whole(label) for label in hints)
    view.setMinimumWidth(0)  # the dock as narrow as its content allows
    dock = user.window.model_dock
    user.window.resizeDocks([dock], [view.minimumSizeHint().width()], Qt.Orientation.Horizontal)
    user.settle()
    assert_tabs_whole(view)


@pytest.mark.slow
def test_generate_at_1000x650_then_show_the_continuation_in_the_grid(user, tmp_path):
    """Before the fix: the title was cut ("…newest row at the botto"), the colour bar ran
    off the right edge, and the written tokens never reached the grid or Selected head."""
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    view = open_dock(user)
    open_gguf(user, path)
    # The tiny random model writes stray bytes; these 4 tokens re-read as themselves.
    type_sentence(user, view, "a dog")
    click_tab(user, view, "Generate")
    panel = view.generation
    panel.max_spin.setValue(4)
    user.click(button(panel, "Generate"))
    user.qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    state = view.session.generation
    assert state.done and len(state.tokens) == 4
    assert panel.plot.isVisible()
    titles = visible_labels(panel, head_name(*view.selected_head))
    assert titles and all(shows_whole(label) for label in titles)
    colorbars = [i for i in panel.plot.scene().items() if isinstance(i, pg.ColorBarItem)]
    assert len(colorbars) == 1
    for item in (panel.image, colorbars[0]):  # the newest row and the scale, inside the plot
        seen = panel.plot.mapFromScene(item.sceneBoundingRect()).boundingRect()
        assert seen.right() <= panel.plot.width() and seen.left() >= 0, (item, seen)

    user.click(button(panel, "Show in grid"))
    assert view.sentence_edit.text() == "a dog" + state.text
    assert view.lower_tabs.currentIndex() == 0 and view.lower_tabs.tabText(0) == "Head"
    user.qtbot.waitUntil(
        lambda: view.result is not None and not view.busy and len(view.result.tokens) > 4,
        timeout=10_000,
    )
    result = view.result
    assert result.tokens == state.prompt_tokens + state.tokens
    # One pass over prompt + continuation: its rows are the rows the KV cache wrote.
    start = len(state.prompt_tokens) - 1
    for step, row in enumerate(state.rows):
        width = row.shape[-1]
        np.testing.assert_allclose(
            result.weights[:, :, start + step, :width], row[:, :, 0], atol=2e-5
        )
    layer, head = view.selected_head
    np.testing.assert_array_equal(view.detail.image.image, result.weights[layer, head])
    assert len(view._thumbnails) == 8
    user.assert_grid_is_the_result()


@pytest.mark.slow
def test_choosing_a_model_before_typing_asks_for_a_sentence_without_an_error(user, tmp_path):
    """Before the fix: a red "The sentence is empty: type some words." error."""
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    view = open_dock(user, 1280, 720)
    open_gguf(user, path)
    user.qtbot.waitUntil(lambda: not view.busy, timeout=5_000)
    assert "type a sentence" in view.status_label.text().lower()
    assert "#b00020" not in view.status_label.styleSheet()  # the error colour
    type_sentence(user, view, "the cat")
    assert "tokens" in view.status_label.text()


@pytest.mark.slow
def test_the_next_launch_opens_the_same_model_in_a_dock_as_wide(user, qtbot, tmp_path):
    """Before the fix: the picker came back empty, and at 1280 × 720 (the dock sharing the
    inputs' place) the dock went back to 45 % of the window whatever the user had left."""
    path = tmp_path / "tiny-llama.gguf"
    write_tiny_gguf(path)
    view = open_dock(user, 1280, 720)
    open_gguf(user, path)
    window = user.window
    window.resizeDocks([window.model_dock], [430], Qt.Orientation.Horizontal)
    user.settle()
    left = window.model_dock.width()
    assert abs(left - 430) <= 2
    window.close()
    user.settle()

    again = MainWindow()
    again.files.ask_before_discard = False
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    again.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is again)
    qtbot.keyClick(again, Qt.Key.Key_M, CTRL)
    qtbot.waitUntil(lambda: again.model_view is not None)
    view = again.model_view
    assert view.model_combo.currentText() == "tiny-llama.gguf (file)"
    assert view.session.folder == str(path)
    assert "type a sentence" in view.status_label.text().lower()
    assert again.model_dock.width() == left
    again.shutdown()
