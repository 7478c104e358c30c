"""Activation patching: which heads and which residual positions carry the difference.

As TransformerLens's ``patching.py`` (``get_act_patch_attn_head_out_all_pos``,
``get_act_patch_resid_pre``; Wang et al. 2022): the corrupted prompt is rerun with one
activation taken from the clean run, and the result is the normalised logit difference

    (ld_patched − ld_corrupt) / (ld_clean − ld_corrupt)     0: no effect, 1: all recovered

- ``patch_heads``: (L, H), query head h of block l's output (its weights @ V at every
  position, before the output projection: the slice [h·d, (h+1)·d) of the projection's
  input; TransformerLens's ``z``);
- ``patch_residual``: (L, T), the input of block l at position t (l = 0 the embeddings);
- ``patch_head_set``: a set of heads patched together, one number.

Fast because nothing is computed twice (``models.decoder.patched``): a patch at block l
reruns blocks l … L − 1 only, from the corrupted run's kept input; positions before the
first that differs are the same in both runs (causal attention), so a residual patch
there is exactly 0 (nothing run) and any patch reruns only the later rows against the
cached keys and values; every patched copy runs in one growing batch, on one BLAS thread
as the ablation scan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np
from threadpoolctl import threadpool_limits

from attn_explorer.analysis.compare import Comparison, logit_difference
from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.patched import PatchPlan, run_patched

#: Most stream-rows in one batch: its MLP's (rows, ff) temporaries stay near 24 MB.
BATCH_FLOATS = 6_000_000


def _run(
    model: DecoderModel,
    comparison: Comparison,
    plans: list[PatchPlan],
    progress: Callable[[float, str], None] | None,
    should_stop: Callable[[], bool] | None,
    what: str,
) -> list[np.ndarray]:
    """Each plan's (B,) logit differences, in chunks of bounded memory; cancellable per block."""
    c = model.config
    chunks: list[list[PatchPlan]] = []
    for plan in plans:
        rows = comparison.tokens - plan.start
        width = max(c.intermediate_size, c.num_heads * comparison.tokens, c.hidden_size)
        chunks.append(plan.split(BATCH_FLOATS // (rows * width)))
    total = sum(chunk.work(c.num_layers) for parts in chunks for chunk in parts) or 1
    done = 0

    def on_layer(index: int, streams: int) -> None:
        nonlocal done
        done += streams
        if progress is not None:
            progress(done / total, f"{what}: block {index}, {streams} patched copies")
        if should_stop is not None and should_stop():
            raise Cancelled(f"{what} cancelled")

    results = []
    if should_stop is not None and should_stop():
        raise Cancelled(f"{what} cancelled")
    # One BLAS thread, as the ablation scan: many mid-sized matmuls run faster so on two
    # cores. Process-wide while it runs; restored after, even on Stop.
    with threadpool_limits(limits=1, user_api="blas"):
        for parts in chunks:
            lasts = [
                run_patched(model, comparison.corrupt_trace, comparison.clean_trace, part, on_layer)
                for part in parts
            ]
            last = np.concatenate(lasts) if lasts else np.zeros((0, c.hidden_size), np.float32)
            results.append(logit_difference(model, last, comparison.answer_id, comparison.wrong_id))
    return results


def patch_heads(
    model: DecoderModel,
    comparison: Comparison,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> np.ndarray:
    """(L, H) normalised logit difference with each query head's output patched alone.

    ``progress(fraction, message)`` after each block of the batch; ``should_stop()``
    true raises ``Cancelled`` (nothing is returned half-made).
    """
    c = model.config
    layers, heads = c.num_layers, c.num_heads
    enter = np.repeat(np.arange(layers), heads)  # (L·H,): stream l·H + h enters at block l
    take = np.zeros((layers * heads, layers, heads), dtype=bool)
    take[np.arange(layers * heads), enter, np.tile(np.arange(heads), layers)] = True
    plan = PatchPlan(comparison.first_diff, enter, np.full(enter.size, -1), take)
    (diffs,) = _run(model, comparison, [plan], progress, should_stop, "patching every head")
    return np.asarray(comparison.normalise(diffs).reshape(layers, heads))


def patch_residual(
    model: DecoderModel,
    comparison: Comparison,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> np.ndarray:
    """(L, T) normalised logit difference with block l's input at position t patched.

    Positions before ``comparison.first_diff`` hold the same activation in both runs:
    exactly 0, not computed.
    """
    c = model.config
    layers, tokens, start = c.num_layers, comparison.tokens, comparison.first_diff
    positions = np.arange(start, tokens)
    # stream l·P + p enters at block l with position start + p patched. Every stream reruns
    # rows start … T − 1, as the heads' do: one batch of them all ran 0.92 s on SmolLM2
    # where a batch per position (rows t … T − 1 only) ran 1.25 s.
    enter = np.repeat(np.arange(layers), positions.size)
    take = np.zeros((enter.size, layers, c.num_heads), dtype=bool)
    plan = PatchPlan(start, enter, np.tile(positions, layers), take)
    (diffs,) = _run(model, comparison, [plan], progress, should_stop, "patching the residual")
    result = np.zeros((layers, tokens))
    result[:, start:] = comparison.normalise(diffs).reshape(layers, positions.size)
    return result


def patch_head_set(
    model: DecoderModel, comparison: Comparison, heads: Iterable[tuple[int, int]]
) -> float:
    """The normalised logit difference with every (layer, head) in ``heads`` patched
    together (0.0 for none)."""
    c = model.config
    chosen = sorted({(int(layer), int(head)) for layer, head in heads})
    for layer, head in chosen:
        if not (0 <= layer < c.num_layers and 0 <= head < c.num_heads):
            raise ValueError(
                f"head ({layer}, {head}): layers count 0 … {c.num_layers - 1} and heads "
                f"0 … {c.num_heads - 1}."
            )
    if not chosen:
        return 0.0
    take = np.zeros((1, c.num_layers, c.num_heads), dtype=bool)
    for layer, head in chosen:
        take[0, layer, head] = True
    plan = PatchPlan(comparison.first_diff, np.array([chosen[0][0]]), np.array([-1]), take)
    (diffs,) = _run(model, comparison, [plan], None, None, "patching the chosen heads")
    return float(comparison.normalise(diffs)[0])


def patch_flops(model: DecoderModel, tokens: int, first_diff: int = 0) -> float:
    """Floating-point operations of ``patch_heads`` and ``patch_residual`` together."""
    c = model.config
    width = c.num_heads * c.head_dim
    kv = c.num_kv_heads * c.head_dim
    per_row = 2 * (
        c.hidden_size * (width + 2 * kv)  # Q, K, V
        + width * c.hidden_size  # output projection
        + 3 * c.hidden_size * c.intermediate_size  # gate, up, down
    )
    blocks = c.num_layers * (c.num_layers + 1) // 2  # Σ over l of L − l
    rows = tokens - first_diff
    head_rows = c.num_heads * blocks * rows
    residual_rows = blocks * rows * rows
    attention = 4 * c.num_heads * c.head_dim * tokens  # scores and weights @ V, per row
    return float((head_rows + residual_rows) * (per_row + attention))


_RATE: list[float] = []


def _measured_rate() -> float:
    """This machine's float32 matmul rate on one BLAS thread (FLOP/s), measured once."""
    if not _RATE:
        a = np.ones((256, 512), np.float32)
        b = np.ones((512, 1024), np.float32)
        with threadpool_limits(limits=1, user_api="blas"):
            a @ b  # warm-up
            began = time.perf_counter()
            for _ in range(4):
                a @ b
            seconds = time.perf_counter() - began
        _RATE.append(4 * 2 * 256 * 512 * 1024 / max(seconds, 1e-6))
    return _RATE[0]


def estimate_seconds(model: DecoderModel, tokens: int, first_diff: int = 0) -> float:
    """Estimated seconds for both patching maps of a pair of ``tokens`` tokens (the
    prompts first differing at ``first_diff``), from a quick measure of this machine's
    matmul rate: for the "estimated time" shown before a long scan."""
    if tokens < 1:
        return 0.0
    # Measured on SmolLM2 (the name prompts, 14 tokens, first difference at 9): both maps
    # ran at 71 % of the bare rate measured in the same process (32.0 s against 22.6 s,
    # on two cores shared at load 12), so the estimate follows the machine's load.
    return patch_flops(model, tokens, min(first_diff, tokens - 1)) / (0.7 * _measured_rate())
