"""A sliding-window band in the explorer at 1280×800.

    python docs/review/models/sliding_window_shot.py

Writes ``sliding-window.png``: a random toy example (2 heads, 8 tokens, d = 4) with the
causal mask and a window of 3 keys, on the masked stage, so the score grid and both
heatmaps show the band: row i keeps keys i − 2 … i and every other cell is −∞.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={HERE / 'screen-1300x820.json'}")


def main() -> int:
    from PySide6.QtWidgets import QApplication

    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    prepare_interpreter()
    app = QApplication.instance() or QApplication(sys.argv)
    window = MainWindow()
    window.files.ask_before_discard = False
    window.resize(1280, 800)
    window.show()

    def settle() -> None:
        for _ in range(40):
            app.processEvents()

    window.commands.load_preset("random", heads=2, tokens=8, dim=4, seed=3)
    session = window.session
    session.set_option("causal", True)
    session.set_option("window", 3)
    session.set_option("stage", "masked")
    settle()
    window.options_bar.sliding_window.setFocus()
    settle()
    path = HERE / "sliding-window.png"
    window.grab().save(str(path))
    masked = window.results.result.masked[0, 0]
    print(path, "visible keys per row:", (masked > -float("inf")).sum(axis=-1).tolist())
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
