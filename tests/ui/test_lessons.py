"""Guided lessons played in the real window, as a learner would (offscreen)."""

from __future__ import annotations

import pytest
import qt_idle
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QImage

from attn_explorer.lessons.engine import RESTORED_NOTE, Lesson, LessonRunner, Step, load_lessons
from attn_explorer.lessons.registry import HIGHLIGHT_TARGETS
from attn_explorer.ui.common import palette
from attn_explorer.ui.common.settings import settings
from attn_explorer.ui.lessons.lessons_panel import SHORTCUT

S = [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 2.0]]
LESSONS = load_lessons()


@pytest.fixture
def window(new_window, qtbot):
    w = new_window()
    yield w
    w.timing_panel.runner.cancel(quiet=True)
    qtbot.waitUntil(lambda: not w.timing_panel.runner.is_busy(), timeout=30_000)


@pytest.fixture
def panel(window):
    window.lessons_dock.open()
    return window.lessons


def grid(window) -> list[list[float | None]]:
    return [
        [float(c) if c not in ("", "…") else None for c in row]
        for row in window.score_grid.text_grid()
    ]


def settle(qtbot, window, runner: LessonRunner) -> None:
    """Let a step's animation finish (play) before its expectations are checked."""
    step = runner.step
    assert step is not None
    if any(a["do"] == "stepper.play" for a in step.actions):
        qtbot.waitUntil(lambda: not window.stepper.is_playing(), timeout=15_000)
    qt_idle.settle()


def not_blank(image: QImage) -> bool:
    small = image.scaled(120, 80)
    colours = {small.pixel(x, y) for x in range(small.width()) for y in range(small.height())}
    return len(colours) > 20


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
@pytest.mark.slow
def test_every_lesson_runs_to_its_end_and_keeps_its_promises(
    qtbot, window, panel, lesson, tmp_path
):
    panel.start_lesson(lesson.id, 0)
    first = window.grab()
    assert not_blank(first.toImage())
    assert first.save(str(tmp_path / f"{lesson.id}.png"))
    assert window.lessons_dock.isVisible() and panel.text.toPlainText().strip()
    seen = 0
    while True:
        runner = panel.runner
        settle(qtbot, window, runner)
        assert runner.failures() == []
        assert not panel.note.isVisible()  # nobody changed anything: no restore note
        assert panel.counter.text() == f"Step {runner.index + 1} of {len(lesson.steps)}"
        seen += 1
        if runner.at_end:
            break
        qtbot.mouseClick(panel.next_button, Qt.MouseButton.LeftButton)
    assert seen == len(lesson.steps)
    assert panel.is_done(lesson.id)
    qtbot.waitUntil(lambda: not window.timing_panel.runner.is_busy(), timeout=60_000)


@pytest.mark.slow
def test_lesson_2_plays_the_loop_to_s(qtbot, window, panel):
    panel.start_lesson("02-loop-visits-every-pair", 0)
    assert grid(window) == [[None] * 3] * 3
    panel.next()  # play
    qtbot.waitUntil(lambda: not window.stepper.is_playing(), timeout=15_000)
    frame = window.stepper.frame()
    assert frame.counter.startswith("cell 9 of 9")
    assert grid(window) == S
    panel.next()
    assert grid(window) == S
    assert "18 multiply-adds in 9 body visits" in window.stepper.stepper.summary()


@pytest.mark.slow
def test_lesson_6_batching_keeps_the_head_count(qtbot, window, panel):
    panel.start_lesson("06-batching-the-heads", 0)
    assert window.session.shape[1] == 2
    assert window.stepper.frame().count == 1
    while not panel.runner.at_end:
        panel.next()
    for strategy in ("loop", "matmul", "batched"):
        window.commands.set_strategy(strategy)
        assert window.session.shape[1] == 2
        assert "H=2" in window.shape_label.text()


@pytest.mark.slow
def test_lesson_4_predicting_right_then_next_reveals_q2_k4(qtbot, window, panel):
    panel.start_lesson("04-predict-a-score", 0)
    stepper_panel = window.stepper
    qtbot.keyClicks(stepper_panel.answer_edit, "1")
    qtbot.mouseClick(stepper_panel.check_button, Qt.MouseButton.LeftButton)
    assert stepper_panel.frame().prediction.status == "right"
    panel.next()
    assert "query t2 · key t4" in stepper_panel.frame().prediction.text
    qtbot.keyClicks(stepper_panel.answer_edit, "0")
    qtbot.keyClick(stepper_panel.answer_edit, Qt.Key.Key_Return)
    panel.next()
    assert panel.runner.failures() == []
    assert not panel.note.isVisible()  # answering is what the lesson asked for
    assert stepper_panel.frame().prediction.status == "right"
    assert grid(window)[1][1] == 1 and grid(window)[1][3] == 0


@pytest.mark.slow
def test_next_restores_the_lesson_after_the_user_changed_it(qtbot, window, panel):
    panel.start_lesson("02-loop-visits-every-pair", 2)
    assert grid(window) == S
    window.session.set_cell("query", 0, 0, 5.0)  # the learner pokes at the numbers
    window.commands.set_strategy("batched")
    assert grid(window) != S
    panel.next()
    assert panel.runner.index == 3
    assert panel.note.isVisible() and panel.note.text() == RESTORED_NOTE
    assert panel.runner.failures() == []
    assert window.session.head_matrix("query")[0].tolist() == [1.0, 0.0]
    assert window.session.options.strategy == "loop"
    # the learner's edit is still on the undo stack
    assert window.session.can_undo()


@pytest.mark.slow
def test_moving_the_stepper_is_not_a_change_to_restore(qtbot, window, panel):
    panel.start_lesson("01-one-score", 0)
    window.stepper.to_end()
    window.session.set_option("head", 0)
    panel.next()
    assert not panel.note.isVisible()
    assert panel.runner.failures() == []


@pytest.mark.slow
def test_back_shows_the_previous_step_as_the_lesson_set_it_up(qtbot, window, panel):
    panel.start_lesson("07-batch-head-sequence", 0)
    panel.next()
    panel.next()
    assert window.session.shape[:3] == (1, 2, 4)
    panel.back()
    assert panel.runner.index == 1
    assert window.session.shape[:3] == (1, 1, 4)
    assert panel.runner.failures() == []
    panel.restart()
    assert panel.runner.index == 0 and window.session.shape[:3] == (1, 1, 3)


@pytest.mark.slow
def test_keyboard_next_back_space_when_the_panel_has_focus(qtbot, window, panel):
    panel.start_lesson("03-one-matmul", 0)
    panel.lesson_list.setFocus()
    qtbot.waitUntil(lambda: panel.lesson_list.hasFocus())
    qtbot.keyClick(panel.lesson_list, Qt.Key.Key_Right)
    assert panel.runner.index == 1
    qtbot.keyClick(panel.text, Qt.Key.Key_Space)
    assert panel.runner.index == 2
    qtbot.keyClick(panel.next_button, Qt.Key.Key_Left)
    assert panel.runner.index == 1
    assert panel.counter.text() == "Step 2 of 4"


@pytest.mark.slow
def test_progress_is_remembered_across_windows(qtbot, window, panel, new_window):
    panel.start_lesson("03-one-matmul", 0)
    panel.next()
    panel.next()
    panel.start_lesson("01-one-score", 0)
    while not panel.runner.at_end:
        panel.next()
    second_window = new_window()
    again = second_window.lessons
    assert again.saved_step("03-one-matmul") == 2
    assert again.is_done("01-one-score")
    texts = [again.lesson_list.item(n).text() for n in range(again.lesson_list.count())]
    assert texts[0].endswith("✓")
    assert "(step 3 of 4)" in texts[2]
    assert again.current_lesson_id() == "01-one-score"
    again.start_lesson("03-one-matmul")  # resumes where the learner left it
    assert again.runner.index == 2
    assert second_window.session.options.strategy == "matmul"


@pytest.mark.slow
def test_help_menu_shortcut_and_start_here(qtbot, window, new_window):
    p, dock, action = window.lessons, window.lessons_dock, window.menu_actions.lessons
    assert not dock.isVisible()
    assert action in window.menus["Help"].actions()
    assert action.shortcut().toString() == SHORTCUT
    assert dock.start_button.isVisible()  # first launch
    assert not dock.start_button.isFlat() and not dock.start_button.icon().isNull()  # a button
    qtbot.mouseClick(dock.start_button, Qt.MouseButton.LeftButton)
    assert dock.isVisible()
    assert p.runner is not None and p.runner.lesson.id == LESSONS[0].id
    assert not dock.start_button.isVisible()
    assert settings().value("lessons/welcomed", False, type=bool)
    dock.close()
    action.trigger()
    assert dock.isVisible()
    other = new_window().lessons_dock
    assert not other.start_button.isVisible()  # only on the first launch


@pytest.mark.slow
def test_dock_is_on_the_right_and_resizable(window, panel):
    assert window.dockWidgetArea(window.lessons_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert (
        panel.minimumWidth() < window.lessons_dock.width()
        or window.lessons_dock.width() >= panel.minimumWidth()
    )
    assert window.lessons_dock.features() & window.lessons_dock.DockWidgetFeature.DockWidgetMovable
    assert panel.text.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse


@pytest.mark.slow
def test_links_in_the_text_highlight_their_control(window, panel):
    panel.start_lesson("07-batch-head-sequence", 0)
    assert "control:heads" in panel.runner.step.text
    panel.text.anchorClicked.emit(QUrl("control:heads"))
    assert window.commands.highlight_targets()["heads"].property("lessonHighlight")


def test_registry_names_only_real_highlight_targets(window):
    for name in HIGHLIGHT_TARGETS:
        window.commands.views.reveal(name)  # as a highlight does first: late views get built
    assert set(HIGHLIGHT_TARGETS) <= set(window.commands.highlight_targets())


def test_a_step_that_cannot_be_set_up_says_why(qtbot, window, panel):
    from attn_explorer.lessons.engine import parse_lesson

    bad = parse_lesson(
        {
            "title": "Bad",
            "steps": [
                {
                    "text": "Jump to a cell that is not there.",
                    "actions": [
                        {"do": "load_preset", "name": "worked"},
                        {"do": "stepper.seek_cell", "batch": 0, "head": 0, "i": 7, "j": 0},
                    ],
                }
            ],
        },
        "bad",
    )
    panel.lessons.append(bad)
    panel.start_lesson("bad", 0)
    assert panel.note.isVisible()
    assert "could not be set up" in panel.note.text() and "stepper.seek_cell" in panel.note.text()


def _lightness(colour: QColor) -> float:
    return colour.lightnessF()


@pytest.mark.parametrize("dark", [False, True])
@pytest.mark.slow
def test_text_readable_in_light_and_dark(qtbot, window, panel, dark):
    panel.start_lesson("07-batch-head-sequence", 0)
    try:
        palette.apply(dark)
        qt_idle.settle()  # the palette change reaches every widget
        image = panel.text.viewport().grab().toImage()
        base = panel.text.palette().color(panel.text.viewport().backgroundRole())
        # the most contrasting pixel is the text: it must stand well apart from the background
        contrast = max(
            abs(QColor(image.pixel(x, y)).lightnessF() - _lightness(base))
            for x in range(0, image.width(), 2)
            for y in range(0, image.height(), 2)
        )
        assert contrast > 0.5
        link = panel.text.document().toHtml()
        assert link  # rendered again for the new palette without errors
    finally:
        palette.apply(False)


def test_runner_is_qt_free_and_works_on_any_window_api():
    """The runner only needs the public actions: a fake window records what it was asked."""

    class FakeSession:
        def __init__(self) -> None:
            from attn_explorer.state import Session

            self.real = Session()

        def __getattr__(self, name):
            return getattr(self.real, name)

    calls: list[tuple] = []

    class FakeWindow:
        session = FakeSession()

        def load_preset(self, name, **kwargs):
            calls.append(("load_preset", name))

        def set_strategy(self, name):
            calls.append(("set_strategy", name))

        def highlight(self, name, duration_ms=2500):
            calls.append(("highlight", name))

    first = ({"do": "load_preset", "name": "worked"}, {"do": "highlight", "target": "heads"})
    lesson = Lesson(
        "fake", "Fake", "", (Step("t", first), Step("t", ({"do": "set_strategy", "name": "loop"},)))
    )
    runner = LessonRunner(FakeWindow(), lesson)
    runner.start()
    runner.next()
    assert ("load_preset", "worked") in calls and ("set_strategy", "loop") in calls
    calls.clear()
    runner.back()  # replays the setup, not the highlight... then runs step 1 fully
    assert calls[0] == ("highlight", None)
    assert ("load_preset", "worked") in calls


# -- issue 36, point 6: a lesson's model command waits on the dock, never on a clock ------------
@pytest.fixture
def model_view(qtbot, monkeypatch, tmp_path):
    """A Model dock with no installed model found (each test opens its own tiny file)."""
    from attn_explorer.models import discovery
    from attn_explorer.ui.model.model_view import ModelView

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    view = ModelView()
    qtbot.addWidget(view)
    view.show()
    yield view
    view.shutdown()


@pytest.fixture
def minutes_pass(monkeypatch):
    """A loaded machine, as the clock sees it: a minute passes each time the clock is read
    (the model run itself takes what it takes here)."""
    import itertools
    import time

    real, minutes = time.monotonic, itertools.count()
    monkeypatch.setattr(time, "monotonic", lambda: real() + 60.0 * next(minutes))


def installed_tiny(monkeypatch, path):
    """Lessons may open a model by name: "tiny" is ``path`` for this test."""
    from attn_explorer.ui.lessons import model_steps

    monkeypatch.setitem(model_steps.INSTALLED_MODELS, "tiny", (lambda: path, "write it"))


@pytest.mark.slow
def test_a_lesson_waits_for_a_slow_model_however_long_it_takes(
    qtbot, model_view, monkeypatch, tmp_path, minutes_pass
):
    """Lesson 14 failed under load: its command gave the model 120 s by the clock, and
    opening SmolLM2 took 101 s at load 12 (two cores, two busy loops). Here minutes pass
    on the clock while the tiny model answers; the command still waits for its answer."""
    from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
    from attn_explorer.ui.lessons.model_steps import ModelSteps

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=2)
    installed_tiny(monkeypatch, path)
    steps = ModelSteps(model_view)
    steps.open_model("tiny", " the cat sat on the mat, the cat sat on")
    assert model_view.result is not None and not model_view.busy
    assert model_view.session.folder == str(path)
    assert model_view.result.tokens[-1].strip() == "on"


@pytest.mark.slow
def test_a_model_run_that_fails_ends_the_lessons_wait_with_its_reason(
    qtbot, model_view, monkeypatch, tmp_path, minutes_pass
):
    """A failed run ends the wait as soon as the dock is idle, with the dock's own reason
    (before: the wait ran out its clock and said the model did not answer in time)."""
    from attn_explorer.ui.lessons.model_steps import ModelSteps

    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)  # a header and nothing the reader can use
    installed_tiny(monkeypatch, path)
    with pytest.raises(ValueError) as raised:
        ModelSteps(model_view).open_model("tiny", "some words")
    message = str(raised.value)
    assert message.startswith("the model run ended without its answer: ")
    assert "broken.gguf" in message and "Computing" not in message, message
    assert not model_view.busy and model_view.result is None
