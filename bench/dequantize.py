"""Dequantization throughput per GGUF type, ours against gguf's own: ``python bench/dequantize.py``.

Each type's tensor (4096 × 4096 values, random blocks with plain scales, as a real file's
weights look) is dequantized by ``attn_explorer.models.formats.dequantize.dequantize_fast``
and by ``gguf.quants.dequantize`` (its 16-row loop), each in a child process of its own so
neither library's allocations or caches colour the other's figure. Prints a table of
median seconds over ``--repeats`` runs and the ratio gguf / ours (higher is better for us),
and checks in passing that the two results are equal bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

TYPES = [
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "BF16",
    "F16",
]

CHILD = r"""
import json, sys, time
import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize
from attn_explorer.models.formats.dequantize import dequantize_fast
kind, who, rows, cols, repeats = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
qtype = GGMLQuantizationType[kind]
per_block, block_bytes = GGML_QUANT_SIZES[qtype]
rng = np.random.default_rng(0)
if kind == "F16":
    data = rng.standard_normal((rows, cols)).astype(np.float16)
else:
    data = rng.integers(0, 256, (rows * cols // per_block, block_bytes), dtype=np.uint8)
    if kind != "BF16":
        scales = rng.uniform(-0.05, 0.05, (data.shape[0], 2)).astype(np.float16).view(np.uint8)
        data[:, :4] = scales
        data[:, -4:] = scales
    else:
        data = rng.standard_normal(data.size // 2).astype(np.float32).view(np.uint32)
        data = (data >> 16).astype(np.uint16).view(np.uint8)
    data = data.reshape(rows, -1)
run = (lambda: dequantize_fast(data, kind)) if who == "ours" else (lambda: dequantize(data, qtype))
run()
times = []
for _ in range(repeats):
    start = time.perf_counter(); out = run(); times.append(time.perf_counter() - start)
checksum = float(np.nansum(out[::97, ::89]))
print(json.dumps({"seconds": sorted(times)[len(times) // 2], "checksum": checksum}))
"""


def measure(kind: str, who: str, rows: int, cols: int, repeats: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, who, str(rows), str(cols), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1024 × 1024, one repeat")
    parser.add_argument("--json", action="store_true", help="then the rows as one JSON line")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    found = []
    rows, cols, repeats = (1024, 1024, 1) if args.quick else (args.rows, args.cols, args.repeats)
    print(
        f"dequantize {rows} × {cols} values, median of {repeats} "
        f"(load {load[0]:.2f}, {os.cpu_count()} cores)"
    )
    print(f"{'type':<6} {'ours ms':>9} {'gguf ms':>9} {'ours MB/s':>10} {'gguf/ours':>10}  same")
    for kind in TYPES:
        ours = measure(kind, "ours", rows, cols, repeats)
        theirs = measure(kind, "gguf", rows, cols, repeats)
        rate = rows * cols * 4 / ours["seconds"] / 2**20
        same = "yes" if ours["checksum"] == theirs["checksum"] else "NO"
        print(
            f"{kind:<6} {ours['seconds'] * 1e3:9.1f} {theirs['seconds'] * 1e3:9.1f} "
            f"{rate:10.0f} {theirs['seconds'] / ours['seconds']:9.2f}×  {same}"
        )
        found.append((kind, ours["seconds"], theirs["seconds"], same == "yes"))
    if args.json:
        from attn_explorer.cli.bench_report import TargetRow, rows_json

        table = [
            TargetRow(
                f"dequantize {kind} {rows}×{cols}: ours",
                mine * 1e3,
                "ms",
                note=f"gguf {theirs * 1e3:.1f} ms; {'equal' if same else 'NOT EQUAL'}",
            )
            for kind, mine, theirs, same in found
        ]
        table.append(
            TargetRow(
                "dequantize: types not bit-equal to gguf's",
                float(sum(not same for *_, same in found)),
                "types",
                0.0,
            )
        )
        print(
            json.dumps(rows_json(table, bench="dequantize", load=list(load), cores=os.cpu_count()))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
