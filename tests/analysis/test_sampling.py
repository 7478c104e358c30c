"""Sampling on hand-made distributions, and in generation on a tiny GGUF decoder."""

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.decoder.sampling import (
    Sampler,
    Sampling,
    filtered_distribution,
    top_choices,
)
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

# probabilities 0.5, 0.25, 0.15, 0.1 for ids 2, 0, 3, 1
PROBS = np.array([0.25, 0.1, 0.5, 0.15])
LOGITS = np.log(PROBS)


def test_top_p_keeps_the_smallest_set_whose_probability_reaches_p():
    kept = {
        p: np.flatnonzero(filtered_distribution(LOGITS, Sampling(1.0, top_p=p))).tolist()
        for p in (0.4, 0.5, 0.6, 0.75, 0.76, 0.9, 0.91, 1.0)
    }
    assert kept == {
        0.4: [2],
        0.5: [2],  # 0.5 reaches 0.5 exactly: one token is enough
        0.6: [0, 2],
        0.75: [0, 2],
        0.76: [0, 2, 3],
        0.9: [0, 2, 3],
        0.91: [0, 1, 2, 3],
        1.0: [0, 1, 2, 3],
    }
    np.testing.assert_allclose(
        filtered_distribution(LOGITS, Sampling(1.0, top_p=0.6)), [1 / 3, 0, 2 / 3, 0]
    )


def test_temperature_and_top_k_reshape_the_distribution():
    np.testing.assert_allclose(filtered_distribution(LOGITS, Sampling(1.0)), PROBS)
    hot = filtered_distribution(LOGITS, Sampling(2.0))
    np.testing.assert_allclose(hot, np.sqrt(PROBS) / np.sqrt(PROBS).sum())
    np.testing.assert_allclose(
        filtered_distribution(LOGITS, Sampling(1.0, top_k=2)), [1 / 3, 0, 2 / 3, 0]
    )
    # top-k, then top-p over what top-k kept (renormalised): 2/3 ≥ 0.6 keeps id 2 alone
    assert np.flatnonzero(filtered_distribution(LOGITS, Sampling(1.0, 2, 0.6))).tolist() == [2]


def test_temperature_zero_and_top_k_one_are_the_argmax():
    for sampling in (Sampling(0.0), Sampling(1.5, top_k=1), Sampling(0.0, seed=5)):
        assert sampling.greedy
        assert filtered_distribution(LOGITS, sampling).tolist() == [0, 0, 1, 0]
        assert all(Sampler(sampling).choose(LOGITS) == 2 for _ in range(20))
    # a very low temperature samples the argmax too
    assert {Sampler(Sampling(1e-4, seed=s)).choose(LOGITS) for s in range(20)} == {2}


def test_sampled_frequencies_follow_the_filtered_distribution():
    sampler = Sampler(Sampling(1.0, top_p=0.9, seed=0))
    counts = np.bincount([sampler.choose(LOGITS) for _ in range(4000)], minlength=4)
    expected = np.array([0.25, 0, 0.5, 0.15]) / 0.9
    np.testing.assert_allclose(counts / 4000, expected, atol=0.03)
    assert counts[1] == 0  # outside the nucleus: never drawn


@pytest.mark.parametrize(
    "bad",
    [
        dict(temperature=-1),
        dict(temperature=float("nan")),
        dict(top_k=-1),
        dict(top_k=1.5),
        dict(top_p=0),
        dict(top_p=1.5),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Sampling(**bad)


def test_top_choices_are_the_softmax_in_descending_order():
    choices = top_choices(LOGITS, 3)
    assert [i for i, _ in choices] == [2, 0, 3]
    np.testing.assert_allclose([p for _, p in choices], [0.5, 0.25, 0.15])


@pytest.fixture
def tiny_decoder(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    return load_gguf(path)


def test_generation_greedy_by_default_and_seeded_sampling_reproduces(tiny_decoder, monkeypatch):
    model = tiny_decoder
    monkeypatch.setattr(model, "end_ids", frozenset())  # always the full length
    greedy = model.generate(" the cat", max_new_tokens=8)
    assert model.generate(" the cat", 8, sampling=Sampling(0.0, seed=1)).token_ids == (
        greedy.token_ids
    )
    assert model.generate(" the cat", 8, sampling=Sampling(3.0, top_k=1)).token_ids == (
        greedy.token_ids
    )
    hot = Sampling(temperature=5.0, seed=7)
    first, again = (
        model.generate(" the cat", 8, sampling=hot),
        model.generate(" the cat", 8, sampling=hot),
    )
    assert first.token_ids == again.token_ids and first.text == again.text
    others = {
        tuple(model.generate(" the cat", 8, sampling=Sampling(5.0, seed=s)).token_ids)
        for s in range(5)
    }
    assert len(others) > 1  # a random vocabulary at temperature 5: the seeds differ
    # each step's choices are the model's own distribution, the greedy token first
    assert len(greedy.choices) == 8
    assert [c[0][0] for c in greedy.choices] == greedy.token_ids
    assert all(len(c) == 10 and c[0][1] >= c[-1][1] for c in greedy.choices)
