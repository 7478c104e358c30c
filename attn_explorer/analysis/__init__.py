"""Instruments for real models, Qt-free (issue 25): what each head does, which heads
matter for a prediction, what the model predicts at every layer.

- ``head_scores(weights, input_ids)``: previous-token, first-token, duplicate-token and
  induction scores, each (L, H); ``repeated_random_tokens`` (the induction probe)
- ``rollout(weights)``: attention rollout (Abnar & Zuidema 2020), (T, T)
- ``logit_lens(model, hidden_states)``: top token and probabilities per layer × position
- ``next_token(logits, readable, k)``: the top-k next tokens
- ``Ablation(model, hidden_states, logits)``: ``ablate(heads)`` and ``scan()`` of every
  head (zero-ablation of its attention output)
- ``compare(model, clean, corrupt)``: two prompts, an answer and a wrong token, each
  run's logit difference (issue 35); ``patch_heads``, ``patch_residual``,
  ``patch_head_set`` (activation patching) and ``logit_attribution`` on it
- ``analyze(model, text)``: all of them as the JSON of ``attn-explorer analyze``;
  ``decoder_attention(model, ids)`` runs ids that are not text (the probe)
"""

from attn_explorer.analysis.ablation import Ablation, AblationEffect, AblationScan, kl_divergence
from attn_explorer.analysis.attribution import LogitAttribution, logit_attribution
from attn_explorer.analysis.compare import Comparison, PairError, compare, token_id
from attn_explorer.analysis.head_scores import SCORE_NAMES, head_scores, repeated_random_tokens
from attn_explorer.analysis.logit_lens import LogitLens, logit_lens
from attn_explorer.analysis.next_token import Candidate, next_token, probabilities, top_ids
from attn_explorer.analysis.patching import (
    estimate_seconds,
    patch_head_set,
    patch_heads,
    patch_residual,
)
from attn_explorer.analysis.report import (
    DECODER_ONLY,
    analyze,
    analyze_result,
    decoder_attention,
)
from attn_explorer.analysis.rollout import rollout

__all__ = [
    "DECODER_ONLY",
    "SCORE_NAMES",
    "Ablation",
    "AblationEffect",
    "AblationScan",
    "Candidate",
    "Comparison",
    "LogitAttribution",
    "LogitLens",
    "PairError",
    "analyze",
    "analyze_result",
    "compare",
    "decoder_attention",
    "estimate_seconds",
    "head_scores",
    "kl_divergence",
    "logit_attribution",
    "logit_lens",
    "next_token",
    "patch_head_set",
    "patch_heads",
    "patch_residual",
    "probabilities",
    "repeated_random_tokens",
    "rollout",
    "token_id",
    "top_ids",
]
