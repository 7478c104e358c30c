"""Before/after screenshots of the model view and the charts, as a user sees them.

    QT_QPA_PLATFORM=offscreen:configfile=screen.json \
        .venv/bin/python docs/review/look/shots.py docs/review/look after

Opens the real window at the virtual screen's available size, shows one view per shot
(the model view before and after input with a 6 × 12-head tiny BERT, the empty timing
charts, a sweep of fake timings, the output stage) and saves ``<name>-<suffix>.png``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: A sweep of plausible timings (seconds), as ``compute.timing.sweep_tokens`` returns them.
FAKE_TOKENS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
FAKE_SWEEP = {
    "tokens": FAKE_TOKENS,
    "loop": [2e-6 * t * t * 4 for t in FAKE_TOKENS],
    "matmul": [4e-6 + 3e-9 * t * t for t in FAKE_TOKENS],
    "batched": [2e-6 + 1e-9 * t * t for t in FAKE_TOKENS],
    "loop_estimated": [t > 64 for t in FAKE_TOKENS],
}


def main(folder: Path, suffix: str) -> None:
    from attn_explorer.cli.self_test import close_quietly, private_app_folders, settle
    from attn_explorer.models.testing.tiny_bert import tiny_config, write_tiny_bert
    from attn_explorer.render.qt_app import qt_application

    scratch = Path(tempfile.mkdtemp(prefix="look-shots-"))
    os.environ["HF_HUB_CACHE"] = str(scratch / "empty-cache")
    model = write_tiny_bert(
        scratch / "minilm-like",
        config=tiny_config(hidden_size=24, num_hidden_layers=6, num_attention_heads=12),
    )
    folder.mkdir(parents=True, exist_ok=True)
    with private_app_folders(scratch):
        app = qt_application()
        from attn_explorer.ui.window.docks import show_dock
        from attn_explorer.ui.window.main_window import MainWindow

        area = app.primaryScreen().availableGeometry()
        size = f"{area.width()}x{area.height()}"

        def save(window: MainWindow, name: str) -> None:
            settle(app, 0.8)
            target = folder / f"{name}-{suffix}.png"
            if size != "1280x720":
                target = folder / f"{name}-{suffix}-{size}.png"
            window.grab().save(str(target))
            print("wrote", target)

        def fresh() -> MainWindow:
            window = MainWindow()
            window.resize(area.size())
            window.move(area.topLeft())
            window.show()
            settle(app, 1.5)
            return window

        window = fresh()
        view = window.commands.open_model_view()
        save(window, "model-view-empty")
        view.set_model_folder(model)
        view.set_sentence("The cat sat on the mat, and the dog ran.")
        settle(app, 2.0)
        view.select_head(2, 11)
        save(window, "model-view")
        close_quietly(window)

        window = fresh()
        show_dock(window.timing_dock)
        save(window, "timing-empty")
        assert window.timing_panel is not None
        window.timing_panel.show_sweep(FAKE_SWEEP)
        save(window, "sweep")
        window.session.set_option("stage", "output")
        save(window, "output-stage")
        close_quietly(window)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
