"""How long the UI thread spends per stepper step, offscreen.

Run: ``python bench/stepper.py`` (add ``--quick`` for fewer steps).

Each row times one step as the user sees it: the model moves its cursor and
builds the Frame (trace seek, filled mask, counter, working), the panel updates
its labels, slider and code highlight, emits ``frameChanged``, and Qt paints the
panel (``processEvents``). The budget is 8 ms per step, so 60 steps/s leaves
half of each 16.7 ms frame to the other views. Times are the UI thread's CPU
time (``time.thread_time``), so other processes on a busy machine do not count;
the wall-clock columns show what that machine added. A second table plays with the
real QTimer at 60 steps/s and reports the rate reached and the busy time per
tick; a third shows seeks at T = 512, H = 16 (never replayed from the start).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from PySide6.QtWidgets import QApplication

from attn_explorer.state import Session, preset
from attn_explorer.state.presets import random_preset
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.ui.stepper.stepper_panel import StepperPanel

BUDGET_MS = 8.0


def make_panel(session: Session) -> StepperPanel:
    panel = StepperPanel(session, Stepper(session), measure_times=False)
    panel.resize(760, 520)
    panel.show()
    QApplication.processEvents()
    return panel


def worked() -> Session:
    p = preset("worked")
    session = Session(p.snapshot, p.options)
    session.set_option("strategy", "loop")
    return session


def sized(heads: int, tokens: int, dim: int) -> Session:
    p = random_preset(batch=1, heads=heads, tokens=tokens, dim=dim, seed=0)
    session = Session(p.snapshot, p.options)
    session.set_option("strategy", "loop")
    return session


def ms(samples: list[float]) -> tuple[float, float, float]:
    values = sorted(samples)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return statistics.median(values) * 1e3, p95 * 1e3, values[-1] * 1e3


def time_steps(label: str, session: Session, granularity: str, steps: int) -> list[str]:
    session.set_option("granularity", granularity)
    panel = make_panel(session)
    frames = []
    panel.frameChanged.connect(frames.append)  # a listener, as the views will be
    app = QApplication.instance()
    cpu, wall = [], []
    for _ in range(steps):
        if panel.stepper.at_end:
            panel.to_start()
            app.processEvents()
        start, start_cpu = time.perf_counter(), time.thread_time()
        panel.step_forward()
        app.processEvents()  # Qt lays out and paints what changed, inside the measurement
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    panel.shutdown()
    panel.deleteLater()
    median, p95, worst = ms(cpu)
    wall_median, wall_p95, _ = ms(wall)
    ok = "yes" if p95 < BUDGET_MS else "NO"
    return [
        label,
        granularity,
        f"{len(cpu)}",
        f"{median:.2f}",
        f"{p95:.2f}",
        f"{worst:.2f}",
        f"{wall_median:.2f}",
        f"{wall_p95:.2f}",
        ok,
    ]


def play_at_60(label: str, session: Session, seconds: float) -> list[str]:
    panel = make_panel(session)
    app = QApplication.instance()
    busy: list[float] = []
    tick = panel._on_tick

    def timed_tick() -> None:
        start = time.thread_time()
        tick()
        QApplication.processEvents()  # the paint this tick caused
        busy.append(time.thread_time() - start)

    panel._timer.timeout.disconnect(tick)
    panel._timer.timeout.connect(timed_tick)
    panel.speed_slider.setValue(60)
    panel.play()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds and panel.is_playing():
        app.processEvents()
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    panel.pause()
    panel.shutdown()
    panel.deleteLater()
    median, p95, worst = ms(busy)
    return [label, f"{len(busy) / elapsed:.1f}", f"{median:.2f}", f"{p95:.2f}", f"{worst:.2f}"]


def seeks(label: str, session: Session, count: int) -> list[str]:
    panel = make_panel(session)
    app = QApplication.instance()
    rng = np.random.default_rng(0)
    n = len(panel.stepper.trace)
    samples = []
    for target in rng.integers(0, n, size=count):
        start = time.thread_time()
        panel.stepper.seek_multiply_add(int(target))
        panel.step_back()
        app.processEvents()
        samples.append((time.thread_time() - start) / 2)
    panel.shutdown()
    panel.deleteLater()
    median, p95, worst = ms(samples)
    return [label, f"{n:,}", f"{median:.2f}", f"{p95:.2f}", f"{worst:.2f}"]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[c])) for r in [header, *rows]) for c in range(len(header))]
    line = lambda r: "  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, shorter play")
    parser.add_argument("--json", action="store_true", help="also print the target rows as JSON")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    steps = 120 if args.quick else 600
    app = QApplication.instance() or QApplication(sys.argv[:1])
    del app  # kept alive by Qt; named only to make sure it exists

    rows = [
        time_steps("worked example (T=3, d=2)", worked(), "multiply-add", steps),
        time_steps("T=64, H=4, d=16", sized(4, 64, 16), "multiply-add", steps),
        time_steps("T=64, H=4, d=16", sized(4, 64, 16), "cell", steps),
        time_steps("T=512, H=16, d=64", sized(16, 512, 64), "multiply-add", steps // 4),
        time_steps("T=512, H=16, d=64", sized(16, 512, 64), "head", 16),
    ]
    print(f"UI-thread CPU time per step (ms), budget {BUDGET_MS:g} ms at p95; wall clock beside")
    header = ["shape", "step by", "steps", "median", "p95", "max", "wall med", "wall p95", "ok"]
    print(table(header, rows))
    print()

    seconds = 1.0 if args.quick else 3.0
    played = [
        play_at_60("worked example", worked(), seconds),
        play_at_60("T=64, H=4, d=16", sized(4, 64, 16), seconds),
    ]
    print(f"Playing at 60 steps/s for {seconds:g} s (QTimer; UI-thread CPU ms per tick)")
    print(table(["shape", "steps/s", "median", "p95", "max"], played))
    print()

    sought = [
        seeks("T=64, H=4, d=16", sized(4, 64, 16), 50),
        seeks("T=512, H=16, d=64", sized(16, 512, 64), 20),
    ]
    print("Seek to a random multiply-add, then one step back (CPU ms per move, no replay)")
    print(table(["shape", "multiply-adds", "median", "p95", "max"], sought))
    print(
        f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after, on "
        f"{os.cpu_count()} cores"
    )
    if args.json:
        print(json.dumps(json_report(rows, played, load)))
    return 0


def json_report(rows: list[list[str]], played: list[list[str]], load: tuple) -> dict:
    """The step rows as target rows (p95 UI-thread CPU ≤ the budget), for bench/all.py."""
    from attn_explorer.cli.bench_report import HIGHER, TargetRow, rows_json

    targets = [
        TargetRow(
            f"stepper step p95 CPU, {row[0]} by {row[1]}",
            float(row[4]),
            "ms",
            BUDGET_MS,
            note=f"median {row[3]} ms over {row[2]} steps",
        )
        for row in rows
    ]
    targets += [
        TargetRow(
            f"stepper playing at 60 steps/s, {row[0]}",
            float(row[1]),
            "/s",
            None,
            HIGHER,
            note=f"p95 CPU per tick {row[3]} ms",
        )
        for row in played
    ]
    return rows_json(targets, bench="stepper", load=list(load), cores=os.cpu_count())


if __name__ == "__main__":
    raise SystemExit(main())
