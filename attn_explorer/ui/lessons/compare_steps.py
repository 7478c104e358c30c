"""The Compare page's commands a lesson may call (issue 35, lesson 15): type a corrupted
prompt, patch every head, click the head high in both maps, ablate those heads.

:class:`CompareSteps` is mixed into :class:`~attn_explorer.ui.lessons.model_steps.ModelSteps`
(the :class:`~attn_explorer.lessons.window.ModelDock` a lesson drives). Each command does
what the user's gestures do on the Compare page and waits, in a local event loop, for the
answer the learner then sees; the window stays live while it waits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attn_explorer.ui.lessons.waiting import wait_for
from attn_explorer.ui.model.analysis_panel import AnalysisPanel
from attn_explorer.ui.model.compare.panel import compare_of
from attn_explorer.ui.model.compare.state import circuit_heads
from attn_explorer.ui.model.model_view import ModelView


class CompareSteps:
    """Compare, patch and ablate over one :class:`ModelView` (see the module docstring)."""

    view: ModelView
    panel: AnalysisPanel

    def _wait_for(self, ready: Callable[[], bool], what: str) -> None:
        """Wait until ``ready()``, or until the page is idle without it (the work failed or
        was stopped: its line says why); no deadline, so a loaded machine only waits longer."""
        compare = compare_of(self.view)
        if not wait_for(ready, lambda: not compare.busy):
            raise ValueError(f"{what} did not come: {compare.line.text()}")

    def compare(self, corrupt: str) -> None:
        """Type ``corrupt`` beside the sentence and wait for the comparison (or its line)."""
        compare = compare_of(self.view)
        edit = compare.corrupt_edit
        if edit is None or self.view.result is None or not self.view.result.causal:
            raise ValueError("comparing needs a decoder's result; open the model first")
        edit.setText(corrupt)
        if compare.toggle is not None:
            compare.toggle.setChecked(True)
        compare.compare_now()  # no pause to wait out: the lesson typed it whole

        def ready() -> bool:
            if compare.busy:
                return False
            outcome = compare.state.outcome
            return outcome is not None or compare.line.text().startswith(("Corrupted", "Nothing"))

        self._wait_for(ready, "the comparison")
        if compare.state.outcome is None:
            raise ValueError(compare.line.text())

    def patch_heads(self) -> None:
        """Press "every head" on the Patching page (no question: the lesson said how long)."""
        compare = compare_of(self.view)
        compare.pages.setCurrentWidget(compare.patching)
        if not compare.patching.start("heads", ask=False):
            raise ValueError(compare.line.text())
        self._wait_for(lambda: compare.state.heads is not None, "the patching map")

    def select_top_patched(self) -> tuple[int, int]:
        """Click the head high in both the patching map and the attribution: it opens in
        both runs. Returns its (layer, head), 0-based."""
        heads = self._circuit(1)
        layer, head = heads[0]
        compare_of(self.view).patching.open_head(layer, head)
        return layer, head

    def ablate_top_patched(self, count: int) -> None:
        """Ablate the ``count`` heads high in both maps together, on the sentence alone:
        the Analysis tab's next-token bars show the clean and the ablated run."""
        heads = self._circuit(count)
        self._leave_compare()
        tabs = self.view.lower_tabs
        for index in range(tabs.count()):
            if tabs.tabText(index) == "Analysis":
                tabs.setCurrentIndex(index)
        if self.panel.decoder() is None:
            raise ValueError("ablation needs a decoder's result; open the model first")
        self.panel.ablate(heads)

    def patched_recovery(self) -> float | None:
        """The selected head's recovered logit difference in the patching map, or None."""
        heads = compare_of(self.view).state.heads
        if heads is None:
            return None
        return float(heads[self.view.selected_head])

    def ablated_logit_change(self) -> float | None:
        """How much the ablation moved the clean prediction's logit (None before one)."""
        effect = self.panel.effect
        return None if effect is None else float(effect.logit_change)

    def _leave_compare(self) -> None:
        """Back to the grid and its tabs (the Compare view, if attached, switched off)."""
        panel = getattr(self.view, "compare", None)
        toggle = getattr(panel, "toggle", None)
        if toggle is not None:
            toggle.setChecked(False)

    def _circuit(self, count: int) -> list[tuple[int, int]]:
        state = compare_of(self.view).state
        if state.heads is None or state.outcome is None:
            raise ValueError("patch every head first: the map is empty")
        attributed = state.outcome.attribution.heads
        if attributed is None:
            raise ValueError(state.outcome.attribution.note or "no per-head attribution here")
        heads = circuit_heads(state.heads, np.asarray(attributed), count)
        if not heads:
            raise ValueError("no head is high in both the patching map and the attribution")
        return heads
