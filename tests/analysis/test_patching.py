"""Two prompts (issue 35): compare, activation patching and direct logit attribution, on a
tiny random llama GGUF, against an independent float64 forward with patching hooks; their
exact properties; and ``attn-explorer analyze --corrupt``'s JSON and its one-line refusals.

The reference forward (one head at a time, RoPE on adjacent pairs of the weights as the
file stores them, as in test_ablation_and_lens.py) replaces a head's output (its weights
@ V, before the output projection) or a block's input at one position by the clean run's.
"""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from attn_explorer.analysis import (
    PairError,
    analyze,
    compare,
    logit_attribution,
    patch_head_set,
    patch_heads,
    patch_residual,
    token_id,
)
from attn_explorer.analysis.patching import estimate_seconds, patch_flops
from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder.blocks import run_blocks
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.errors import TextError
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

CLEAN = " the cat sat on the mat, the cat"
CORRUPT = " the cat sat on the hat, the cat"  # one token differs: 'm' / 'h' at position 6


def reference_run(tiny, ids, z_from=None, resid_from=None):
    """Float64 (L + 1, T, hidden) block inputs, (L, T, H·d) head outputs and (T, vocab)
    logits of ``ids``. ``z_from`` {(layer, head): (T, H·d) outputs of another run} takes
    those heads' outputs from it; ``resid_from`` {(layer, position): (hidden,)} replaces
    block ``layer``'s input at ``position``."""
    z_from, resid_from = z_from or {}, resid_from or {}
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
    hidden, mixed = [], []
    for layer in range(tiny.num_layers):
        x = x.copy()
        for (where, position), value in resid_from.items():
            if where == layer:
                x[position] = value
        hidden.append(x)
        p = f"blk.{layer}."
        h = norm(x, w[p + "attn_norm.weight"])
        q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        out = np.zeros((t, n_heads * d))
        for head in range(n_heads):
            cols = slice(head * d, (head + 1) * d)
            if (layer, head) in z_from:
                out[:, cols] = z_from[(layer, head)][:, cols]
                continue
            kv = head // group
            qh = np.array([rope(q[i, cols], i) for i in range(t)])
            kh = np.array([rope(k[j, kv * d : (kv + 1) * d], j) for j in range(t)])
            vh = v[:, kv * d : (kv + 1) * d]
            for i in range(t):
                s = np.array([qh[i] @ kh[j] / np.sqrt(d) for j in range(i + 1)])
                e = np.exp(s - s.max())
                out[i, cols] = (e / e.sum()) @ vh[: i + 1]
        mixed.append(out)
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
    return np.stack(hidden), np.stack(mixed), logits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 3-layer tiny llama GGUF (4 query heads sharing 2 KV heads), what it holds, the
    model and the comparison of CLEAN and CORRUPT."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    written = write_tiny_gguf(path, num_layers=3)
    model = load_gguf(path)
    return path, written, model, compare(model, CLEAN, CORRUPT)


def reference_diff(written, ids, answer, wrong, **patches):
    logits = reference_run(written, ids, **patches)[2][-1]
    return logits[answer] - logits[wrong]


def test_compare_defaults_and_logit_differences_match_the_reference(tiny):
    _, written, model, c = tiny
    hidden, _, clean = reference_run(written, c.clean_ids)
    _, _, corrupt = reference_run(written, c.corrupt_ids)
    assert c.first_diff == 6 and c.differs() == [i == 6 for i in range(11)]
    assert c.clean_tokens == model.readable(c.clean_ids)
    assert c.answer_id == int(np.argmax(clean[-1]))  # the clean run's top token
    if int(np.argmax(corrupt[-1])) != c.answer_id:
        assert c.wrong_id == int(np.argmax(corrupt[-1]))  # the corrupted run's top token
    ld_clean = clean[-1, c.answer_id] - clean[-1, c.wrong_id]
    ld_corrupt = corrupt[-1, c.answer_id] - corrupt[-1, c.wrong_id]
    assert c.logit_diff_clean == pytest.approx(ld_clean, abs=2e-4)
    assert c.logit_diff_corrupt == pytest.approx(ld_corrupt, abs=2e-4)
    np.testing.assert_allclose(c.clean_hidden, hidden, atol=2e-4)
    np.testing.assert_allclose(c.clean_logits, clean[-1], atol=2e-4)
    # the trace is the run: the last block's output equals the forward's
    run = model.attention(CLEAN)
    np.testing.assert_array_equal(c.clean_hidden, run.hidden_states)
    np.testing.assert_array_equal(c.clean_logits, run.logits[-1])


def test_when_the_corrupted_top_is_the_answer_the_wrong_token_is_the_clean_second(tiny):
    _, _, model, c = tiny
    chosen = compare(model, CLEAN, CORRUPT, answer=int(np.argmax(c.corrupt_logits)))
    ranked = np.argsort(-c.clean_logits, kind="stable")
    expected = next(int(i) for i in ranked if i != chosen.answer_id)
    assert chosen.wrong_id == expected


def test_every_head_patch_matches_the_reference(tiny):
    _, written, model, c = tiny
    heads = patch_heads(model, c)
    _, clean_z, _ = reference_run(written, c.clean_ids)
    expected = np.zeros((3, 4))
    for layer in range(3):
        for head in range(4):
            ld = reference_diff(
                written,
                c.corrupt_ids,
                c.answer_id,
                c.wrong_id,
                z_from={(layer, head): clean_z[layer]},
            )
            expected[layer, head] = ld
    expected = (expected - c.logit_diff_corrupt) / (c.logit_diff_clean - c.logit_diff_corrupt)
    np.testing.assert_allclose(heads, expected, atol=2e-3)
    assert np.abs(expected).max() > 0.1  # the heads matter: not a comparison of zeros
    # query heads 0 and 1 share KV head 0: patching one is not patching the other
    assert heads[1, 0] != pytest.approx(heads[1, 1], abs=1e-3)


def test_every_residual_patch_matches_the_reference(tiny):
    _, written, model, c = tiny
    residual = patch_residual(model, c)
    hidden, _, _ = reference_run(written, c.clean_ids)
    assert residual.shape == (3, 11)
    assert (residual[:, : c.first_diff] == 0).all()  # same activations: exactly 0
    expected = np.zeros((3, 11))
    for layer in range(3):
        for position in range(c.first_diff, 11):
            patch = {(layer, position): hidden[layer, position]}
            expected[layer, position] = reference_diff(
                written, c.corrupt_ids, c.answer_id, c.wrong_id, resid_from=patch
            )
    expected[:, c.first_diff :] = (expected[:, c.first_diff :] - c.logit_diff_corrupt) / (
        c.logit_diff_clean - c.logit_diff_corrupt
    )
    np.testing.assert_allclose(residual, expected, atol=2e-3)


def test_exact_properties_of_patching(tiny):
    _, _, model, c = tiny
    residual = patch_residual(model, c)
    # the prompts differ in one token: its embedding patched makes the corrupted run the clean
    assert residual[0, c.first_diff] == pytest.approx(1.0, abs=1e-4)
    assert residual[0, c.first_diff + 1 :] == pytest.approx(0.0, abs=1e-4)  # same tokens
    # the last token is the same in both: with every head's output taken from the clean
    # run, nothing of the corrupted prompt reaches the last position
    every = [(layer, head) for layer in range(3) for head in range(4)]
    assert patch_head_set(model, c, every) == pytest.approx(1.0, abs=1e-4)
    assert patch_head_set(model, c, []) == 0.0
    heads = patch_heads(model, c)
    for layer, head in [(0, 1), (2, 3)]:
        alone = patch_head_set(model, c, [(layer, head)])
        assert alone == pytest.approx(heads[layer, head], abs=1e-5)
    with pytest.raises(ValueError, match="layers count 0 … 2"):
        patch_head_set(model, c, [(3, 0)])


def test_a_head_set_matches_the_reference(tiny):
    _, written, model, c = tiny
    _, clean_z, _ = reference_run(written, c.clean_ids)
    chosen = [(0, 2), (1, 0), (1, 3), (2, 1)]
    ld = reference_diff(
        written,
        c.corrupt_ids,
        c.answer_id,
        c.wrong_id,
        z_from={key: clean_z[key[0]] for key in chosen},
    )
    expected = (ld - c.logit_diff_corrupt) / (c.logit_diff_clean - c.logit_diff_corrupt)
    assert patch_head_set(model, c, chosen) == pytest.approx(expected, abs=2e-3)


def test_logit_attribution_adds_up_and_matches_the_reference(tiny):
    _, written, model, c = tiny
    a = logit_attribution(model, c)
    assert a.total == pytest.approx(c.logit_diff_clean, rel=1e-3)
    assert a.embed + a.attn.sum() + a.mlp.sum() == pytest.approx(a.total, abs=1e-9)
    assert a.heads is not None and a.note is None
    np.testing.assert_allclose(a.heads.sum(axis=1), a.attn, atol=1e-5)
    # independent: the reference's stream changes at the last position, read through
    # the final norm's clean scale and W_U[answer] − W_U[wrong]
    hidden, mixed, _ = reference_run(written, c.clean_ids)
    w = {k: v.astype(np.float64) for k, v in written.tensors.items()}
    final = hidden[-1, -1]
    rms = np.sqrt(np.mean(final * final) + written.rms_norm_eps)
    unembed = w["token_embd.weight"]
    direction = w["output_norm.weight"] * (unembed[c.answer_id] - unembed[c.wrong_id]) / rms
    assert a.embed == pytest.approx(hidden[0, -1] @ direction, abs=2e-3)
    d = written.head_dim
    for layer in range(3):
        out = w[f"blk.{layer}.attn_output.weight"]
        attn = mixed[layer, -1] @ out.T
        assert a.attn[layer] == pytest.approx(attn @ direction, abs=2e-3)
        mid = hidden[layer, -1] + attn
        assert a.mlp[layer] == pytest.approx((hidden[layer + 1, -1] - mid) @ direction, abs=2e-3)
        for head in range(4):
            cols = slice(head * d, (head + 1) * d)
            part = mixed[layer, -1, cols] @ out[:, cols].T @ direction
            assert a.heads[layer, head] == pytest.approx(part, abs=2e-3)


def test_swapping_the_prompts_negates_the_logit_differences(tiny):
    _, _, model, c = tiny
    swapped = compare(model, CORRUPT, CLEAN, answer=c.wrong_id, wrong=c.answer_id)
    assert swapped.logit_diff_clean == pytest.approx(-c.logit_diff_corrupt, abs=1e-6)
    assert swapped.logit_diff_corrupt == pytest.approx(-c.logit_diff_clean, abs=1e-6)
    # and with the answer kept: the two differences trade places
    kept = compare(model, CORRUPT, CLEAN, answer=c.answer_id, wrong=c.wrong_id)
    assert kept.logit_diff_clean == pytest.approx(c.logit_diff_corrupt, abs=1e-6)
    # patching the one differing embedding still recovers everything, the other way round
    assert patch_residual(model, kept)[0, kept.first_diff] == pytest.approx(1.0, abs=1e-4)


def test_stop_raises_cancelled_and_leaves_the_comparison_intact(tiny):
    _, _, model, c = tiny
    before = {name: getattr(c.corrupt_trace, name).copy() for name in ("inputs", "mixed")}
    heard = []
    for function in (patch_heads, patch_residual):
        asked = []

        def second_time(asked=asked):  # Stop pressed while the scan runs
            asked.append(1)
            return len(asked) == 2

        with pytest.raises(Cancelled):
            function(model, c, lambda f, m: heard.append(f), second_time)
    assert heard and all(0 < f <= 1 for f in heard)
    with pytest.raises(Cancelled):
        compare(model, CLEAN, CORRUPT, should_stop=lambda: True)
    for name, array in before.items():
        np.testing.assert_array_equal(getattr(c.corrupt_trace, name), array)
    np.testing.assert_array_equal(patch_heads(model, c), patch_heads(model, c))
    with pytest.raises(Cancelled):
        analyze(model, CLEAN, should_stop=lambda: True, corrupt=CORRUPT, ablation=False)


def test_progress_reaches_one_and_the_estimate_counts_the_work(tiny):
    _, _, model, c = tiny
    heard = []
    patch_heads(model, c, lambda f, m: heard.append((f, m)))
    assert heard[-1][0] == pytest.approx(1.0) and heard == sorted(heard, key=lambda p: p[0])
    assert "block" in heard[0][1]
    # later first difference: fewer rows to rerun
    assert patch_flops(model, 11, 6) < patch_flops(model, 11, 0)
    assert 0 < estimate_seconds(model, 11, 6) < estimate_seconds(model, 11)


def test_bad_pairs_raise_pair_errors_of_their_kind(tiny, tmp_path):
    _, _, model, c = tiny
    cases = [
        (lambda: compare(model, CLEAN, CORRUPT + " the"), "token_count", "12 tokens and the"),
        (lambda: compare(model, CLEAN, CLEAN), "equal", "same tokens"),
        (lambda: compare(model, CLEAN, CORRUPT, answer=" the cat"), "answer", "2 tokens"),
        (lambda: compare(model, CLEAN, CORRUPT, wrong=""), "wrong", "'' is 0 tokens"),
        (lambda: compare(model, CLEAN, CORRUPT, wrong=10**6), "wrong", "outside"),
        (lambda: compare(model, CLEAN, CORRUPT, c.answer_id, c.answer_id), "wrong", "answer"),
    ]
    for call, kind, words in cases:
        with pytest.raises(PairError, match=words) as caught:
            call()
        assert caught.value.kind == kind
    with pytest.raises(PairError, match=r"' the cat' is 2 tokens \(' the', ' cat'\)"):
        token_id(model, " the cat", "answer")
    assert token_id(model, " the", "answer") == model.tokenizer.encode(" the")[0]
    with pytest.raises(PairError, match="the clean one 11; they part at token 6"):
        compare(model, CLEAN, " the cat sat on the hat, the cat sat")
    long = load_gguf(tiny[0])
    long.records_everything = lambda tokens: False  # as for a prompt of thousands of tokens
    with pytest.raises(TextError, match=r"11 tokens each; .* shorten both"):
        compare(long, CLEAN, CORRUPT)
    from attn_explorer.models import load_model
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    bert = load_model(write_tiny_bert(tmp_path / "bert"))
    with pytest.raises(PairError, match="no next token") as caught:
        compare(bert, "the cat", "the dog")
    assert caught.value.kind == "encoder"
    with pytest.raises(PairError, match=r"^model: an encoder"):
        analyze(bert, "the cat", corrupt="the dog")
    with pytest.raises(PairError, match=r"^corrupt: the corrupted prompt is 12 tokens"):
        analyze(model, CLEAN, corrupt=CORRUPT + " the")
    with pytest.raises(PairError, match=r"^answer: compares two prompts"):
        analyze(model, CLEAN, answer=" the")


def test_equal_logit_differences_leave_nothing_to_normalise(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=2)
    model = load_gguf(path)
    for layer in range(2):  # no attention: each position sees only its own token
        kept = model.weights.layer(layer)
        silent = replace(kept, attn_output=np.zeros_like(kept.attn_output))
        model.weights._layers[layer] = silent  # the layer the forward reads from now on
    with pytest.raises(PairError, match="same logit difference") as caught:
        compare(model, CLEAN, CORRUPT)
    assert caught.value.kind == "equal"


def test_run_blocks_with_a_trace_changes_no_number(tiny):
    _, _, model, c = tiny
    x = c.clean_hidden[0]
    np.testing.assert_array_equal(run_blocks(model, x, 0), c.clean_hidden[-1])
    with pytest.raises(ValueError, match="trace"):
        run_blocks(model, np.stack([x, x]), 0, trace=c.clean_trace)


def analyze_command(*args):
    return subprocess.run(
        [sys.executable, "-m", "attn_explorer", "analyze", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_analyze_command_writes_the_two_prompt_fields(tiny, tmp_path):
    path, _, model, c = tiny
    out = tmp_path / "out.json"
    corrupt_file = tmp_path / "corrupt.txt"
    corrupt_file.write_text(CORRUPT, encoding="utf-8")
    done = analyze_command(
        "--model", str(path), "--text", CLEAN, "--corrupt-file", str(corrupt_file),
        "--json", str(out), "--no-ablation",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report)[-3:] == ["compare", "patching", "logit_attribution"]
    assert report["compare"] == {
        "input_ids_corrupt": c.corrupt_ids,
        "tokens_corrupt": c.corrupt_tokens,
        "answer_id": c.answer_id,
        "wrong_id": c.wrong_id,
        "logit_diff_clean": pytest.approx(c.logit_diff_clean),
        "logit_diff_corrupt": pytest.approx(c.logit_diff_corrupt),
    }
    assert set(report["patching"]) == {"heads", "residual"}
    np.testing.assert_allclose(report["patching"]["heads"], patch_heads(model, c), atol=1e-6)
    np.testing.assert_allclose(report["patching"]["residual"], patch_residual(model, c), atol=1e-6)
    a = logit_attribution(model, c)
    got = report["logit_attribution"]
    assert list(got) == ["embed", "attn", "mlp", "heads", "total"]
    assert got["embed"] == pytest.approx(a.embed) and got["total"] == pytest.approx(a.total)
    np.testing.assert_allclose(got["attn"], a.attn)
    np.testing.assert_allclose(got["mlp"], a.mlp)
    np.testing.assert_allclose(got["heads"], a.heads)


@pytest.mark.slow
def test_analyze_command_refuses_each_bad_pair_in_one_line_naming_the_flag(tiny, tmp_path):
    path, _, _, _ = tiny
    from attn_explorer.models.testing.tiny_bert import write_tiny_bert

    bert = write_tiny_bert(tmp_path / "bert")
    out = tmp_path / "out.json"
    base = ["--text", CLEAN, "--json", str(out), "--no-ablation"]
    cases = [
        (["--model", str(path), "--corrupt", CORRUPT + " the", *base], "--corrupt: the corrupted prompt is 12 tokens and the clean one 11"),  # noqa: E501
        (["--model", str(path), "--corrupt", CLEAN, *base], "--corrupt: the two prompts are the same tokens"),  # noqa: E501
        (["--model", str(path), "--corrupt", CORRUPT, "--answer", " the cat", *base], "--answer: ' the cat' is 2 tokens (' the', ' cat'); give one token"),  # noqa: E501
        (["--model", str(path), "--corrupt", CORRUPT, "--wrong", "", *base], "--wrong: '' is 0 tokens; give one token"),  # noqa: E501
        (["--model", str(path), "--answer", " the", *base], "--answer: compares two prompts; give --corrupt as well"),  # noqa: E501
        (["--model", str(path), "--corrupt", "", *base], "--corrupt: the text is empty"),
        (["--model", str(bert), "--corrupt", "the dog", "--text", "the cat", "--json", str(out)], "--model: an encoder such as BERT predicts no next token"),  # noqa: E501
    ]  # fmt: skip
    for argv, line in cases:
        done = analyze_command(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"attn-explorer analyze: error: {line}"), (
            lines
        )
        assert not out.exists()  # nothing written


@pytest.mark.slow
def test_the_patching_bench_runs_quick():
    """bench/patching.py --quick: ours and (when installed) TransformerLens on a tiny model,
    their maps equal."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "bench/patching.py", "--quick", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.index("{") :])
    assert result["tokens"] == 4 and result["cores"] >= 1 and result["ours_s"] > 0
    if result["transformer_lens"] is not None:
        assert result["transformer_lens"]["max_map_difference"] < 2e-2
        assert result["transformer_lens"]["ratio"] > 0
