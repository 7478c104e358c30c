"""The window's command layer: one object whose methods the menus, the views and the lessons call.

:class:`Commands` meets :class:`~attn_explorer.lessons.window.LessonWindow` (and so
:class:`~attn_explorer.lessons.window.WindowCommands`): the menus' actions
(:mod:`.actions`) and the lessons engine both run against that Protocol, never against
the window. Each command is a few lines handing work to the application state, to
``FileCommands`` or to a view; it also wires the views' gestures (a click on a score
cell, "take this head") to the commands they mean. No math, no layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QMessageBox, QWidget

from attn_explorer.state.app_state import AppState
from attn_explorer.ui.common.text import message_box
from attn_explorer.ui.explorer.matrix_table import MatrixTable
from attn_explorer.ui.explorer.score_grid import ScoreGrid
from attn_explorer.ui.lessons.highlight import DEFAULT_HIGHLIGHT_MS, Highlighter
from attn_explorer.ui.stepper.stepper_panel import StepperPanel
from attn_explorer.ui.window import saved_layout
from attn_explorer.ui.window.actions import shortcut_rows
from attn_explorer.ui.window.deferred import DeferredViews
from attn_explorer.ui.window.docks import Docks, show_dock
from attn_explorer.ui.window.file_commands import FileCommands
from attn_explorer.ui.window.keyboard import HELP_LINES

if TYPE_CHECKING:
    from attn_explorer.models import ModelAttention
    from attn_explorer.ui.explorer.heatmaps import HeatmapGrid
    from attn_explorer.ui.lessons.model_steps import ModelSteps
    from attn_explorer.ui.model.model_view import ModelView
    from attn_explorer.ui.vectors.vectors_view import VectorsView


class Commands:
    """Every command of one window over its :class:`AppState` (see the module docstring).

    ``shortcut_actions`` lists the actions whose shortcuts the F1 help shows.
    """

    def __init__(
        self,
        host: QMainWindow,
        state: AppState,
        files: FileCommands,
        *,
        views: DeferredViews,
        docks: Docks,
        tables: dict[str, MatrixTable],
        stepper: StepperPanel,
        score_grid: ScoreGrid,
        shape_label: QLabel,
        shortcut_actions: Callable[[], Sequence[QAction]],
    ) -> None:
        self.host = host
        self.state = state
        self.session = state.session
        self.files = files
        self.views = views
        self.docks = docks
        self.tables = tables
        self.stepper = stepper
        self.score_grid = score_grid
        self.shape_label = shape_label
        self.shortcut_actions = shortcut_actions
        self.highlighter = Highlighter(host, views.reveal)
        s = self.session
        score_grid.cellClicked.connect(
            lambda i, j: self.seek_cell(s.options.batch_index, s.options.head, i, j)
        )
        views.built.connect(self._wire)

    @property
    def heatmaps(self) -> HeatmapGrid | None:
        """The interactive heatmaps, once built (just after the first paint)."""
        return self.views.heatmaps

    def _wire(self, name: str, view: object) -> None:
        """A late view's gestures to the commands they mean (see ``DeferredViews.built``)."""
        s = self.session
        if name == "heatmaps":
            grid = cast("HeatmapGrid", view)  # the "heatmaps" payload (imported late)
            grid.cellClicked.connect(lambda h, i, j: self.seek_cell(s.options.batch_index, h, i, j))
            grid.exportRequested.connect(self.export_dialog)
        elif name == "model":
            model = cast("ModelView", view)  # the "model" payload
            model.headTaken.connect(self.take_model_head)
            from attn_explorer.ui.model.compare.panel import attach_compare
            from attn_explorer.ui.model.compare.prompt_files import keep_prompts

            attach_compare(model)  # two prompts: the corrupted one beside the sentence
            keep_prompts(model, self.state.document)  # File ▸ Save keeps the dock's prompts

    # -- the explorer -------------------------------------------------------------------------
    def set_strategy(self, name: str) -> None:
        self.session.set_option("strategy", name)

    def set_stage(self, name: str) -> None:
        self.session.set_option("stage", name)

    def confirm_discard(self) -> bool:
        """Ask Save / Discard / Cancel if replacing the numbers would lose unsaved work."""
        return self.files.confirm_discard()

    def load_preset(self, name: str, *, confirm: bool = False, **kwargs: int) -> bool:
        """Load a preset as an untitled document (lessons and tests; the menu asks first)."""
        return self.files.load_preset(name, confirm=confirm, **kwargs)

    def take_model_head(
        self, layer: int, head: int, attention: ModelAttention | None = None
    ) -> bool:
        """Load one real head's Q, K, V (each (T, d_head)) into the tables; undoable, untitled.

        The head is ``attention``'s, by default the Model dock's current result.
        """
        if attention is None and self.views.model_view is not None:
            attention = self.views.model_view.result
        if attention is None:
            self.session.report("Nothing to take yet: type a sentence first.")
            return False
        from attn_explorer.models.batch import (
            taken_batch,
            taken_inputs,
            taken_note,
            taken_options,
            taken_title,
        )
        from attn_explorer.models.take_head import explorer_options, head_source

        try:
            snapshot = taken_inputs(attention, layer, head)
        except ValueError as exc:
            self.session.report(f"Could not take the head: {exc}")
            return False
        title, source = taken_title(attention, layer, head), head_source(attention, layer, head)
        options = taken_options(explorer_options(self.session.options, attention), attention)
        if not self.files.replace(snapshot, options, f"take {title}", title, source=source):
            return False
        self.session.report(
            f"Loaded {source.describe()}{taken_batch(attention)}: "
            f"{len(snapshot.tokens)} tokens, d = {snapshot.shape[-1]}. "
            f"Every explorer feature now works on this real head.{taken_note(attention)}",
            "info",
        )
        return True

    def seek_cell(self, batch: int, head: int, i: int, j: int) -> None:
        """Step the loop to score cell (batch, head, i, j), in the stepper brought to the front.

        The vectors view selects the pair too, but only for the head it draws, and not while
        the stepper asks for a prediction (the arrows would give the answer away; it
        selects the pair once the answer is in).
        """
        options = self.session.options
        if (batch, head) == (options.batch_index, options.head) and not options.predict:
            self.state.vectors.select_cell(i, j)
        self.stepper.seek_cell(batch, head, i, j)
        show_dock(self.docks.stepper)

    # -- the focused table ----------------------------------------------------------------------
    def _focused_table(self) -> MatrixTable:
        focus = QApplication.focusWidget()
        while focus is not None and not isinstance(focus, MatrixTable):
            focus = focus.parentWidget()
        return focus if isinstance(focus, MatrixTable) else self.tables["query"]

    def copy_cells(self) -> str:
        return self._focused_table().copy_selection()

    def paste_cells(self) -> bool:
        return self._focused_table().paste()

    def remove_current_token(self) -> bool:
        index = self._focused_table().currentIndex()
        return self.session.remove_token(
            index.row() if index.isValid() else self.session.shape[2] - 1
        )

    def rename_current_token(self) -> None:
        table = self._focused_table()
        index = table.currentIndex()
        table.rename_token(index.row() if index.isValid() else 0)

    # -- views, dialogs, docks -----------------------------------------------------------------
    def toggle_enlarge(self) -> None:
        heatmaps = self.views.heatmaps
        if heatmaps is not None:
            enlarged = heatmaps.enlarged
            heatmaps.set_enlarged(None if enlarged is not None else self.session.options.head)

    def set_dark(self, dark: bool) -> None:
        saved_layout.set_dark(dark)

    def export_dialog(self, heads: str | None = None) -> None:
        from attn_explorer.ui.window.dialogs import export_dialog

        export_dialog(self.host, self.state, heads)

    def random_preset_dialog(self) -> None:
        from attn_explorer.ui.window.dialogs import random_preset_dialog

        random_preset_dialog(self.host, self.files)

    def run_timing(self, run_loop: bool = False) -> None:
        """Time the strategies on the current shape, in the Timing dock brought to the front."""
        panel = self.views.build_timing()
        show_dock(self.docks.timing)
        panel.run_timing(run_loop)

    def run_sweep(self) -> None:
        panel = self.views.build_timing()
        show_dock(self.docks.timing)
        panel.run_sweep()

    def cancel_timing(self) -> None:
        if self.views.timing_panel is not None:
            self.views.timing_panel.runner.cancel()

    def open_model_view(self) -> ModelView:
        """Show the Model dock (real BERT-family attention), creating it on first use."""
        return self.views.model()

    def model_dock(self) -> ModelSteps:
        """The Model dock's lesson commands (ui/lessons/model_steps.py), the dock shown."""
        from attn_explorer.ui.lessons.model_steps import ModelSteps

        return ModelSteps(self.open_model_view())

    def open_model_folder(self) -> None:
        self.open_model_view().choose_folder()

    def open_model_file(self) -> None:
        self.open_model_view().choose_file()

    def open_vectors_view(self) -> VectorsView:
        """Show the Vectors dock (queries and keys as arrows), creating it on first use."""
        return self.views.vectors()

    def open_lessons(self) -> None:
        assert self.docks.lessons is not None  # placed by the window as it is built
        self.docks.lessons.open()

    def highlight_targets(self) -> dict[str, QWidget]:
        """The controls a lesson may point at, by name (their object names)."""
        return self.highlighter.targets()

    def highlight(self, name: str | None, duration_ms: int = DEFAULT_HIGHLIGHT_MS) -> None:
        """Draw an orange frame around a named control for a moment (None clears)."""
        self.highlighter.highlight(name, duration_ms)

    # -- help, quit ------------------------------------------------------------------------------
    def shortcuts_text(self) -> str:
        """Every shortcut, read from the actions themselves (the README's table agrees)."""
        lines = [f"{keys} — {what}" for keys, what in shortcut_rows(self.shortcut_actions())]
        lines.append(
            "Alt+1 … Alt+4 switch strategy while a table or a box has the keyboard; "
            "Escape gives the keyboard back to the window"
        )
        lines.extend(HELP_LINES)
        return "\n".join(lines)

    def show_shortcuts(self) -> None:
        message_box(
            self.host, QMessageBox.Icon.Information, "Keyboard shortcuts", self.shortcuts_text()
        )

    def about(self) -> None:
        from attn_explorer.ui.common.icons import about_text

        QMessageBox.about(self.host, "About Attention Explorer", about_text())

    def quit(self) -> None:
        self.host.close()
