"""The explorer window as the UI tests use it: shown, exposed, never asking to save."""

from __future__ import annotations

import pytest

from attn_explorer.ui.window.launch import prepare_interpreter
from attn_explorer.ui.window.main_window import MainWindow


def make_window(qtbot) -> MainWindow:
    w = MainWindow()
    w.files.ask_before_discard = False  # no "save changes?" dialog when qtbot closes it
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    return w


@pytest.fixture
def new_window(qtbot):
    """A factory for more windows in one test (e.g. a second launch)."""
    return lambda: make_window(qtbot)


@pytest.fixture
def window(qtbot):
    w = make_window(qtbot)
    yield w
    if getattr(w, "model_view", None) is not None:
        w.model_view.shutdown()


@pytest.fixture(autouse=True, scope="session")
def _interpreter_as_the_app_sets_it():
    """The process-wide settings ``run_app`` makes before its window (the GIL switch interval)."""
    prepare_interpreter()
