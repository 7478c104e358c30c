"""Direct logit attribution: how much each part of the model writes the clean logit difference.

The residual stream at the last position is a sum: the embedding, plus each block's change
by its attention, plus each block's change by its MLP. With the final norm's scale frozen at
its clean value (TransformerLens's ``ActivationCache.logit_attrs`` / ``apply_ln_to_stack``,
Wang et al. 2022), the logit difference is linear in that sum, and a component c
contributes

    c / rms(x_final) · g · (W_U[answer] − W_U[wrong])

with rms(x) = √(mean(x²) + eps) of the clean run's final stream and g the final norm's
weight (Gemma's "1 +" is already in the weight the app reads). The parts add up to the
clean logit difference. A block's attention change splits by query head through the
output projection: head h writes z_h · W_O[:, h·d:(h+1)·d]ᵀ (TransformerLens's
``result``), except in Gemma 2 and 3, whose norm after attention mixes the heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_explorer.analysis.compare import Comparison, last_logit_rows
from attn_explorer.models.decoder.llama import DecoderModel

#: Why Gemma 2 / 3 have no per-head attribution (shown in the window).
MIXED_HEADS = (
    "No per-head split: this family normalises the attention output after the output "
    "projection (Gemma's norm after attention), which mixes the heads; the layer's "
    "attention bar is exact."
)


@dataclass(frozen=True)
class LogitAttribution:
    """The clean logit difference split into the embeddings, each block's attention and
    MLP, and (when the family allows it) each query head; see the module doc.

    ``attn`` and ``mlp`` are (L,), ``heads`` (L, H) or None (then ``note`` says why).
    ``total`` = embed + Σ attn + Σ mlp: the logit difference (before Gemma 2's final
    soft-cap, which ``note`` then mentions).
    """

    embed: float
    attn: np.ndarray
    mlp: np.ndarray
    heads: np.ndarray | None
    total: float
    note: str | None


def logit_attribution(model: DecoderModel, comparison: Comparison) -> LogitAttribution:
    """Direct logit attribution of ``comparison``'s clean logit difference (last position)."""
    c = model.config
    trace = comparison.clean_trace
    final = trace.inputs[-1, -1].astype(np.float64)  # (hidden,): the last block's output
    rms = np.sqrt(np.mean(final * final) + c.rms_norm_eps)
    rows = last_logit_rows(model, [comparison.answer_id, comparison.wrong_id]).astype(np.float64)
    direction = np.asarray(model.weights.final_norm, np.float64) * (rows[0] - rows[1]) / rms
    embed = float(trace.inputs[0, -1].astype(np.float64) @ direction)
    attn = trace.attn_last.astype(np.float64) @ direction  # (L,)
    mlp = trace.mlp_last.astype(np.float64) @ direction  # (L,)
    notes = []
    heads: np.ndarray | None = None
    if c.sandwich_norms:
        notes.append(MIXED_HEADS)
    else:
        d = c.head_dim
        heads = np.zeros((c.num_layers, c.num_heads))
        for layer in range(c.num_layers):
            output = model.weights.layer(layer).attn_output.astype(np.float64)  # (hidden, H·d)
            z = trace.mixed[layer, -1].astype(np.float64).reshape(c.num_heads, d)  # (H, d)
            # head h's write to the stream, read along the direction: z_h · W_O,hᵀ · direction
            per_head = (direction @ output).reshape(c.num_heads, d)  # (H, d)
            heads[layer] = np.sum(z * per_head, axis=-1)
    total = embed + float(attn.sum()) + float(mlp.sum())
    if c.final_softcap:
        notes.append(
            f"This family soft-caps its final logits: the parts add up to the logit difference "
            f"before the cap ({total:.4f}); after it, the difference is "
            f"{comparison.logit_diff_clean:.4f}."
        )
    return LogitAttribution(
        embed=embed,
        attn=attn,
        mlp=mlp,
        heads=heads,
        total=total,
        note=" ".join(notes) or None,
    )
