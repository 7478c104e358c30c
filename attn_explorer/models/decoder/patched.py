"""Rerun a decoder's blocks for activation patching: many patched copies of one run at once.

Activation patching (Wang et al. 2022; TransformerLens ``patching.py``) reruns the
corrupted prompt with one activation taken from the clean prompt. Each such copy of the
corrupted run is a *stream* here, and three facts keep its rerun short:

- a stream is the corrupted run until the block it is patched at (``enter``), so it
  starts there from the corrupted run's kept input (``BlockTrace.inputs``);
- causal attention: positions before ``start`` (where the two prompts, or the patch,
  first differ) are the same in every stream, so only rows ``start`` … T − 1 are rerun,
  their queries against the corrupted run's own keys and values for the earlier
  positions (computed once per block, shared by every stream);
- every stream runs in one batch: the streams that enter at block l join it there
  (a growing batch), so each projection is one (B·R)-row matmul.

A head patch at block l needs no attention at that block: the block's input is the
corrupted run's, so its heads' outputs are ``BlockTrace.mixed`` with the patched heads'
slices taken from the clean run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attn_explorer.compute.softmax import softmax_rows
from attn_explorer.models.decoder.blocks import BlockTrace, dense
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.ops import ACTIVATIONS, apply_rope, rms_norm, softcap, window_keep
from attn_explorer.models.decoder.weights import LayerWeights


@dataclass(frozen=True)
class PatchPlan:
    """B patched copies of the corrupted run; rows ``start`` … T − 1 are rerun.

    ``enter`` (B,) ascending: the block where stream b first differs from the corrupted
    run. ``row`` (B,): the position whose input of block ``enter[b]`` is taken from the
    clean run, or −1 for none (must be ≥ ``start``). ``take`` (B, L, H) bool: the query
    heads whose output (weights @ V, before the output projection) is taken from the
    clean run, at every position ≥ ``start``.
    """

    start: int
    enter: np.ndarray
    row: np.ndarray
    take: np.ndarray

    def __post_init__(self) -> None:
        enter, row = np.asarray(self.enter), np.asarray(self.row)
        if enter.ndim != 1 or row.shape != enter.shape or self.take.shape[0] != enter.size:
            raise ValueError("PatchPlan: enter, row and take need one entry per stream.")
        if enter.size and (np.diff(enter) < 0).any():
            raise ValueError("PatchPlan: streams must be ordered by the block they enter at.")
        if ((row >= 0) & (row < self.start)).any():
            raise ValueError("PatchPlan: a patched position lies before start.")

    @property
    def streams(self) -> int:
        return int(np.asarray(self.enter).size)

    def work(self, layers: int) -> int:
        """Stream-blocks this plan reruns (each stream runs from its block to the last)."""
        return int(np.sum(layers - np.asarray(self.enter)))

    def split(self, most: int) -> list[PatchPlan]:
        """This plan as consecutive plans of at most ``most`` streams (bounded memory)."""
        size = max(1, most)
        return [
            PatchPlan(
                self.start,
                self.enter[i : i + size],
                self.row[i : i + size],
                self.take[i : i + size],
            )
            for i in range(0, self.streams, size)
        ]


def run_patched(
    model: DecoderModel,
    corrupt: BlockTrace,
    clean: BlockTrace,
    plan: PatchPlan,
    on_layer: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Every stream of ``plan`` from its block to the last; (B, hidden) last position's
    residual stream after the last block, before the final norm.

    ``corrupt`` and ``clean`` are the two prompts' traces (``run_blocks(..., trace=)``).
    ``on_layer(index, streams)`` hears each block's end with how many streams ran it (a
    stop check may raise from it).
    """
    c = model.config
    tokens, start = corrupt.inputs.shape[1], plan.start
    if not 0 <= start < tokens:
        raise ValueError(f"run_patched: start {start} outside 0 … {tokens - 1}.")
    if plan.streams == 0:
        return np.zeros((0, c.hidden_size), np.float32)
    enter, row = np.asarray(plan.enter), np.asarray(plan.row)
    rows, d = tokens - start, c.head_dim
    activation = ACTIVATIONS[c.activation]
    x = np.zeros((0, rows, c.hidden_size), np.float32)  # (B, R, hidden): the batch so far
    for index in range(int(enter[0]), c.num_layers):
        w = model.weights.layer(index)
        new = np.flatnonzero(enter == index)
        # a stream's attention is computed anew from the block after the one it enters at,
        # or at that block already when its input there is patched (a residual patch)
        recompute = np.ones(x.shape[0], dtype=bool)
        if new.size:
            entering = np.repeat(corrupt.inputs[index][None, start:], new.size, axis=0)
            fresh = row[new] >= 0
            patched = np.flatnonzero(fresh)
            entering[patched, row[new][patched] - start] = clean.inputs[index][row[new][patched]]
            x = np.concatenate([x, entering])  # (B, R, hidden)
            recompute = np.concatenate([recompute, fresh])
        active = x.shape[0]  # the first ``active`` streams of the plan (entered by now)
        mixed = np.empty((active, rows, c.num_heads * d), np.float32)  # (B, R, H·d)
        mixed[~recompute] = corrupt.mixed[index][start:]  # input unchanged: the same heads
        if recompute.any():
            normed = rms_norm(x[recompute], w.attn_norm, c.rms_norm_eps)
            mixed[recompute] = attention_rows(model, normed, w, index, corrupt, start)
        take = plan.take[:active, index]  # (B, H)
        if take.any():
            columns = np.repeat(take, d, axis=-1)  # (B, H·d)
            mixed = np.where(columns[:, None, :], clean.mixed[index][None, start:], mixed)
        attended = dense(mixed, w.attn_output)  # (B, R, hidden)
        if w.post_attn_norm is not None:  # Gemma's sandwich norms
            attended = rms_norm(attended, w.post_attn_norm, c.rms_norm_eps)
        x = x + attended
        if index == c.num_layers - 1:
            x = x[:, -1:]  # (B, 1, hidden): the readout needs the last position only
        h = rms_norm(x, w.ffn_norm, c.rms_norm_eps)
        mlp = dense(activation(dense(h, w.gate)) * dense(h, w.up), w.down)
        if w.post_ffn_norm is not None:
            mlp = rms_norm(mlp, w.post_ffn_norm, c.rms_norm_eps)
        x = x + mlp
        if on_layer is not None:
            on_layer(index, active)
    return x[:, -1]


def _layer_rope(
    model: DecoderModel, index: int, tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """cos, sin (T, d) of block ``index``'s kind of layer and its window mask or None."""
    c = model.config
    local = bool(c.layer_kinds) and c.layer_kinds[index] == "local"
    cos, sin = model._rope(0, tokens, "local" if local else "global")
    keep = window_keep(np.arange(tokens), tokens, c.sliding_window) if local else None
    return cos, sin, keep


def attention_rows(
    model: DecoderModel,
    h: np.ndarray,
    w: LayerWeights,
    index: int,
    corrupt: BlockTrace,
    start: int,
) -> np.ndarray:
    """Normed (B, R, hidden) rows ``start`` … T − 1 of B streams -> their heads' outputs
    (B, R, H·d), against the corrupted run's keys and values before ``start``.

    As ``blocks.attention_mix`` for B streams, with the first ``start`` keys and values
    computed once from the corrupted run's input of block ``index`` and shared.
    """
    c = model.config
    streams, rows, d = h.shape[0], h.shape[1], c.head_dim
    tokens = start + rows
    cos, sin, window = _layer_rope(model, index, tokens)
    parts = []
    for which, weight in enumerate((w.query, w.key, w.value)):
        y = dense(h, weight)  # (B, R, count·d)
        bias = w.bias(which)
        y = y if bias is None else y + bias
        parts.append(y.reshape(streams, rows, -1, d).transpose(0, 2, 1, 3))  # (B, count, R, d)
    q, k, v = parts
    if w.q_norm is not None and w.k_norm is not None:  # Qwen3, Gemma 3: per-head q/k norms
        q, k = rms_norm(q, w.q_norm, c.rms_norm_eps), rms_norm(k, w.k_norm, c.rms_norm_eps)
    q, k = apply_rope(q, cos[start:], sin[start:]), apply_rope(k, cos[start:], sin[start:])
    kv, group = c.num_kv_heads, c.group_size
    if start:  # the earlier positions' keys and values: the corrupted run's, shared
        before = rms_norm(corrupt.inputs[index][:start], w.attn_norm, c.rms_norm_eps)
        _, k0, v0 = model._qkv(before, w, cos[:start], sin[:start])  # (H_kv, start, d)
        shape = (streams, kv, start, d)
        k = np.concatenate([np.broadcast_to(k0, shape), k], axis=2)  # (B, H_kv, T, d)
        v = np.concatenate([np.broadcast_to(v0, shape), v], axis=2)
    q5 = q.reshape(streams, kv, group, rows, d)  # (B, H_kv, group, R, d): h = kv·group + g
    scores = np.matmul(q5, k[:, :, None].swapaxes(-1, -2))  # (B, H_kv, group, R, T)
    visible = np.arange(tokens)[None, :] <= np.arange(start, tokens)[:, None]  # (R, T)
    if window is not None:
        visible = visible & window[start:]
    if c.attn_softcap:  # Gemma 2: the scaled scores soft-capped before the softmax
        capped = softcap(scores * np.float32(model.scale), c.attn_softcap)
        weights, _ = softmax_rows(capped, keep=visible)
    else:
        weights, _ = softmax_rows(scores, factor=model.scale, keep=visible)
    output = np.matmul(weights, v[:, :, None])  # (B, H_kv, group, R, d)
    answer: np.ndarray = (
        output.reshape(streams, -1, rows, d).transpose(0, 2, 1, 3).reshape(streams, rows, -1)
    )
    return answer
