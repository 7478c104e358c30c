""" "Take this head": one head of a real model's attention as the explorer's inputs.

The Model dock says *which* head (layer, head index); these functions turn that head of a
:class:`~attn_explorer.models.ModelAttention` into what the explorer loads: a
:class:`~attn_explorer.state.Snapshot` of B = H = 1 whose Q, K, V are views of the
model's (T, d_head) arrays (no copy here: ``Session.load`` makes the one float64 copy and
validates the values once), the options that show it as the model computed it, and its
name. Qt-free.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from attn_explorer.state import Options, Snapshot
from attn_explorer.state.types import HeadSource

if TYPE_CHECKING:
    from attn_explorer.models import ModelAttention


def _check_index(attention: ModelAttention, layer: int, head: int) -> None:
    layers, heads = attention.query.shape[:2]
    if not 0 <= layer < layers:
        raise ValueError(f"layer {layer + 1} does not exist: the model has {layers} layers")
    if not 0 <= head < heads:
        raise ValueError(f"head {head + 1} does not exist: each layer has {heads} heads")


def explorer_inputs(attention: ModelAttention, layer: int, head: int) -> Snapshot:
    """Head ``head`` of layer ``layer`` (both from 0) as a (1, 1, T, d_head) snapshot.

    A query head that shares its key/value head (grouped-query attention) takes that
    shared K and V. ValueError names a layer or head the model does not have.
    """
    _check_index(attention, layer, head)
    shared = attention.kv_head(head)
    return Snapshot(
        tuple(attention.tokens),
        attention.query[layer, head][None, None],  # (1, 1, T, d_head), a view
        attention.key[layer, shared][None, None],
        attention.value[layer, shared][None, None],
    )


def explorer_options(current: Options, attention: ModelAttention) -> Options:
    """The options that show a taken head as the model computed it: the softmax weights,
    scaled by 1/√d_head, and causal for a decoder (its head sees no later key)."""
    return replace(
        current, head=0, batch_index=0, scale=True, stage="weights", step=-1,
        causal=bool(attention.causal),
    )  # fmt: skip


def head_source(attention: ModelAttention, layer: int, head: int) -> HeadSource:
    """Where head ``head`` of layer ``layer`` (both from 0) came from: the model, and the
    key/value head that gives it K and V with every query head that shares it."""
    _check_index(attention, layer, head)
    shared = attention.kv_head(head)
    heads = attention.query.shape[1]
    return HeadSource(
        model=attention.model_name or "model",
        layer=layer,
        query_head=head,
        kv_head=shared,
        shared_by=tuple(h for h in range(heads) if attention.kv_head(h) == shared),
        tokens=tuple(attention.tokens),
        d_head=int(attention.query.shape[-1]),
    )


def head_title(attention: ModelAttention, layer: int, head: int) -> str:
    """The taken head's name as the user reads it, counting from 1: ``tiny-bert layer 2 head 1``,
    ``SmolLM2 layer 5 query head 6 (KV head 2)`` for a head that shares its keys."""
    source = head_source(attention, layer, head)
    if not source.grouped:
        return f"{source.model} layer {layer + 1} head {head + 1}"
    return f"{source.model} layer {layer + 1} query head {head + 1} (KV head {source.kv_head + 1})"
