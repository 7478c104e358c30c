"""How long the UI thread spends per drag event in the vectors view, offscreen.

    python bench/vectors.py [--quick] [--tokens 8 24 64]

A real press-move-release on the plot's viewport drags q1's tip through a circle while
the whole window is up (tables, score grid, heatmaps, stepper), at H = 8, d = 2 and T =
8, 24 (every arrow has its head and label) and 64 (only the selection's). Each row is
the UI thread's CPU time (``time.thread_time``) per mouse-move event: the arrow redrawn
and repainted at once. The session write that follows at most every ``DRAG_WRITE_MS``
(the recompute and the repaint of every other view) is its own event-loop task and is
timed on its own, and together with the move it fell due with. The budget is 8 ms p95
per drag event. Not a test: the figures go into notes.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

BUDGET_MS = 8.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer drag events")
    parser.add_argument("--tokens", type=int, nargs="+", default=[8, 24, 64])
    parser.add_argument("--json", action="store_true", help="also print the target rows as JSON")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    found = []
    for tokens in args.tokens:
        found.append(run(tokens, 60 if args.quick else 300))
        print()
    print(
        f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after, on "
        f"{os.cpu_count()} cores"
    )
    if args.json:
        import json

        from attn_explorer.cli.bench_report import TargetRow, rows_json

        rows = [
            TargetRow(
                f"vectors drag event p95 CPU, T={tokens}",
                p95_ms,
                "ms",
                BUDGET_MS,
                note=f"p95 with a due session write {combined_ms:.2f} ms",
            )
            for tokens, p95_ms, combined_ms in found
        ]
        print(json.dumps(rows_json(rows, bench="vectors", load=list(load), cores=os.cpu_count())))
    return 0


def run(tokens: int, events: int) -> tuple[int, float, float]:
    """Drag through ``events`` moves at T = ``tokens``; print its table, return
    (tokens, p95 ms per drag event, p95 ms per event with a due write)."""

    import numpy as np
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from attn_explorer.state import Snapshot
    from attn_explorer.ui.vectors.vectors_view import DRAG_WRITE_MS
    from attn_explorer.ui.window.launch import prepare_interpreter
    from attn_explorer.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    heads, dim = 8, 2
    prepare_interpreter()  # as the app's start does
    window = MainWindow()
    window.files.ask_before_discard = False
    window.resize(1400, 900)
    window.show()
    rng = np.random.default_rng(0)
    q, k, v = (np.round(rng.standard_normal((1, heads, tokens, dim)), 2) for _ in range(3))
    window.session.load(Snapshot(tuple(f"t{n + 1}" for n in range(tokens)), q, k, v))
    window.session.set_option("strategy", "batched")
    view = window.commands.open_vectors_view()
    for _ in range(20):
        app.processEvents()
    view.state.set_snap(0.0)  # every move is a new position: the worst case
    writes: list[float] = []
    write = view._write_pending

    def timed_write() -> None:  # the session write, timed on its own
        start = time.thread_time()
        write()
        app.processEvents()  # the recompute and every view's repaint it set off
        writes.append(time.thread_time() - start)

    view._write_timer.timeout.disconnect()
    view._write_timer.timeout.connect(timed_write)
    viewport = view.plot.viewport()

    def at(x: float, y: float):
        return view.plot.mapFromScene(view.view_box.mapViewToScene(QPointF(x, y)))

    x0, y0 = (float(c) for c in view.tips("query")[0])
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, pos=at(x0, y0))
    per_event: list[float] = []  # the move itself: the arrow redrawn and repainted
    combined: list[float] = []  # the move and any session write that fell due with it
    wall: list[float] = []
    for n in range(events):
        angle = 2 * math.pi * n / 120
        target = at(x0 + 0.8 * math.sin(angle), y0 + 0.8 * (1 - math.cos(angle)))
        before = len(writes)
        start_cpu, start_wall = time.thread_time(), time.perf_counter()
        QTest.mouseMove(viewport, target)
        app.processEvents()  # whatever this event set off, including due timers
        cpu = time.thread_time() - start_cpu
        combined.append(cpu)
        per_event.append(cpu - sum(writes[before:]))
        wall.append(time.perf_counter() - start_wall)
        time.sleep(1 / 120)  # a fast hand: 120 move events a second (timers due meanwhile
        # fire in the next event's processEvents, so they are counted with it)
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=target)
    app.processEvents()
    undo_entries = window.session.undo_text()

    def p95(samples: list[float]) -> float:
        ordered = sorted(samples)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3

    rows = [
        ("shape", f"H={heads}, T={tokens}, d={dim}; {events} move events, session written "
                  f"at most every {DRAG_WRITE_MS} ms"),
        ("UI-thread CPU per drag event, median", f"{statistics.median(per_event) * 1e3:.2f} ms"),
        ("UI-thread CPU per drag event, p95", f"{p95(per_event):.2f} ms (budget {BUDGET_MS} ms)"),
        ("UI-thread CPU per session write, p95", f"{p95(writes):.2f} ms ({len(writes)} writes: "
                                                 "recompute + every view repainted)"),
        ("UI-thread CPU per event incl. a due write, p95", f"{p95(combined):.2f} ms"),
        ("wall clock per drag event incl. writes, p95", f"{p95(wall):.2f} ms"),
        ("undo after the drag", undo_entries),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    window.shutdown()
    window.close()
    window.deleteLater()
    app.processEvents()
    return tokens, p95(per_event), p95(combined)


if __name__ == "__main__":
    raise SystemExit(main())
