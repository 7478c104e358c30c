"""Journeys through the vectors view: see the exercise's perpendicular arrows, drag a tip, undo."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import QComboBox

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
LEFT = Qt.MouseButton.LeftButton


def tip_point(view, matrix: str, token: int) -> QPoint:
    """Where an arrow's tip is in the plot's viewport, as the user sees it."""
    return view.plot.mapFromScene(view.tip_scene_pos(matrix, token))


def view_point(view, x: float, y: float) -> QPoint:
    from PySide6.QtCore import QPointF

    return view.plot.mapFromScene(view.view_box.mapViewToScene(QPointF(x, y)))


def drag(user, view, start: QPoint, path: list[QPoint]) -> None:
    """Press at ``start``, move through ``path``, release at its end: one drag by hand."""
    viewport = view.plot.viewport()
    user.qtbot.mousePress(viewport, LEFT, pos=start)
    for point in path:
        user.move_mouse(viewport, point)
        # the throttled write of this move has happened: every view follows while dragging
        user.qtbot.waitUntil(lambda: not view._write_timer.isActive())
        user.settle()
    user.qtbot.mouseRelease(viewport, LEFT, pos=path[-1])
    user.settle()


def test_drag_q2_tip_edits_q_updates_the_grid_and_one_undo_restores_it(user):
    user.press(Qt.Key.Key_F4)
    view = user.window.vectors_view
    assert view is not None and view.isVisible()
    assert user.window.vectors_dock.isVisible()
    session = user.window.session
    np.testing.assert_array_equal(session.head_matrix("query")[1], [0.0, 1.0])
    start = tip_point(view, "query", 1)
    target = view_point(view, 1.0, 2.0)
    middle = QPoint((start.x() + target.x()) // 2, (start.y() + target.y()) // 2)
    drag(user, view, start, [middle, target])
    np.testing.assert_array_equal(session.head_matrix("query")[1], [1.0, 2.0])
    # q2 = (1, 2) against k1 = (1, 0), k2 = (0, 1), k3 = (1, 1): row t2 of S is 1, 2, 3.
    assert user.grid()[1] == ["1", "2", "3"]
    user.assert_grid_is_the_result()
    assert user.window.session.undo_text() == "drag Q"
    assert view.tips("query")[1].tolist() == [1.0, 2.0]
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    np.testing.assert_array_equal(session.head_matrix("query")[1], [0.0, 1.0])
    assert user.grid()[1] == ["0", "1", "1"]
    assert view.tips("query")[1].tolist() == [0.0, 1.0]


def drawn(view) -> dict[str, list[list[float]]]:
    """Everything the plot shows of the arrows: shafts, tips, selection, arrowheads, labels."""
    items = {
        "query shafts": view.query_shafts, "key shafts": view.key_shafts,
        "query tips": view.query_tips, "key tips": view.key_tips,
        "selected q": view.selected_query, "selected k": view.selected_key,
        "projection": view.projection_line, "drop": view.drop_line,
    }  # fmt: skip
    shown = {
        name: [list(map(float, axis)) for axis in item.getData()] for name, item in items.items()
    }
    deco = view.decorations
    shown["heads"] = [[a.pos().x(), a.pos().y()] for a in deco.arrows if a.isVisible()]
    shown["labels"] = [
        [t.pos().x(), t.pos().y(), t.textItem.toPlainText()] for t in deco.labels if t.isVisible()
    ]
    return shown


def test_mid_drag_the_plot_shows_what_a_whole_redraw_would(user, monkeypatch):
    """Each move redraws only what the moved tip changes, and pyqtgraph's hover pass is
    skipped while the hand drags: after every move (before the session is written) the
    plot is exactly what a whole redraw draws, and after the release hovering works again."""
    user.press(Qt.Key.Key_F4)
    view = user.window.vectors_view
    user.window.state.vectors.select_cell(1, 2)  # q2 chosen: its projection line moves too
    user.settle()
    scene = view.plot.scene()
    looked = []
    near = scene.itemsNearEvent
    monkeypatch.setattr(scene, "itemsNearEvent", lambda *a, **k: looked.append(1) or near(*a, **k))
    viewport = view.plot.viewport()
    user.qtbot.mousePress(viewport, LEFT, pos=tip_point(view, "query", 1))
    keys_before = drawn(view)["key shafts"]
    for x, y in ((0.5, 1.5), (1.0, 2.0), (1.5, 1.0)):
        looked.clear()  # (the press and the move that starts the drag do hover)
        user.move_mouse(viewport, view_point(view, x, y))
        assert view._write_timer.isActive() or view._pending is None
        mid_drag = drawn(view)
        np.testing.assert_allclose(view.tips("query")[1], [x, y], atol=0.06)  # snapped to 0.1
        view.redraw()  # what the whole redraw shows, preview included
        assert mid_drag == drawn(view)
        assert mid_drag["key shafts"] == keys_before  # the keys never moved
        assert mid_drag["selected q"][0][-1] == pytest.approx(view.tips("query")[1][0])
        assert looked == [] or (x, y) == (0.5, 1.5)  # no hover pass once the drag is on
    user.qtbot.mouseRelease(viewport, LEFT, pos=view_point(view, 1.5, 1.0))
    user.settle()
    user.move_mouse(viewport, tip_point(view, "key", 1))  # k2 = (0, 1), where q2 was
    assert looked  # hovering again
    assert view.hover.text().startswith("k2")


@pytest.mark.slow
def test_exercise_cell_2_4_highlights_q2_and_k4_with_their_dot_product(user):
    user.choose("Presets", "Exercise: k4 = (2, 0)")
    view = user.window.vectors_view
    assert view is not None and user.window.vectors_dock.isVisible()
    assert user.window.state.vectors.selection.query == 1  # the preset opens on q2
    user.click_grid(1, 3)
    lines = view.text.text().splitlines()
    assert lines[0] == "q2 (t2) · k4 (t4)"
    if "?" in lines[1]:  # predict mode asks first: answer it as the user would
        stepper = user.window.stepper
        user.click(stepper.answer_edit)
        user.type_text("0", stepper.answer_edit)
        user.click(stepper.check_button)
        assert stepper.stepper.prediction.status == "right"
        lines = view.text.text().splitlines()
    assert lines[1:] == ["q·k = 0·2 + 1·0 = 0", "|q| |k| cos θ = 1 · 2 · cos 90° = 0"]
    # The highlighted arrows are q2 and k4, and k4's projection onto q2 is the origin.
    q_x, q_y = view.selected_query.getData()
    k_x, k_y = view.selected_key.getData()
    assert (list(q_x), list(q_y)) == ([0.0, 0.0], [0.0, 1.0])
    assert (list(k_x), list(k_y)) == ([0.0, 2.0], [0.0, 0.0])
    p_x, p_y = view.projection_line.getData()
    np.testing.assert_allclose([p_x[-1], p_y[-1]], [0.0, 0.0], atol=1e-12)


def test_export_the_vectors_view_through_the_heatmaps_export_options(user, tmp_path):
    """Right-click the plot ▸ Export image…: the same options form as the heatmaps (format,
    PNG width), then a file name; the PNG has the chosen width."""
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication, QMenu, QSpinBox

    user.press(Qt.Key.Key_F4)
    view = user.window.vectors_view
    assert view is not None
    user.settle()

    def set_width(dialog):
        assert dialog.findChild(QComboBox) is not None  # the format
        spin = dialog.findChild(QSpinBox)
        spin.setValue(900)

    user.accept_form(set_width)
    user.pick_file(tmp_path / "arrows.png")

    def choose_export(tries: int = 0) -> None:
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            if tries < 200:
                QTimer.singleShot(10, lambda: choose_export(tries + 1))
            return
        (action,) = [a for a in menu.actions() if a.text() == "Export image…"]
        menu.close()
        action.trigger()

    QTimer.singleShot(0, choose_export)
    viewport = view.plot.viewport()
    user.qtbot.mouseClick(viewport, Qt.MouseButton.RightButton, pos=view_point(view, 0.5, 0.5))
    user.qtbot.waitUntil(lambda: (tmp_path / "arrows.png").exists(), timeout=5000)
    assert user.dialogs_seen[-2:] == ["Export vectors view", "Export vectors view"]
    user.assert_all_answered()
    image = QImage(str(tmp_path / "arrows.png"))
    assert image.width() == 900 and not image.isNull()
    assert "Exported" in user.status()


@pytest.mark.slow
def test_a_cell_of_another_head_never_shows_this_heads_numbers(user):
    """The vectors view draws the current head: clicking head 2's heatmap while head 1 is
    shown leaves its selection alone (head 1's q·k for that cell would be a wrong number);
    once head 2 is the shown head, the same click selects the pair."""
    user.choose("Presets", "Causal language model")  # two heads
    user.window.session.set_option("predict", False)
    user.press(Qt.Key.Key_F4)
    state = user.window.state.vectors
    before = state.selection
    user.click_heatmap(1, 2, 0)  # head 2, cell (3, 1)
    user.settle()
    assert user.window.session.options.head == 0
    assert state.selection == before
    combo: QComboBox = user.window.options_bar.head
    combo.setFocus()
    user.press(Qt.Key.Key_Down, widget=combo)  # head 2 is shown now
    user.settle()
    user.click_grid(2, 0)
    user.settle()
    assert (state.selection.query, state.selection.key) == (2, 0)
    q = user.window.session.matrix("query")[0, 1, 2]
    k = user.window.session.matrix("key")[0, 1, 0]
    assert state.dot_lines()[1].endswith(f"= {float(q @ k):.6g}")
