"""The scaling sweep's time and memory charts with the tiled strategy, measured here.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/review/tiled/sweep_shots.py docs/review/tiled

Runs ``compute.timing.sweep_tokens`` at H = 4, d = 16 over T = 4 … 2 048 (the loop
estimated past its budget), draws it in the real window's timing dock at 1280 × 720,
and saves ``sweep-time.png`` and ``sweep-memory.png`` (the dock's "sweep: peak memory"
view), each also as ``…-panel.png`` (the timing dock alone): batched's peak grows as
T² (the grid), tiled's as T · d (tiles and output).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

SCREEN = Path(__file__).resolve().parent.parent / "models" / "screen-1300x820.json"
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={SCREEN}")

TOKENS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
HEADS, DIM = 4, 16


def main(folder: Path) -> None:
    from attn_explorer.cli.self_test import close_quietly, private_app_folders, settle
    from attn_explorer.compute.timing import sweep_tokens
    from attn_explorer.render.qt_app import qt_application

    sweep = sweep_tokens(HEADS, DIM, TOKENS)
    folder.mkdir(parents=True, exist_ok=True)
    with private_app_folders(Path(tempfile.mkdtemp(prefix="tiled-shots-"))):
        app = qt_application()
        from attn_explorer.ui.window.docks import show_dock
        from attn_explorer.ui.window.main_window import MainWindow

        window = MainWindow()
        window.resize(1280, 720)
        window.show()
        settle(app, 1.5)
        window.session.resize(heads=HEADS, dim=DIM)  # the sweep's H and d: current, not stale
        show_dock(window.timing_dock)
        panel = window.timing_panel
        assert panel is not None
        panel.show_sweep(sweep, at=(HEADS, DIM))
        for index, name in enumerate(("sweep-time", "sweep-memory")):
            panel.sweep_view.setCurrentIndex(index)
            settle(app, 0.8)
            window.grab().save(str(folder / f"{name}.png"))
            panel.grab().save(str(folder / f"{name}-panel.png"))  # the dock alone, legible
            print("wrote", folder / f"{name}.png")
        close_quietly(window)
    for t, batched, tiled, b_bytes, t_bytes in zip(
        sweep["tokens"], sweep["batched"], sweep["tiled"],
        sweep["batched_bytes"], sweep["tiled_bytes"], strict=True,
    ):  # fmt: skip
        print(f"T {t:>5}: batched {batched * 1e3:8.2f} ms {b_bytes / 2**20:8.2f} MB   "
              f"tiled {tiled * 1e3:8.2f} ms {t_bytes / 2**20:8.2f} MB")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
