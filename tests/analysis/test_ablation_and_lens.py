"""Head ablation, the logit lens, next token and ``attn-explorer analyze`` on tiny models.

The ablation is checked against an independent float64 forward (one head at a time,
RoPE on the weights as the file stores them, as in tests/models/test_gguf.py) that
zeroes the chosen heads' attention outputs before the output projection.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from attn_explorer.analysis import (
    Ablation,
    analyze,
    decoder_attention,
    logit_lens,
    next_token,
    probabilities,
)
from attn_explorer.models.decoder.blocks import run_blocks
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

TEXT = " the cat sat on the mat, the cat sat on"


def reference_logits(tiny, ids, ablated=()):
    """(L + 1, T, hidden) pre-norm hidden states and (T, vocab) logits, float64, with the
    attention output of each (layer, head) in ``ablated`` replaced by zeros."""
    w = {k: v.astype(np.float64) for k, v in tiny.tensors.items()}
    d, n_heads, group = tiny.head_dim, tiny.num_heads, tiny.num_heads // tiny.num_kv_heads
    t = len(ids)

    def norm(x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + tiny.rms_norm_eps) * weight

    def rope(vec, position):  # llama: adjacent pairs, as the file stores Q and K
        out = vec.copy()
        for i in range(d // 2):
            angle = position * tiny.rope_theta ** (-2 * i / d)
            a, b = 2 * i, 2 * i + 1
            out[a] = vec[a] * np.cos(angle) - vec[b] * np.sin(angle)
            out[b] = vec[b] * np.cos(angle) + vec[a] * np.sin(angle)
        return out

    x = w["token_embd.weight"][ids]
    hidden = [x]
    for layer in range(tiny.num_layers):
        p = f"blk.{layer}."
        h = norm(x, w[p + "attn_norm.weight"])
        q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        out = np.zeros((t, n_heads * d))
        for head in range(n_heads):
            if (layer, head) in ablated:
                continue  # its slice of the output projection's input stays zero
            kv = head // group
            qh = np.array([rope(q[i, head * d : (head + 1) * d], i) for i in range(t)])
            kh = np.array([rope(k[j, kv * d : (kv + 1) * d], j) for j in range(t)])
            vh = v[:, kv * d : (kv + 1) * d]
            for i in range(t):
                s = np.array([qh[i] @ kh[j] / np.sqrt(d) for j in range(i + 1)])
                e = np.exp(s - s.max())
                out[i, head * d : (head + 1) * d] = (e / e.sum()) @ vh[: i + 1]
        x = x + out @ w[p + "attn_output.weight"].T
        h = norm(x, w[p + "ffn_norm.weight"])
        gate = h @ w[p + "ffn_gate.weight"].T
        x = (
            x
            + ((gate / (1 + np.exp(-gate))) * (h @ w[p + "ffn_up.weight"].T))
            @ w[p + "ffn_down.weight"].T
        )
        hidden.append(x)
    logits = norm(x, w["output_norm.weight"]) @ w["token_embd.weight"].T
    return np.stack(hidden), logits


@pytest.fixture
def tiny(tmp_path):
    """A 3-layer tiny llama GGUF (4 query heads sharing 2 KV heads) and what it holds."""
    path = tmp_path / "tiny.gguf"
    written = write_tiny_gguf(path, num_layers=3)
    return path, written, load_gguf(path)


def test_run_blocks_from_any_layer_equals_the_forward_bit_for_bit(tiny):
    _, _, model = tiny
    run = model.attention(TEXT)
    for first in range(model.config.num_layers):
        out = run_blocks(model, run.hidden_states[first], first)
        np.testing.assert_array_equal(out, run.hidden_states[-1])
    batched = run_blocks(model, np.stack([run.hidden_states[1]] * 3), 1)
    np.testing.assert_allclose(
        batched, np.broadcast_to(run.hidden_states[-1], batched.shape), rtol=1e-5, atol=1e-5
    )
    with pytest.raises(ValueError, match="head_mask"):
        run_blocks(model, run.hidden_states[0], 0, np.ones((2, 2)))


def test_every_single_head_ablation_matches_the_reference(tiny):
    _, written, model = tiny
    run = model.attention(TEXT)
    _, clean = reference_logits(written, run.input_ids)
    ablation = Ablation(model, run.hidden_states, run.logits)
    target = int(np.argmax(clean[-1]))
    assert ablation.target_id == target
    scan = ablation.scan()
    expected = np.zeros((3, 4))
    for layer in range(3):
        for head in range(4):
            _, logits = reference_logits(written, run.input_ids, {(layer, head)})
            expected[layer, head] = logits[-1, target] - clean[-1, target]
    np.testing.assert_allclose(scan.logit_change, expected, atol=2e-4)
    assert np.abs(expected).max() > 0.01  # the heads matter: not a comparison of zeros
    # query head 1 reads KV head 0 (1 // 2): zeroing KV head 1's heads instead differs
    assert scan.logit_change[1, 1] != pytest.approx(scan.logit_change[1, 2], abs=1e-4)


def test_ablating_a_set_of_heads_and_its_distribution_effects(tiny):
    _, written, model = tiny
    run = model.attention(TEXT)
    chosen = {(0, 3), (2, 1)}
    _, clean = reference_logits(written, run.input_ids)
    _, logits = reference_logits(written, run.input_ids, chosen)
    ablation = Ablation(model, run.hidden_states, run.logits)
    effect = ablation.ablate(chosen, target_id=7)
    assert effect.heads == ((0, 3), (2, 1)) and effect.target_id == 7
    assert effect.logit_change == pytest.approx(logits[-1, 7] - clean[-1, 7], abs=2e-4)
    p, q = probabilities(clean[-1]), probabilities(logits[-1])
    assert effect.prob_change == pytest.approx(q[7] - p[7], abs=1e-5)
    assert effect.kl == pytest.approx(float(np.sum(p * np.log(p / q))), abs=1e-5)
    np.testing.assert_allclose(effect.probs, q, atol=1e-5)
    for bad in ([], [(3, 0)], [(0, 4)], [(-1, 0)]):
        with pytest.raises(ValueError):
            ablation.ablate(bad)


def test_scan_reports_progress_and_stops_when_asked(tiny):
    from attn_explorer.compute import Cancelled

    _, _, model = tiny
    run = model.attention(TEXT)
    ablation = Ablation(model, run.hidden_states, run.logits)
    seen = []
    ablation.scan(progress=lambda fraction, message: seen.append(fraction))
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == 3
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 1

    with pytest.raises(Cancelled):
        ablation.scan(should_stop=stop)


def test_logit_lens_rows_are_each_layers_readout_and_the_last_is_the_model(tiny):
    _, written, model = tiny
    run = model.attention(TEXT)
    hidden, logits = reference_logits(written, run.input_ids)
    lens = logit_lens(model, run.hidden_states)
    assert lens.top_id.shape == (4, len(run.input_ids))
    w = written.tensors
    for row in range(4):
        x = hidden[row]
        normed = x / np.sqrt((x * x).mean(-1, keepdims=True) + written.rms_norm_eps)
        probs = probabilities(normed * w["output_norm.weight"] @ w["token_embd.weight"].T)
        np.testing.assert_array_equal(lens.top_id[row], probs.argmax(-1))
        np.testing.assert_allclose(lens.top_prob[row], probs.max(-1), atol=1e-5)
        final = probs[np.arange(probs.shape[0]), logits.argmax(-1)]
        np.testing.assert_allclose(lens.final_prob[row], final, atol=1e-5)
    np.testing.assert_array_equal(lens.top_id[-1], run.logits.argmax(-1))
    np.testing.assert_array_equal(lens.top_prob[-1], lens.final_prob[-1])


def test_next_token_is_the_top_ten_by_probability(tiny):
    _, _, model = tiny
    run = model.attention(TEXT)
    top = next_token(run.logits[-1], model.tokenizer.readable, 10)
    probs = probabilities(run.logits[-1])
    assert [c.id for c in top] == np.argsort(-probs, kind="stable")[:10].tolist()
    assert [c.prob for c in top] == pytest.approx(np.sort(probs)[::-1][:10].tolist())
    assert top[0].token == model.tokenizer.readable(top[0].id)


def test_decoder_attention_of_ids_equals_the_text_run(tiny):
    _, _, model = tiny
    run = model.attention(TEXT)
    again = decoder_attention(model, run.input_ids)
    np.testing.assert_array_equal(again.weights, run.weights)
    assert again.tokens == run.tokens
    with pytest.raises(ValueError):
        decoder_attention(model, [])


def check_layout(report, layers, heads, t, decoder):
    assert list(report) == [
        "tokens",
        "input_ids",
        "layers",
        "heads",
        "head_scores",
        "rollout",
        "logit_lens",
        "next_token",
        "ablation",
        "compare",
        "patching",
        "logit_attribution",
    ]
    # one text: the two-prompt fields of issue 35 are null (tests/analysis/test_patching.py)
    assert report["compare"] is report["patching"] is report["logit_attribution"] is None
    assert len(report["tokens"]) == len(report["input_ids"]) == t
    assert (report["layers"], report["heads"]) == (layers, heads)
    assert set(report["head_scores"]) == {
        "previous_token",
        "first_token",
        "duplicate_token",
        "induction",
    }
    for grid in report["head_scores"].values():
        assert len(grid) == layers and all(len(row) == heads for row in grid)
    assert np.array(report["rollout"]).shape == (t, t)
    if not decoder:
        assert report["logit_lens"] is report["next_token"] is report["ablation"] is None
        return
    for name in ("top_id", "top_prob", "final_prob"):
        assert np.array(report["logit_lens"][name]).shape == (layers + 1, t)
    top = report["next_token"]["top"]
    assert len(top) == 10 and [set(c) for c in top] == [{"id", "token", "prob"}] * 10
    assert [c["prob"] for c in top] == sorted((c["prob"] for c in top), reverse=True)
    assert set(report["ablation"]) == {"target_id", "clean_logit", "logit_change"}
    assert np.array(report["ablation"]["logit_change"]).shape == (layers, heads)


def test_analyze_command_writes_the_issues_json_for_a_decoder(tiny, tmp_path):
    path, written, model = tiny
    out = tmp_path / "out.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attn_explorer",
            "analyze",
            "--model",
            str(path),
            "--text",
            TEXT,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    report = json.loads(out.read_text(encoding="utf-8"))
    run = model.attention(TEXT)
    check_layout(report, 3, 4, len(run.input_ids), decoder=True)
    assert report["input_ids"] == run.input_ids.tolist()
    assert report["tokens"] == run.tokens
    _, clean = reference_logits(written, run.input_ids)
    assert report["ablation"]["target_id"] == int(clean[-1].argmax())
    assert report["ablation"]["clean_logit"] == pytest.approx(clean[-1].max(), abs=2e-4)
    assert report["logit_lens"]["top_id"][-1] == clean.argmax(-1).tolist()
    # the text repeats " the cat sat on": duplicate and induction are defined
    assert all(v is not None for row in report["head_scores"]["induction"] for v in row)


def test_analyze_of_an_encoder_has_nulls_for_the_decoder_instruments(tmp_path):
    from attn_explorer.models import load_model
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    model = load_model(write_tiny_bert(tmp_path / "tiny-bert"))
    report = analyze(model, "the the cat")
    run = model.attention("the the cat")
    layers, heads = run.weights.shape[:2]
    check_layout(report, layers, heads, len(run.tokens), decoder=False)
    # [CLS] the the cat [SEP]: "the" repeats at once, so duplicate is defined but not
    # induction (no earlier copy of "the" has a token after it before i − 1)
    assert run.tokens == ["[CLS]", "the", "the", "cat", "[SEP]"]
    assert all(v is not None for row in report["head_scores"]["duplicate_token"] for v in row)
    assert all(v is None for row in report["head_scores"]["induction"] for v in row)


def test_analyze_with_text_file_and_user_errors(tiny, tmp_path):
    from attn_explorer.cli.main import main

    path, _, _ = tiny
    text_file = tmp_path / "text.txt"
    text_file.write_text("Ünïcödé — 東京 the cat, the cat", encoding="utf-8")
    out = tmp_path / "a.json"
    assert (
        main(
            [
                "analyze",
                "--model",
                str(path),
                "--text-file",
                str(text_file),
                "--json",
                str(out),
                "--no-ablation",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["ablation"] is None and report["logit_lens"] is not None
    bad_file = tmp_path / "latin1.txt"
    bad_file.write_bytes("caf\xe9".encode("latin-1"))
    cases = [
        ["--model", str(path), "--json", str(out)],  # no text
        ["--model", str(path), "--text", "x", "--text-file", str(text_file), "--json", str(out)],
        ["--model", str(tmp_path / "missing.gguf"), "--text", "x", "--json", str(out)],
        ["--model", str(path), "--text", "", "--json", str(out)],
        ["--model", str(path), "--text-file", str(tmp_path / "nope.txt"), "--json", str(out)],
        ["--model", str(path), "--text-file", str(bad_file), "--json", str(out)],
        ["--model", str(path), "--text", "x", "--json", str(tmp_path)],
    ]
    before = out.read_bytes()
    for argv in cases:
        done = subprocess.run(
            [sys.executable, "-m", "attn_explorer", "analyze", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("attn-explorer analyze: error:"), lines
    assert out.read_bytes() == before  # a failed run leaves the earlier file as it was
