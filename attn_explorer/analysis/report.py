"""Every instrument on one text, as the JSON ``attn-explorer analyze`` writes (issue 25).

``analyze(model, text)`` returns a plain dict of lists, ints, floats and None:

- ``tokens``, ``input_ids``, ``layers`` (L), ``heads`` (H query heads)
- ``head_scores``: previous_token, first_token, duplicate_token, induction, each L × H
  (None where undefined): :mod:`attn_explorer.analysis.head_scores`
- ``rollout``: T × T (:mod:`attn_explorer.analysis.rollout`)
- decoders only, None for an encoder: ``logit_lens`` (top_id, top_prob, final_prob,
  each (L + 1) × T), ``next_token`` ({"top": 10 × {id, token, prob}} at the last
  position) and ``ablation`` (target_id, clean_logit, logit_change L × H)
- with a corrupted prompt (issue 35), None without: ``compare`` (input_ids_corrupt,
  tokens_corrupt, answer_id, wrong_id, logit_diff_clean, logit_diff_corrupt),
  ``patching`` (heads L × H, residual L × T, normalised) and ``logit_attribution``
  (embed, attn [L], mlp [L], heads L × H or None, total):
  :mod:`~attn_explorer.analysis.compare`, :mod:`~attn_explorer.analysis.patching`,
  :mod:`~attn_explorer.analysis.attribution`
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from attn_explorer.analysis.ablation import Ablation
from attn_explorer.analysis.attribution import logit_attribution
from attn_explorer.analysis.compare import Comparison, PairError, compare
from attn_explorer.analysis.head_scores import result_head_scores
from attn_explorer.analysis.logit_lens import logit_lens
from attn_explorer.analysis.next_token import next_token
from attn_explorer.analysis.patching import patch_heads, patch_residual
from attn_explorer.analysis.rollout import rollout
from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.encoder.bert import BertModel
from attn_explorer.models.long_context import long_attention
from attn_explorer.models.results import ModelAttention

#: Why an encoder has no logit lens, next token or ablation (shown where they would be).
DECODER_ONLY = (
    "An encoder such as BERT predicts no next token: it has no unembedding to read its "
    "layers through, so the logit lens, the next-token bars and the ablation of a "
    "prediction are for decoders (GGUF models) only."
)
TOP_K = 10

#: The argument of :func:`analyze` each kind of :class:`PairError` is about.
PAIR_ARGUMENTS = {
    "token_count": "corrupt",
    "answer": "answer",
    "wrong": "wrong",
    "equal": "corrupt",
    "encoder": "model",
}


def plain(array: np.ndarray) -> list[Any]:
    """Nested lists of floats, NaN as None (JSON has no NaN)."""
    values = np.asarray(array, dtype=np.float64).tolist()

    def clean(value: Any) -> Any:
        if isinstance(value, list):
            return [clean(v) for v in value]
        return None if math.isnan(value) else value

    return clean(values)


def _stage(
    progress: Callable[[float, str], None] | None, start: float, width: float
) -> Callable[[float, str], None] | None:
    """A progress callback for one stage that reports its share of the whole."""
    if progress is None:
        return None
    report = progress
    return lambda fraction, message: report(start + width * fraction, message)


def analyze(
    model: BertModel | DecoderModel,
    text: str,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    ablation: bool = True,
    corrupt: str | None = None,
    answer: str | int | None = None,
    wrong: str | int | None = None,
) -> dict[str, Any]:
    """Run ``text`` through ``model`` and every instrument on it; the JSON-ready dict.

    ``progress(fraction, message)`` and ``should_stop()`` as in the rest of the app
    (``Cancelled`` when it says stop). ``ablation=False`` skips the head scan (the
    field is then None): the slow part, about 270 reruns of part of the model.
    ``corrupt``, a second prompt of as many tokens, adds the comparison, both patching
    maps and the logit attribution of ``answer`` against ``wrong`` (one token each, or
    an id; defaults in :func:`~attn_explorer.analysis.compare.compare`). A pair that
    cannot be compared raises :class:`PairError` naming the argument at fault, before
    anything runs long.
    """
    if corrupt is None and (answer is not None or wrong is not None):
        name = "answer" if answer is not None else "wrong"
        raise PairError(name, "compares two prompts; give corrupt= as well").named(name)
    comparison = None
    if corrupt is not None:
        try:
            comparison = compare(
                model, text, corrupt, answer, wrong, _stage(progress, 0.0, 0.05), should_stop
            )
        except PairError as exc:
            raise exc.named(PAIR_ARGUMENTS[exc.kind]) from None
    if progress is not None:
        progress(0.05 if comparison else 0.0, "running the model")
    result = model.attention(text)
    if comparison is None:
        return analyze_result(model, result, progress, should_stop, ablation)
    assert isinstance(model, DecoderModel)  # compare refuses an encoder
    report = analyze_result(model, result, _stage(progress, 0.05, 0.35), should_stop, ablation)
    report.update(compare_report(model, comparison, _stage(progress, 0.4, 0.6), should_stop))
    return report


def compare_report(
    model: DecoderModel,
    comparison: Comparison,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """The "compare", "patching" and "logit_attribution" fields of :func:`analyze`."""
    heads = patch_heads(model, comparison, _stage(progress, 0.0, 0.6), should_stop)
    residual = patch_residual(model, comparison, _stage(progress, 0.6, 0.4), should_stop)
    attribution = logit_attribution(model, comparison)
    if progress is not None:
        progress(1.0, "done")
    return {
        "compare": {
            "input_ids_corrupt": [int(i) for i in comparison.corrupt_ids],
            "tokens_corrupt": list(comparison.corrupt_tokens),
            "answer_id": comparison.answer_id,
            "wrong_id": comparison.wrong_id,
            "logit_diff_clean": comparison.logit_diff_clean,
            "logit_diff_corrupt": comparison.logit_diff_corrupt,
        },
        "patching": {"heads": plain(heads), "residual": plain(residual)},
        "logit_attribution": {
            "embed": attribution.embed,
            "attn": plain(attribution.attn),
            "mlp": plain(attribution.mlp),
            "heads": None if attribution.heads is None else plain(attribution.heads),
            "total": attribution.total,
        },
    }


def decoder_attention(model: DecoderModel, ids: list[int] | np.ndarray) -> ModelAttention:
    """A decoder's :class:`ModelAttention` of token ids (the repeated-tokens probe, whose
    ids need not survive a round trip through text)."""
    ids = [int(i) for i in ids]
    if not ids or len(ids) > model.max_tokens:
        raise ValueError(f"ids: give 1 … {model.max_tokens} token ids.")
    if not model.records_everything(len(ids)):
        return long_attention(model, ids)
    run = model.forward(np.array(ids))
    assert run.query is not None and run.key is not None and run.value is not None
    assert run.scores is not None and run.weights is not None and run.hidden_states is not None
    return ModelAttention(
        tokens=model.readable(ids),
        input_ids=np.array(ids, dtype=np.int64),
        token_type_ids=np.zeros(len(ids), dtype=np.int64),
        query=run.query,
        key=run.key,
        value=run.value,
        scores=run.scores,
        weights=run.weights,
        hidden_states=run.hidden_states,
        scale=run.scale,
        strategy="batched",
        model_name=model.name,
        full_length=len(ids),
        causal=True,
        logits=run.logits,
        kv_heads=model.kv_heads.copy(),
    )


def analyze_result(
    model: BertModel | DecoderModel,
    result: ModelAttention,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    ablation: bool = True,
) -> dict[str, Any]:
    """:func:`analyze` of a run already made (``model.attention(text)``)."""
    layers, heads = result.weights.shape[:2]
    scores = result_head_scores(result)
    report: dict[str, Any] = {
        "tokens": list(result.tokens),
        "input_ids": [int(i) for i in result.input_ids],
        "layers": int(layers),
        "heads": int(heads),
        "head_scores": {name: plain(values) for name, values in scores.items()},
        "rollout": None if result.long else plain(rollout(np.asarray(result.weights))),
        "logit_lens": None,
        "next_token": None,
        "ablation": None,
        "compare": None,
        "patching": None,
        "logit_attribution": None,
    }
    if not isinstance(model, DecoderModel):
        return report
    assert result.logits is not None
    if should_stop is not None and should_stop():
        raise Cancelled("analysis cancelled")
    lens = logit_lens(model, result.hidden_states, _stage(progress, 0.05, 0.1), should_stop)
    report["logit_lens"] = {
        "top_id": lens.top_id.tolist(),
        "top_prob": plain(lens.top_prob),
        "final_prob": plain(lens.final_prob),
    }
    top = next_token(result.logits[-1], model.tokenizer.readable, TOP_K)
    report["next_token"] = {
        "top": [{"id": c.id, "token": c.token, "prob": c.prob} for c in top],
    }
    if ablation:
        scan = Ablation(model, result.hidden_states, result.logits).scan(
            progress=_stage(progress, 0.15, 0.85), should_stop=should_stop
        )
        report["ablation"] = {
            "target_id": scan.target_id,
            "clean_logit": scan.clean_logit,
            "logit_change": plain(scan.logit_change),
        }
    if progress is not None:
        progress(1.0, "done")
    return report
