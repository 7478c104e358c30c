"""The Qt-free stepper model: positions, frames, strategies, predict mode and live edits."""

import numpy as np
import pytest

from attn_explorer.compute import LoopTrace
from attn_explorer.state import Session, preset
from attn_explorer.state.presets import random_preset
from attn_explorer.state.views.frame import Frame, prediction_is_right
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.state.views.stepper_text import code_lines, frame_locals, summary_text


def make(name="worked", **options):
    p = preset(name)
    session = Session(p.snapshot, p.options)
    for key, value in {"strategy": "loop", **options}.items():
        session.set_option(key, value)
    return session, Stepper(session)


def steps(stepper, n):
    for _ in range(n):
        assert stepper.step_forward()


def test_starts_stopped_and_first_step_activates():
    session, stepper = make()
    assert stepper.frame() is None and not stepper.active
    assert stepper.count == 18
    stepper.step_forward()
    frame = stepper.frame()
    assert frame is not None and frame.index == 0 and frame.cursor == 0
    assert session.options.step == 0  # mirrored into the session


@pytest.mark.parametrize("n", [1, 2, 7, 10, 18])
def test_after_n_steps_frame_matches_trace(n):
    session, stepper = make()
    steps(stepper, n)
    frame = stepper.frame()
    expected = LoopTrace(session.matrix("query"), session.matrix("key"))[n - 1]
    assert frame.step == expected
    assert (frame.step.i, frame.step.j, frame.step.d) == (expected.i, expected.j, expected.d)
    assert frame.step.partial_sum == expected.partial_sum
    assert frame.cell == (0, 0, expected.i, expected.j)
    assert frame.filled.sum() == n // 2  # d = 2: a cell completes every second step


def test_random_shape_frames_match_trace_everywhere():
    p = random_preset(batch=2, heads=3, tokens=4, dim=3, seed=1)
    session = Session(p.snapshot, p.options)
    session.set_option("strategy", "loop")
    stepper = Stepper(session)
    trace = LoopTrace(session.matrix("query"), session.matrix("key"))
    for n, expected in enumerate(trace):
        stepper.step_forward()
        assert stepper.frame().step == expected, n
        assert (session.options.batch_index, session.options.head) == (
            expected.batch,
            expected.head,
        )  # the selected head follows the stepper
    assert stepper.at_end and not stepper.step_forward()


def test_counter_and_working_for_the_worked_example():
    _, stepper = make()
    steps(stepper, 7)
    frame = stepper.frame()
    assert frame.counter == "multiply-add 7 of 18 · cell (t2, t1) · head 1 of 1"
    assert frame.working == "0·1 = 0"
    stepper.step_forward()
    assert stepper.frame().working == "0·1 + 1·0 = 0"
    stepper.seek_cell(0, 0, 0, 0)
    stepper.step_forward()
    assert stepper.frame().working == "1·1 + 0·0 = 1"


def test_counter_uses_token_names():
    session, stepper = make()
    session.rename_token(1, "cat")
    steps(stepper, 7)
    assert "cell (cat, t1)" in stepper.frame().counter


def test_step_back_returns_exactly_the_previous_frame():
    _, stepper = make()
    frames = []
    for _ in range(18):
        stepper.step_forward()
        frames.append(stepper.frame())
    for n in range(17, 0, -1):
        assert stepper.step_back()
        assert stepper.frame() == frames[n - 1]
    assert stepper.step_back()
    assert stepper.frame().index == -1 and not stepper.frame().filled.any()
    assert not stepper.step_back()


def test_frame_equality_compares_filled_arrays():
    _, stepper = make()
    stepper.step_forward()
    frame = stepper.frame()
    other = Frame(**{**frame.__dict__, "filled": ~frame.filled})
    assert frame == Frame(**frame.__dict__)
    assert frame != other


def test_seek_cell_lands_on_first_multiply_add():
    _, stepper = make()
    stepper.seek_cell(0, 0, 2, 1)
    frame = stepper.frame()
    assert (frame.step.i, frame.step.j, frame.step.d) == (2, 1, 0)
    assert frame.cursor == stepper.trace.index_of_cell(0, 0, 2, 1)
    assert frame.filled.sum() == 7 and not frame.filled[0, 0, 2, 1]


def test_seek_cell_in_matmul_and_batched_shows_the_call():
    session, stepper = make("random")  # B=1, H=4, T=8, d=4
    session.set_option("strategy", "matmul")
    stepper.seek_cell(0, 2, 3, 3)
    assert stepper.frame().head == 2 and stepper.frame().filled[0, :3].all()
    assert not stepper.frame().filled[0, 3].any()
    session.set_option("strategy", "batched")
    stepper.seek_cell(0, 2, 3, 3)
    assert stepper.frame().filled.all()


def test_seek_never_replays(monkeypatch):
    _session, stepper = make("random")
    calls = []
    original = LoopTrace.step
    monkeypatch.setattr(LoopTrace, "step", lambda self, n: calls.append(n) or original(self, n))
    stepper.seek(len(stepper.trace) - 5)
    stepper.step_back()
    assert len(calls) <= 4  # frame building seeks directly: a handful of O(d) calls


def test_granularity_cell_advances_all_of_d_at_once():
    _session, stepper = make(granularity="cell")
    assert stepper.count == 9
    stepper.step_forward()
    frame = stepper.frame()
    assert frame.step.d == 1 and frame.step.cell_complete and frame.step.partial_sum == 1
    assert frame.counter == "cell 1 of 9 · (t1, t1) · head 1 of 1"
    assert frame.filled.sum() == 1


def test_row_and_head_granularities():
    session, stepper = make("random", granularity="row")  # T=8, H=4
    stepper.step_forward()
    assert stepper.frame().filled[0, 0, 0].all() and stepper.frame().filled.sum() == 8
    assert stepper.frame().counter.startswith("row 1 of 32 · query t1")
    session.set_option("granularity", "head")
    stepper.step_forward()
    assert stepper.frame().filled[0, 0].all() and stepper.frame().filled.sum() == 64


def test_switching_granularity_keeps_the_place():
    session, stepper = make()
    steps(stepper, 3)  # mid-cell (t1, t2)
    session.set_option("granularity", "cell")
    assert stepper.cursor == 2 and stepper.index == 1
    stepper.step_forward()  # finishes that cell
    assert stepper.cursor == 3
    stepper.step_back()
    assert stepper.cursor == 1


def test_matmul_fills_one_head_per_step_and_batched_all_at_once():
    session, stepper = make("random", strategy="matmul")  # H = 4
    assert stepper.count == 4
    for h in range(4):
        stepper.step_forward()
        frame = stepper.frame()
        assert frame.step is None and frame.cell is None and frame.head == h
        assert frame.filled[0, : h + 1].all() and not frame.filled[0, h + 1 :].any()
        assert "1 matmul call per head" in frame.counter
    session.set_option("strategy", "batched")
    stepper.to_start()
    assert stepper.count == 1
    stepper.step_forward()
    assert stepper.frame().filled.all() and stepper.at_end
    assert stepper.frame().counter == "batched call 1 of 1 · all 4 heads in one call"


def test_switching_strategy_ends_the_step_through():
    session, stepper = make("random")
    seen = []
    stepper.changed.connect(seen.append)
    stepper.seek_cell(0, 1, 2, 2)
    session.set_option("strategy", "matmul")
    assert seen[-1] is None and stepper.frame() is None  # the views show the whole result
    assert stepper.cursor == -1 and session.options.step == -1
    stepper.step_forward()  # a new step-through, by matmul: one head per step
    assert stepper.frame().filled[0, 0].all() and not stepper.frame().filled[0, 1].any()


def test_editing_a_value_mid_run_ends_the_step_through_and_the_next_uses_it():
    session, stepper = make()
    stepper.seek_cell(0, 0, 1, 0)  # q2·k1, d = 0 done: 0·1
    session.set_cell("key", 0, 1, 3.0)  # k1 = (1, 3)
    assert stepper.frame() is None and stepper.cursor == -1
    stepper.seek_cell(0, 0, 1, 0)
    stepper.step_forward()
    assert stepper.frame().step.partial_sum == 3.0  # 0·1 + 1·3
    assert stepper.frame().working == "0·1 + 1·3 = 3"


def test_undo_and_redo_keep_the_step_through_at_its_place_on_the_restored_numbers():
    session, stepper = make()
    session.load(preset("identity").snapshot, preset("identity").options, "load identity")
    session.set_option("strategy", "loop")
    steps(stepper, 5)  # identity 4×4: q1·k3, its first multiply-add done
    assert session.undo()  # back to the worked example (T = 3, d = 2): the step is a view setting
    frame = stepper.frame()
    assert frame is not None and session.options.step == 4 and stepper.cursor == 4
    assert frame.filled.shape == (1, 1, 3, 3)
    assert frame.filled[0, 0].tolist() == [[True, True, False]] + [[False] * 3] * 2
    assert frame.step.partial_sum == 1.0  # q1·k3 with the worked numbers: 1·1 + 0·1, d1 done
    assert session.redo()
    frame = stepper.frame()
    assert frame is not None and session.options.step == 4
    assert frame.filled.shape == (1, 1, 4, 4)
    session.set_cell("query", 0, 0, 2.0)  # an edit (not an undo) ends it
    assert stepper.frame() is None and session.options.step == -1


def test_undo_clamps_a_step_beyond_the_restored_run():
    session, stepper = make()
    session.load(preset("identity").snapshot, preset("identity").options, "load identity")
    session.set_option("strategy", "loop")
    stepper.to_end()  # 4·4·4 = 64 multiply-adds: cursor 63
    assert session.undo()  # 3·3·2 = 18 multiply-adds
    assert session.options.step == 17 and stepper.at_end and stepper.frame() is not None


def test_loading_a_session_saved_mid_step_reopens_at_its_step():
    from dataclasses import replace

    session, stepper = make()
    steps(stepper, 3)
    p = preset("exercise")
    session.load(p.snapshot, replace(p.options, step=7), "open saved")
    assert stepper.cursor == 7 and stepper.frame() is not None


def test_shape_change_restarts_at_the_start():
    session, stepper = make()
    steps(stepper, 5)
    session.insert_token()
    assert stepper.cursor == -1 and session.options.step == -1
    assert stepper.frame() is None
    assert stepper.count == 32
    stepper.step_forward()
    assert stepper.frame().filled.shape == (1, 1, 4, 4)


def test_step_option_from_the_session_seeks():
    session, stepper = make()
    session.set_option("step", 9)
    assert stepper.cursor == 9 and stepper.frame().step.index == 9


def test_stop_emits_none():
    _, stepper = make()
    seen = []
    stepper.changed.connect(seen.append)
    stepper.step_forward()
    stepper.stop()
    assert seen[-1] is None and stepper.cursor == -1


def test_predict_accepts_a_right_answer_on_the_exercise():
    _session, stepper = make("exercise")  # predict on, step by cell
    assert stepper.predicting
    stepper.seek_cell(0, 0, 1, 2)
    stepper.step_forward()  # finish (t2, t3)
    assert not stepper.step_forward()  # asks before revealing q2·k4
    assert stepper.needs_answer
    assert stepper.prediction.cell == (0, 0, 1, 3)
    assert not stepper.frame().filled[0, 0, 1, 3]
    verdict = stepper.answer("0")
    assert verdict.status == "right" and verdict.working == "0·2 + 1·0 = 0"
    assert stepper.frame().filled[0, 0, 1, 3]  # revealed
    assert stepper.frame().step.partial_sum == 0.0
    assert "Right" in verdict.text


def test_predict_corrects_a_wrong_answer():
    _session, stepper = make("exercise")
    stepper.seek(6)  # cells done up to (t2, t3)
    stepper.step_forward()
    verdict = stepper.answer("1")
    assert verdict.status == "wrong" and verdict.answer == 1.0
    assert verdict.text == "Not quite: you said 1, but query t2 · key t4 = 0·2 + 1·0 = 0"


def test_predict_rejects_text_and_keeps_asking():
    _, stepper = make("exercise")
    stepper.step_forward()
    with pytest.raises(ValueError, match="not a number"):
        stepper.answer("zero")
    assert stepper.needs_answer


def test_predict_skip_and_multiply_add_granularity():
    _session, stepper = make(predict=True)
    assert not stepper.step_forward() and stepper.needs_answer
    assert stepper.step_forward()  # stepping again reveals without an answer
    assert stepper.prediction.status == "skipped" and stepper.cursor == 0
    assert stepper.step_forward()  # second multiply-add of the same cell: no question
    assert not stepper.step_forward()  # the next cell asks again
    assert stepper.prediction.cell == (0, 0, 0, 1)


def test_predict_off_for_other_strategies():
    _session, stepper = make(predict=True, strategy="batched")
    assert not stepper.predicting
    assert stepper.step_forward()


def test_prediction_tolerance():
    assert prediction_is_right(0.33, 1 / 3)
    assert prediction_is_right(0, 0.0)
    assert not prediction_is_right(2, 2.5)
    assert not prediction_is_right(0.1, 0.0)


def test_code_lines_and_locals():
    session, stepper = make()
    stepper.step_forward()
    source_lines = __import__("attn_explorer.compute").compute.strategy_source("loop").splitlines()
    ran, also = code_lines(stepper.frame())
    assert source_lines[ran].strip() == "total += Q[i][d] * K[j][d]" and also is None
    stepper.step_forward()  # completes cell (t1, t1)
    ran, also = code_lines(stepper.frame())
    assert source_lines[also].strip() == "scores[i][j] = total"
    assert dict(frame_locals(stepper.frame())) == {
        "b": "0",
        "h": "0",
        "i": "0",
        "j": "0",
        "d": "1",
        "Q[i][d]": "0",
        "K[j][d]": "0",
        "total": "1",
    }
    session.set_option("granularity", "cell")
    ran, _ = code_lines(stepper.frame())
    assert source_lines[ran].strip() == "scores[i][j] = total"


def test_summary_text():
    assert summary_text((1, 1, 3, 2), (1, 1, 3, 2)) == (
        "loop: 18 multiply-adds in 9 body visits · matmul: 1 call per head · batched: 1 call"
    )
    assert "matmul: 1 call per head (8 calls)" in summary_text((2, 4, 3, 2), (2, 4, 3, 2))


def test_no_history_kept():
    _session, stepper = make("random")
    stepper.to_end()
    sizes = {name: np.asarray(v).size for name, v in vars(stepper).items() if isinstance(v, list)}
    assert not sizes  # the model holds a cursor, not a list of past steps
