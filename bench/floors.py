"""Floors: what this machine costs before any of the app's own work, measured in the same
run as the figures they explain.

    python bench/floors.py [--runs N] [--bytes N]

Issue 37 asks that a target a machine cannot reach be said so "with the floor measured".
Two of its targets are set in seconds or ratios that depend on the machine far more than
on the code, so each gets its floor here, timed the same way as the figure beside it:

- :func:`window_floor` — a fresh Python process that imports numpy and PySide6 and shows an
  empty ``QMainWindow`` (a table in the middle, three docks, 1280 × 720) to its first frame,
  timed from the moment the process is started, as ``bench/gui.py`` times attn-explorer.
  No start of the app can be quicker: it does all of this and then builds its own window.
- :func:`first_touch` — a fresh process writes ``nbytes`` into memory it has just been
  given, in arrays of :data:`PIECE_BYTES`, and keeps them all (as a model keeps its
  weights): every page is new, and the kernel zeroes each on its first touch. Dequantizing
  a model to float32 writes every one of those bytes once and keeps them, so
  ``first_touch(4 × parameters)`` is the least any first forward pays before its arithmetic.
  On a virtual machine the first touch of a page can cost more than the work written on it.
  (Pieces handed back before the next is taken would measure recycled pages: ~5× less
  here, and no model's first forward gets that.)

Each runs in its own process: a floor measured inside a warmed-up bench would be too low.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

#: The empty window: the same imports and first frame the app has, none of its widgets.
WINDOW_SCRIPT = r"""
import os, sys, time
start = float(sys.argv[1])
import numpy  # noqa: F401  (the app imports it before Qt, as this does)
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel, QMainWindow, QTableWidget

app = QApplication([])
window = QMainWindow()
window.setCentralWidget(QTableWidget(4, 4))
for n in range(3):
    dock = QDockWidget(f"dock {n}")
    dock.setWidget(QLabel("text"))
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
window.resize(1280, 720)


class FirstFrame(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Expose:
            obj.event(event)  # the whole frame painted and flushed, as bench/gui.py waits
            print(f"{time.time() - start:.4f}", flush=True)
            os._exit(0)
        return False


window.show()
watch = FirstFrame()
window.windowHandle().installEventFilter(watch)
app.exec()
"""

#: Bytes of each array the first-touch floor writes: about one weight of a small model
#: (SmolLM2's feed-forward weights are 3.4 MB), and the size from which numpy asks the
#: kernel for huge pages, so the floor gets them wherever a model's weights could.
PIECE_BYTES = 4 * 2**20

TOUCH_SCRIPT = r"""
import sys, time
import numpy as np
total, piece = int(sys.argv[1]), int(sys.argv[2])
kept = []
start = time.perf_counter()
left = total
while left > 0:
    size = min(piece, left)
    block = np.empty(size // 4, dtype=np.float32)
    block.fill(1.0)  # every page written once: the kernel zeroes each on its first touch
    kept.append(block)  # kept, as weights are: a freed piece's pages would be reused
    left -= size
print(f"{time.perf_counter() - start:.4f}")
"""


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> float:
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"the floor's process failed:\n{out.stdout}\n{out.stderr}")
    return float(lines[-1])


def window_floor(runs: int, env: dict[str, str] | None = None) -> float:
    """Median seconds, over ``runs`` fresh processes (after one that warms the file cache),
    from the process's start to the first frame of an empty PySide6 window."""
    times = [_run(WINDOW_SCRIPT, repr(time.time()), env=env) for _ in range(runs + 1)]
    return statistics.median(times[1:])


def first_touch(nbytes: int, runs: int = 3) -> float:
    """Fewest seconds, over ``runs`` fresh processes, to write ``nbytes`` into new memory."""
    return min(_run(TOUCH_SCRIPT, str(nbytes), str(PIECE_BYTES)) for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per floor (default 5)")
    parser.add_argument(
        "--bytes",
        type=int,
        default=540 * 2**20,
        help="bytes the first-touch floor writes (default 540 MiB: SmolLM2-135M in float32)",
    )
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    print(f"empty PySide6 window with numpy, start to first frame: "
          f"{window_floor(args.runs) * 1e3:.0f} ms (median of {args.runs} processes)")  # fmt: skip
    print(f"first touch of {args.bytes / 2**20:.0f} MiB of new memory: "
          f"{first_touch(args.bytes, args.runs) * 1e3:.0f} ms (best of {args.runs})")  # fmt: skip
    load = os.getloadavg()[0]
    print(f"load average (1 min) {load:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
