"""Regression: PySide6 6.12.0 on CPython 3.11 leaks a reference on every Signal.emit().

It drops a reference to ``True`` per emit (and to ``None`` per pyqtgraph paint); after
enough emits the immortal-less 3.11 interpreter aborts with ``Fatal Python error:
bool_dealloc``. pyproject.toml excludes that release; this test runs the same work a
long session does, in a subprocess so an abort fails the test instead of killing
pytest, and catches a future release with the same defect.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pyqtgraph")

EMITS = 1_000_000
IMAGE_CYCLES = 2_000

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QApplication
    import pyqtgraph as pg

    app = QApplication.instance() or QApplication([])

    class Source(QObject):
        changed = Signal()

    source = Source()
    received = [0]

    def on_changed():
        received[0] += 1

    source.changed.connect(on_changed)
    true_refs = sys.getrefcount(True)
    for _ in range({emits}):
        source.changed.emit()
    assert received[0] == {emits}, received[0]

    widget = pg.GraphicsLayoutWidget()
    widget.resize(160, 120)
    view = widget.addViewBox()
    item = pg.ImageItem()
    view.addItem(item)
    widget.show()
    rng = np.random.default_rng(0)
    for n in range({cycles}):
        item.setImage(rng.random((8, 8), dtype=np.float32), autoLevels=n % 2 == 0)
        image = widget.grab()
        assert not image.isNull()
    app.processEvents()
    print("ok", received[0], true_refs, sys.getrefcount(True))
    """
).format(emits=EMITS, cycles=IMAGE_CYCLES)


@pytest.mark.slow
def test_many_emits_and_paints_do_not_abort():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYQTGRAPH_QT_LIB": "PySide6"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, (
        f"exit {done.returncode} (a negative code is a signal, e.g. -6 = abort)\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    word, received, refs_before, refs_after = done.stdout.split()[-4:]
    assert (word, received) == ("ok", str(EMITS))
    # A leak shows as drift long before the abort: one reference per emit.
    assert abs(int(refs_after) - int(refs_before)) < 10_000
