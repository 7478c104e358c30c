"""The Model dock's commands a lesson may call: open an installed model, type the probe,
show a head score, select the head a learner would click, ablate it.

:class:`ModelSteps` meets :class:`~attn_explorer.lessons.window.ModelDock`. Each command
does what the user's gestures do (the panel's own buttons and cell clicks), and a command
that starts a model run waits for its answer — the attention, then the next-token bars —
in a local event loop, so the lesson's next check reads what the learner sees. The window
stays live while it waits (the model runs in the dock's worker, as always).

The wait ends on what the dock does, never on a clock: when the answer is in, or when the
dock is idle without it (the run failed or was stopped: the command says why at once). A
120 s deadline failed lesson 14 on a loaded machine, where opening SmolLM2 and reading the
probe took minutes (issue 36); the dock's worker always ends, however slow.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from attn_explorer.models.discovery import SMOLLM2_INSTALL, smollm2_file
from attn_explorer.models.session import head_name
from attn_explorer.ui.lessons.compare_steps import CompareSteps
from attn_explorer.ui.lessons.waiting import wait_for
from attn_explorer.ui.model.analysis_panel import SCORE_LABELS
from attn_explorer.ui.model.model_view import ModelView

#: Models a lesson may open by name: name -> (find the installed file, how to install it).
INSTALLED_MODELS: dict[str, tuple[Callable[[], Path | None], str]] = {
    "smollm2": (smollm2_file, SMOLLM2_INSTALL),
}


class ModelSteps(CompareSteps):
    """The lesson commands over one :class:`ModelView` (see the module docstring); the
    Compare page's are in :class:`~attn_explorer.ui.lessons.compare_steps.CompareSteps`."""

    def __init__(self, view: ModelView) -> None:
        self.view = view
        self.panel = view.analysis

    # -- commands ------------------------------------------------------------------------
    def open_model(self, name: str, text: str) -> None:
        """Choose the installed model ``name`` and read ``text`` (if it is not open already);
        ValueError if it is not installed."""
        if name not in INSTALLED_MODELS:
            raise ValueError(f"model {name!r}: a lesson may open {', '.join(INSTALLED_MODELS)}")
        find, install = INSTALLED_MODELS[name]
        path = find()
        if path is None:
            raise ValueError(f"{name} is not installed here; {install}")
        if self.view.session.folder == str(path) and self.view.result is not None:
            return  # open already (a lesson replaying its steps): keep what it shows
        self.view.set_model_folder(path)
        self.view.set_sentence(text)
        # The attention is enough: the logit lens of this text is dropped for the next one.
        self._wait(lambda: self.view.session.folder == str(path), bars=False)

    def read_probe(self) -> None:
        """Press "Repeated tokens" (the seeded probe text) and wait for the scores and bars."""
        self._show_page("Head scores")
        self.panel.probe_button.click()
        self._wait()

    def show_score(self, score: str) -> None:
        """Show the layers × heads heatmap of ``score`` (the panel's score choice)."""
        self._check_score(score)
        self.panel.score_combo.setCurrentIndex(list(SCORE_LABELS).index(score))
        self._show_page("Head scores")

    def select_top_head(self, score: str) -> tuple[int, int]:
        """Click the brightest cell of ``score``'s heatmap, as a learner would: that head
        opens in the dock. Returns its (layer, head), 0-based."""
        self.show_score(score)
        values = self.panel.scores.get(score)
        if values is None or not np.isfinite(values).any():
            raise ValueError(f"{SCORE_LABELS[score]}: no head has this score on this text yet")
        layer, head = np.unravel_index(int(np.nanargmax(values)), values.shape)
        self.panel.select_cell(int(layer), int(head))
        return int(layer), int(head)

    def ablate_selected(self) -> None:
        """Press "Ablate selected head": the next-token bars show both distributions."""
        if self.panel.decoder() is None:
            raise ValueError("ablation needs a decoder's result; open the model first")
        self._show_page("Next token")
        self.panel.ablate_button.click()

    # -- what a lesson checks ------------------------------------------------------------
    def selected_head(self) -> str:
        """The selected head as the dock names it ("layer 2 · head 4"), "" before a result."""
        if self.view.result is None:
            return ""
        return head_name(*self.view.selected_head)

    def head_score(self, score: str) -> float | None:
        """The selected head's ``score`` (None where undefined or before a result)."""
        self._check_score(score)
        values = self.panel.scores.get(score)
        if values is None:
            return None
        value = float(values[self.view.selected_head])
        return value if np.isfinite(value) else None

    def next_token(self) -> str:
        """The clean run's most probable next token, as the bars label it ("" before)."""
        return self.panel.top[0].token if self.panel.top else ""

    def ablated_next_token(self) -> str:
        """The most probable next token with the selected head ablated ("" before)."""
        effect, decoder = self.panel.effect, self.panel.decoder()
        if effect is None or decoder is None:
            return ""
        return str(decoder.tokenizer.readable(int(np.argmax(effect.probs))))

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _check_score(score: str) -> None:
        if score not in SCORE_LABELS or score == "ablation":
            names = ", ".join(s for s in SCORE_LABELS if s != "ablation")
            raise ValueError(f"score {score!r}: one of {names}")

    def _show_page(self, title: str) -> None:
        self._leave_compare()  # the grid and its tabs, where this page is
        tabs = self.view.lower_tabs
        for index in range(tabs.count()):
            if tabs.tabText(index) == "Analysis":
                tabs.setCurrentIndex(index)
        pages = self.panel.pages
        for index in range(pages.count()):
            if pages.tabText(index) == title:
                pages.setCurrentIndex(index)

    def _wait(self, also: Callable[[], bool] = lambda: True, bars: bool = True) -> None:
        """Wait until the dock is idle with a result (a new one if the command started a
        run: the dock is busy) and, with ``bars``, its next-token bars in."""
        view, panel = self.view, self.panel
        before, started = view.result, view.busy

        def ready() -> bool:
            if view.busy or not also():
                return False
            if view.result is None or (started and view.result is before):
                return False
            if not bars or panel.decoder() is None:
                return True
            return bool(panel.top) and not panel.lens_runner.is_busy()

        def over() -> bool:  # idle, nothing more on its way: the run failed or was stopped
            return not view.busy and not panel.lens_runner.is_busy() and not ready()

        if not wait_for(ready, over):
            raise ValueError(f"the model run ended without its answer: {view.status_label.text()}")
