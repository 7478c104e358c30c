"""A model-based monkey: random sequences of user actions on one real window.

Hypothesis picks the actions — type into a cell, paste, undo / redo, change a
size, load a preset, strategy and stage keys, step / seek / stop the stepper,
take a real model's head, save, open, new — each through the user's entry point
(keys, menu items, clicks, dialog buttons). After every action it checks:

- nothing raised (pytest-qt fails the test on an exception in a slot);
- the score grid shows the session's current result for the current stage,
  equal to ``compute.attention`` on the session's inputs (only the stepper's
  not-yet-computed cells may be hidden, and only while it is stepping);
- every file on disk changes only when the user saved to it;
- undo restores the previous numbers and names exactly, redo the undone ones.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from attn_explorer.compute import STAGES, STRATEGIES

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier
PRESET_MENU = {
    "worked": "Worked example",
    "identity": "Identity",
    "duplicates": "Duplicate tokens (ties)",
    "causal": "Causal language model",
}
CELL_TEXTS = st.one_of(
    st.integers(-9, 9).map(str),
    st.sampled_from(["0.5", "-1.25", "1e-3", "2.5e1", "abc", "nan", "inf", "1,5", "1e999"]),
)
#: Examples run in CI; MONKEY_EXAMPLES raises it for a longer hunt.
EXAMPLES = int(os.environ.get("MONKEY_EXAMPLES", "200"))


def snapshot_key(session) -> tuple:
    snap = session.snapshot()
    return (snap.tokens, snap.query.tobytes(), snap.key.tobytes(), snap.value.tobytes(),
            snap.query.shape)  # fmt: skip


class WindowMonkey(RuleBasedStateMachine):
    """The state machine; ``user``, ``folder`` and ``head_view`` are set by the test."""

    user = None
    folder: Path = Path()
    example = 0

    def __init__(self) -> None:
        super().__init__()
        self.window = self.user.window
        self.session = self.window.session
        self.history: list[tuple] = []  # what each undo must bring back, newest last
        self.future: list[tuple] = []  # what each redo must bring back
        self.files: dict[Path, bytes] = {}  # every file written, with the bytes saved last
        WindowMonkey.example += 1
        self.save_path = self.folder / f"monkey-{WindowMonkey.example}.json"

    # -- helpers -----------------------------------------------------------------------------
    def _answer_discard_if_asked(self) -> None:
        if self.session.dirty:
            self.user.press_button("Discard")

    def _changed(self, before: tuple, *, always: bool = False) -> None:
        """Record an undoable change (a load is one even when its numbers are the same)."""
        if always or snapshot_key(self.session) != before:
            self.history.append(before)
            self.future.clear()

    @initialize()
    def start_clean(self) -> None:
        self.window.files.ask_before_discard = False
        self.user.press(Qt.Key.Key_N, CTRL, widget=self.window)
        self.window.files.ask_before_discard = True
        self.session.clear_history()
        self.window.stepper.stop()

    # -- rules ------------------------------------------------------------------------------------
    @rule(matrix=st.sampled_from(["query", "key", "value"]), row=st.integers(0, 5),
          col=st.integers(0, 3), text=CELL_TEXTS)  # fmt: skip
    def type_into_a_cell(self, matrix, row, col, text) -> None:
        _, _, t, d = self.session.shape
        row, col = row % t, col % d
        before = snapshot_key(self.session)
        self.user.type_cell(matrix, row, col, text)
        self._changed(before)

    @rule(rows=st.integers(1, 3), cols=st.integers(1, 2), value=st.integers(-3, 3),
          bad=st.booleans())  # fmt: skip
    def paste_a_block(self, rows, cols, value, bad) -> None:
        cell = "x" if bad else str(value)
        QApplication.clipboard().setText("\n".join("\t".join([cell] * cols) for _ in range(rows)))
        before = snapshot_key(self.session)
        self.user.click_cell("key", 0, 0)
        self.user.press(Qt.Key.Key_V, CTRL)
        self._changed(before)

    @rule()
    def undo(self) -> None:
        now = snapshot_key(self.session)
        self.user.press(Qt.Key.Key_Z, CTRL, widget=self.window)
        if self.history:
            assert snapshot_key(self.session) == self.history.pop(), "undo did not restore"
            self.future.append(now)
        else:
            assert snapshot_key(self.session) == now

    @rule()
    def redo(self) -> None:
        now = snapshot_key(self.session)
        self.user.press(Qt.Key.Key_Z, CTRL | SHIFT, widget=self.window)
        if self.future:
            assert snapshot_key(self.session) == self.future.pop(), "redo did not restore"
            self.history.append(now)
        else:
            assert snapshot_key(self.session) == now

    @rule(label=st.sampled_from("HTd"), value=st.integers(1, 5))
    def change_a_size(self, label, value) -> None:
        value = min(value, 2) if label == "H" else value
        before = snapshot_key(self.session)
        self.user.set_size(label, value)
        self._changed(before)

    @rule(name=st.sampled_from(sorted(PRESET_MENU)), cancel=st.booleans())
    def load_a_preset(self, name, cancel) -> None:
        before = snapshot_key(self.session)
        asked = self.session.dirty
        if asked:
            self.user.press_button("Cancel" if cancel else "Discard")
        self.user.choose("Presets", PRESET_MENU[name])
        if asked and cancel:
            assert snapshot_key(self.session) == before
        else:
            self._changed(before, always=True)
            assert not self.session.dirty and self.window.state.document.path is None

    @rule(n=st.integers(0, len(STRATEGIES) - 1))
    def strategy_key(self, n) -> None:
        self.user.press(getattr(Qt.Key, f"Key_{n + 1}"), ALT, widget=self.window)
        assert self.session.options.strategy == STRATEGIES[n]

    @rule(n=st.integers(0, len(STAGES) - 1))
    def stage_key(self, n) -> None:
        self.user.press(getattr(Qt.Key, f"Key_{n + 1}"), CTRL, widget=self.window)
        assert self.session.options.stage == STAGES[n]

    @rule(key=st.sampled_from([Qt.Key.Key_Right, Qt.Key.Key_Left, Qt.Key.Key_End,
                               Qt.Key.Key_Home]), times=st.integers(1, 3))  # fmt: skip
    def step_the_stepper(self, key, times) -> None:
        self.window.stepper_dock.raise_()
        self.window.stepper.setFocus()
        for _ in range(times):
            self.user.press(key, widget=self.window.stepper)

    @rule(i=st.integers(0, 5), j=st.integers(0, 5))
    def click_a_grid_cell(self, i, j) -> None:
        rows = len(self.user.grid())
        if rows:
            self.user.click_grid(i % rows, j % len(self.user.grid()[0]))

    @rule()
    def stop_stepping(self) -> None:
        self.user.choose("Step", "Stop stepping") if self.window.stepper.frame() else None
        assert self.window.stepper.frame() is None

    @rule(layer=st.integers(0, 1), head=st.integers(0, 1))
    def take_a_model_head(self, layer, head) -> None:
        view = self.window.model_view
        before = snapshot_key(self.session)
        view.select_head(layer, head)
        self._answer_discard_if_asked()
        self.user.click(view.take_button)
        self._changed(before, always=True)
        assert self.window.state.document.path is None and not self.session.dirty

    @rule()
    def save(self) -> None:
        if self.window.state.document.path is None:
            self.user.pick_file(self.save_path)
        self.user.press(Qt.Key.Key_S, CTRL, widget=self.window)
        path = Path(self.window.state.document.path)
        assert not self.session.dirty and path.exists()
        self.files[path] = path.read_bytes()

    @precondition(lambda self: bool(self.files))
    @rule(data=st.data())
    def open_a_saved_file(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.files)))
        self._answer_discard_if_asked()
        self.user.pick_file(path)
        self.user.press(Qt.Key.Key_O, CTRL, widget=self.window)
        assert self.window.state.document.path == str(path) and not self.session.dirty
        self.history.clear()  # the file is the new starting point
        self.future.clear()

    @rule()
    def new_session(self) -> None:
        before = snapshot_key(self.session)
        self._answer_discard_if_asked()
        self.user.press(Qt.Key.Key_N, CTRL, widget=self.window)
        self._changed(before, always=True)
        assert self.window.state.document.path is None and self.user.title() == "untitled"

    # -- what must always hold ---------------------------------------------------------------------
    @invariant()
    def the_grid_shows_the_current_result(self) -> None:
        user = self.user
        if self.session.shape[2] > 16:
            return
        if self.window.stepper.frame() is None:
            user.assert_grid_is_the_result()
            return
        expected = user.expected_grid()  # stepping: computed cells show the result, others hide
        model = self.window.score_grid.model
        for r, row in enumerate(user.grid()):
            for c, text in enumerate(row):
                if text not in ("", "…"):
                    value = float(expected[r, c])
                    wanted = "−∞" if value == -np.inf else model.short_text(value)
                    assert text == wanted, (r, c, text, wanted)

    @invariant()
    def files_change_only_on_save(self) -> None:
        for path, data in self.files.items():
            assert path.read_bytes() == data, f"{path.name} changed without a Save"

    @invariant()
    def nothing_is_left_waiting(self) -> None:
        unexpected, unanswered = list(self.user.unexpected_dialogs), len(self.user._answers)
        self.user.unexpected_dialogs.clear()
        self.user._answers.clear()
        assert QApplication.activeModalWidget() is None
        assert not unexpected, f"a dialog nobody expected: {unexpected}"
        assert not unanswered, "an expected dialog never appeared"


@pytest.mark.slow
def test_random_user_actions_keep_the_window_consistent(user, qtbot, tmp_path):
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    folder = tmp_path / "tiny-bert"
    write_tiny_bert(folder)
    view = user.window.commands.open_model_view()
    view.set_model_folder(folder)
    view.set_sentence("the cat sat on")
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    WindowMonkey.user = user
    WindowMonkey.folder = tmp_path
    run_state_machine_as_test(
        WindowMonkey,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=8,
            deadline=None,
            derandomize=os.environ.get("MONKEY_RANDOM") is None,
            database=None,
            verbosity=Verbosity.verbose if os.environ.get("MONKEY_TRACE") else Verbosity.normal,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
