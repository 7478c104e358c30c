"""The stepper panel through the user's hands: buttons, keys, predict mode, code view."""

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QToolButton
from qt_idle import settle

from attn_explorer.compute import LoopTrace
from attn_explorer.state import Session, preset
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.ui.stepper.stepper_panel import StepperPanel
from attn_explorer.ui.stepper.stepper_widgets import save_widget_png


@pytest.fixture
def make_panel(qtbot):
    panels = []

    def make(name="worked", measure_times=False, **options):
        p = preset(name)
        session = Session(p.snapshot, p.options)
        for key, value in {"strategy": "loop", **options}.items():
            session.set_option(key, value)
        panel = StepperPanel(session, Stepper(session), measure_times=measure_times)
        qtbot.addWidget(panel)
        panel.resize(760, 500)
        panel.show()
        qtbot.waitExposed(panel)
        panels.append(panel)
        return panel

    yield make
    for panel in panels:
        panel.shutdown()


def step_button(panel):
    return next(
        b for b in panel.findChildren(QToolButton) if b.defaultAction() is panel.step_action
    )


def record(panel):
    frames = []
    panel.frameChanged.connect(frames.append)
    return frames


def test_steps_match_the_trace_and_emit_frames(make_panel, qtbot):
    panel = make_panel()
    frames = record(panel)
    trace = LoopTrace(panel.session.matrix("query"), panel.session.matrix("key"))
    for n in range(1, 8):
        qtbot.mouseClick(step_button(panel), Qt.MouseButton.LeftButton)
        expected = trace[n - 1]
        frame = frames[-1]
        assert (frame.step.i, frame.step.j, frame.step.d) == (expected.i, expected.j, expected.d)
        assert frame.step.partial_sum == expected.partial_sum
    assert panel.counter_label.text() == "multiply-add 7 of 18 · cell (t2, t1) · head 1 of 1"
    assert panel.working_label.text() == "0·1 = 0"
    assert "total = 0" in panel.locals_label.text() and "i = 1" in panel.locals_label.text()


def test_step_back_returns_exactly_the_previous_frame(make_panel):
    panel = make_panel()
    frames = record(panel)
    for _ in range(5):
        panel.step_forward()
    panel.step_back()
    assert frames[-1] == frames[-3]
    assert panel.frame() == frames[3]


def test_seek_cell_lands_on_its_first_multiply_add(make_panel):
    panel = make_panel()
    frames = record(panel)
    panel.seek_cell(0, 0, 2, 1)
    step = frames[-1].step
    assert (step.i, step.j, step.d) == (2, 1, 0)
    assert frames[-1].cell == (0, 0, 2, 1) and not frames[-1].filled[0, 0, 2, 1]
    assert panel.scrub_slider.value() == step.index + 1


def test_granularity_combo_cell_advances_d_at_once(make_panel):
    panel = make_panel()
    panel.granularity_combo.setCurrentIndex(panel.granularity_combo.findData("cell"))
    assert panel.session.options.granularity == "cell"
    panel.step_forward()
    frame = panel.frame()
    assert frame.step.d == 1 and frame.step.cell_complete and frame.filled.sum() == 1
    assert panel.counter_label.text() == "cell 1 of 9 · (t1, t1) · head 1 of 1"


def test_matmul_fills_one_head_per_step_batched_all_at_once(make_panel):
    panel = make_panel("random")  # H = 4
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("matmul"))
    assert not panel.granularity_combo.isEnabled()
    for h in range(4):
        panel.step_forward()
        filled = panel.frame().filled
        assert filled[0, : h + 1].all() and not filled[0, h + 1 :].any()
    assert panel.highlighted_lines()[0].strip().startswith("scores[b, h] = query[b, h] @")
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("batched"))
    panel.to_start()
    panel.step_forward()
    assert panel.frame().filled.all() and panel.frame().index == 0 and panel.frame().count == 1
    assert "np.matmul" in panel.highlighted_lines()[0]
    assert panel.code_view.toPlainText().startswith("key_t = np.swapaxes")


def test_code_view_highlights_the_innermost_line_during_multiply_adds(make_panel):
    panel = make_panel()
    assert panel.code_view.isReadOnly()
    assert panel.code_view.toPlainText() == __import__(
        "attn_explorer.compute"
    ).compute.strategy_source("loop")
    assert panel.highlighted_lines() == []
    panel.step_forward()
    assert [line.strip() for line in panel.highlighted_lines()] == ["total += Q[i][d] * K[j][d]"]
    panel.step_forward()  # completes the cell: the store line is marked too
    assert [line.strip() for line in panel.highlighted_lines()] == [
        "total += Q[i][d] * K[j][d]",
        "scores[i][j] = total",
    ]
    panel.granularity_combo.setCurrentIndex(panel.granularity_combo.findData("cell"))
    assert [line.strip() for line in panel.highlighted_lines()] == ["scores[i][j] = total"]


def test_editing_a_value_mid_run_ends_the_step_through(make_panel):
    panel = make_panel()
    frames = record(panel)
    panel.seek_cell(0, 0, 1, 0)  # q2·k1 after d = 0: 0·1
    panel.session.set_cell("key", 0, 1, 3.0)  # k1 = (1, 3)
    assert frames[-1] is None  # the views go back to the complete (new) result
    assert panel.counter_label.text().startswith("Stopped")
    panel.seek_cell(0, 0, 1, 0)
    panel.step_forward()
    assert frames[-1].step.partial_sum == 3.0
    assert panel.working_label.text() == "0·1 + 1·3 = 3"


def test_shape_change_ends_the_step_through(make_panel):
    panel = make_panel()
    for _ in range(4):
        panel.step_forward()
    panel.session.insert_token()
    assert panel.frame() is None
    assert panel.scrub_slider.value() == 0 and panel.scrub_slider.maximum() == 32
    assert "32 multiply-adds" in panel.summary_label.text()
    panel.step_forward()
    assert panel.frame().filled.shape == (1, 1, 4, 4)


def test_predict_accepts_a_right_answer(make_panel, qtbot):
    panel = make_panel("exercise")  # predict on, step by cell
    assert panel.predict_check.isChecked() and panel.predict_row.isVisible()
    panel.seek(6)  # cells up to (t2, t3) done
    panel.step_forward()
    assert panel.answer_edit.isEnabled()
    assert panel.working_label.text() == "query t2 · key t4 = ?"
    assert not panel.frame().filled[0, 0, 1, 3]
    qtbot.keyClicks(panel.answer_edit, "0")
    qtbot.keyClick(panel.answer_edit, Qt.Key.Key_Return)
    assert panel.frame().prediction.status == "right"
    assert panel.predict_label.text() == "Right! query t2 · key t4 = 0·2 + 1·0 = 0"
    assert panel.frame().filled[0, 0, 1, 3]
    assert not panel.answer_edit.isEnabled()


def test_predict_corrects_a_wrong_answer(make_panel, qtbot):
    panel = make_panel("exercise")
    panel.seek(6)
    panel.step_forward()
    qtbot.keyClicks(panel.answer_edit, "1")
    qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    assert panel.frame().prediction.status == "wrong"
    assert "you said 1" in panel.predict_label.text()
    assert "0·2 + 1·0 = 0" in panel.predict_label.text()
    assert panel.working_label.text() == "0·2 + 1·0 = 0"


def test_predict_explains_bad_input(make_panel, qtbot):
    panel = make_panel("exercise")
    panel.step_forward()
    qtbot.keyClicks(panel.answer_edit, "zero")
    qtbot.keyClick(panel.answer_edit, Qt.Key.Key_Return)
    assert "not a number" in panel.predict_label.text()
    assert panel.stepper.needs_answer


def test_play_pauses_to_ask_and_resumes_after_the_answer(make_panel, qtbot):
    panel = make_panel("exercise")
    panel.fast_check.setChecked(True)
    panel.play()
    qtbot.waitUntil(lambda: panel.stepper.needs_answer, timeout=2000)
    assert not panel.is_playing()
    panel.answer_edit.setText("1")
    panel.submit_answer()
    assert panel.is_playing()  # play goes on until the next question
    qtbot.waitUntil(lambda: panel.stepper.needs_answer, timeout=2000)
    assert panel.frame().prediction.cell == (0, 0, 0, 1)


def test_play_runs_on_a_timer_to_the_end(make_panel, qtbot):
    panel = make_panel()
    panel.speed_slider.setValue(60)
    assert panel.speed_label.text() == "60 steps/s"
    panel.play()
    assert panel.is_playing() and panel.play_action.text() == "Pause"
    qtbot.waitUntil(lambda: panel.stepper.at_end, timeout=3000)
    qtbot.waitUntil(lambda: not panel.is_playing(), timeout=1000)
    assert panel.frame().filled.all()
    assert panel.play_action.text() == "Play"


def test_keyboard_space_arrows_home_end(make_panel, qtbot):
    panel = make_panel()
    panel.activateWindow()
    qtbot.waitActive(panel)
    panel.setFocus()
    qtbot.waitUntil(panel.hasFocus)
    qtbot.keyClick(panel, Qt.Key.Key_Right)
    qtbot.keyClick(panel, Qt.Key.Key_Right)
    assert panel.frame().index == 1
    qtbot.keyClick(panel, Qt.Key.Key_Left)
    assert panel.frame().index == 0
    qtbot.keyClick(panel, Qt.Key.Key_End)
    assert panel.frame().index == 17
    qtbot.keyClick(panel, Qt.Key.Key_Home)
    assert panel.frame().index == -1 and not panel.frame().filled.any()
    qtbot.keyClick(panel, Qt.Key.Key_Space)
    assert panel.is_playing()
    qtbot.keyClick(panel, Qt.Key.Key_Space)
    assert not panel.is_playing()


def test_actions_for_a_menu(make_panel):
    panel = make_panel()
    shortcuts = {
        name: getattr(panel, name).shortcut().toString()
        for name in ("play_action", "step_action", "back_action", "start_action", "end_action")
    }
    assert shortcuts == {
        "play_action": "Space",
        "step_action": "Right",
        "back_action": "Left",
        "start_action": "Home",
        "end_action": "End",
    }
    panel.step_action.trigger()
    assert panel.frame().index == 0


def test_scrub_slider_seeks_without_replaying(make_panel):
    panel = make_panel("random")
    count = panel.stepper.count
    assert panel.scrub_slider.maximum() == count
    panel.scrub_slider.setValue(count // 2)
    assert panel.frame().index == count // 2 - 1
    panel.scrub_slider.setValue(0)
    assert panel.frame().index == -1


def test_scrub_slider_scales_long_runs(make_panel):
    panel = make_panel("random")
    panel.session.resize(tokens=256, dim=8)  # 4·256·256·8 = 2 Mi multiply-adds
    count = panel.stepper.count
    top = panel.scrub_slider.maximum()
    assert top < count
    panel.scrub_slider.setValue(top)
    assert panel.frame().index == count - 1
    panel.scrub_slider.setValue(top // 2)
    assert abs(panel.frame().index - count // 2) <= count // top + 1


def test_stop_emits_none(make_panel):
    panel = make_panel()
    frames = record(panel)
    panel.step_forward()
    panel.stop_action.trigger()
    assert frames[-1] is None and panel.frame() is None
    assert panel.counter_label.text().startswith("Stopped")


def test_summary_and_measured_times(make_panel, qtbot):
    panel = make_panel(measure_times=True)
    assert panel.summary_label.text() == (
        "loop: 18 multiply-adds in 9 body visits · matmul: 1 call per head · batched: 1 call"
    )
    qtbot.waitUntil(lambda: panel.timing_label.text().startswith("measured per call"), timeout=5000)
    assert "loop" in panel.timing_label.text() and "batched" in panel.timing_label.text()


def test_a_big_shape_is_not_timed_beside_its_own_computation(make_panel, qtbot):
    """Timing here would hold a second score tensor while the result computes (issue 12)."""
    panel = make_panel(measure_times=True)
    panel.session.resize(tokens=1100)  # 1 210 000 score cells
    assert "see the timing panel" in panel.timing_label.text()
    qtbot.waitUntil(lambda: not panel.summary._delay.isActive())  # past the summary's delay
    settle()  # whatever it set off has run: nothing was started
    assert not panel.summary._runner.is_busy()


def test_export_calls_the_callback(make_panel, qtbot):
    panel = make_panel()
    calls = []
    panel.export_frame_callback = lambda: calls.append(panel.frame())
    panel.step_forward()
    qtbot.mouseClick(panel.export_button, Qt.MouseButton.LeftButton)
    assert len(calls) == 1 and calls[0].index == 0


def test_default_export_saves_a_png(make_panel, tmp_path, monkeypatch):
    panel = make_panel()
    path = tmp_path / "frame.png"
    monkeypatch.setattr(
        "attn_explorer.ui.stepper.stepper_panel.QFileDialog.getSaveFileName",
        lambda *args, **kwargs: (str(path), "PNG image (*.png)"),
    )
    panel.step_forward()
    panel.export_button.click()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not QImage(str(path)).isNull()


def test_save_widget_png_reports_failure(make_panel, tmp_path):
    panel = make_panel()
    with pytest.raises(OSError, match=r"could not write .*the folder does not exist"):
        save_widget_png(panel, str(tmp_path / "missing" / "frame.png"))


def test_panel_grab_is_readable(make_panel):
    panel = make_panel()
    for _ in range(7):
        panel.step_forward()
    image = panel.grab().toImage()
    assert image.width() >= 700
    panel.grab().save("/tmp/stepper.png")
    pixels = np.array([image.pixelColor(x, 22).lightness() for x in range(0, 300, 5)])
    assert pixels.std() > 0  # the transport buttons are drawn
    assert panel.speed_label.width() >= panel.speed_label.sizeHint().width()
    for readout in (panel.counter_label, panel.working_label, panel.locals_label):
        assert readout.fits(), readout.text()  # nothing clipped
    code = panel.code_view
    lines = code.toPlainText().count("\n") + 1
    assert code.viewport().height() >= lines * code.fontMetrics().lineSpacing()
