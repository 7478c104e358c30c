"""The decoder families the app runs, each as its one small difference from Llama.

Read with ``llama.py``'s forward pass; every flag below switches one line of it.

=========  ====================================================================================
llama      the reference: RMSNorm, RoPE on halves (llama.cpp stores Q/K permuted for
           adjacent pairs: undone on load), SiLU-gated MLP; Llama 3's frequency scaling
           comes as a ``rope_freqs.weight`` tensor. Mistral GGUFs are written as ``llama``.
qwen2      Q/K/V biases; Q/K stored as they are (llama.cpp rotates halves for Qwen).
qwen3      no biases; a per-head RMSNorm of q and of k before RoPE (``attn_q_norm``,
           ``attn_k_norm``); the head size from ``attention.key_length``.
gemma3     embeddings × √width; GeGLU (tanh-GELU gate); a norm after attention and after the
           MLP as well as before ("sandwich"); q/k norms; local layers (a sliding window, their
           own RoPE base 10 000) with every 6th layer global — a llama.cpp convention a GGUF
           does not record; the attention scale 1/√(key_length).
phi3       Q, K and V fused into one ``attn_qkv`` matrix, the MLP's gate and up into one
           ``ffn_up`` (gate rows first); otherwise Llama without the Q/K permutation.
gemma2     like gemma3 without q/k norms, every 2nd layer global, and tanh soft-capping of the
           attention logits and of the final logits (``attn_logit_softcapping``,
           ``final_logit_softcapping``; 50 and 30 when a file does not say, as llama.cpp);
           a window of 4 096 when the file records none (the first Gemma 2 GGUFs did not).
=========  ====================================================================================

A sliding window of 0 is no window (llama.cpp's converter writes 0 for Phi-3 models without
one). Phi-3's window, when a file has one, is not applied: llama.cpp does not either ("Phi SWA
is currently disabled"); it only matters for texts longer than the window (2 047 tokens in
Phi-3 mini). Gemma 3's final soft-capping applies when its file records one.

Gemma's converter stores its norms' weights with Gemma's "1 +" already added, so a GGUF's
norms are plain RMSNorm weights here as for every family.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """What one architecture changes in the shared decoder (see the module table)."""

    permuted_qk: bool = False  # llama.cpp permuted Q/K rows for adjacent-pair RoPE
    qkv_bias: bool = False  # Q, K and V have biases
    qk_norm: bool = False  # a per-head RMSNorm of q and k before RoPE
    sandwich_norms: bool = False  # RMSNorm of the attention and the MLP outputs too
    scaled_embedding: bool = False  # embeddings multiplied by √width
    activation: str = "silu"  # the MLP gate: "silu" or "gelu_tanh"
    global_every: int = 0  # every n-th layer global, the rest local (0: all global)
    local_rope_theta: float = 0.0  # local layers' RoPE base (0: the file's)
    softcap: bool = False  # tanh soft-capping of attention and final logits
    final_softcap: bool = False  # a final soft-capping when the file records one
    default_window: int = 0  # the sliding window when the file records none
    fused: bool = False  # Phi-3: attn_qkv for Q, K, V and ffn_up for gate + up


FAMILIES: dict[str, Family] = {
    "llama": Family(permuted_qk=True),
    "qwen2": Family(qkv_bias=True),
    "qwen3": Family(qk_norm=True),
    "phi3": Family(fused=True),
    "gemma3": Family(
        qk_norm=True,
        sandwich_norms=True,
        scaled_embedding=True,
        activation="gelu_tanh",
        global_every=6,
        local_rope_theta=10000.0,
        final_softcap=True,
    ),
    "gemma2": Family(
        sandwich_norms=True,
        scaled_embedding=True,
        activation="gelu_tanh",
        global_every=2,
        softcap=True,
        final_softcap=True,
        default_window=4096,
    ),
}


def layer_kinds(num_layers: int, global_every: int, window: int) -> tuple[str, ...]:
    """ "local" or "global" per layer: with a window, every ``global_every``-th layer is global
    (llama.cpp's ``set_swa_pattern``: layer l is local when l % n < n − 1)."""
    if not window or not global_every:
        return ("global",) * num_layers
    return tuple(
        "local" if layer % global_every < global_every - 1 else "global"
        for layer in range(num_layers)
    )
