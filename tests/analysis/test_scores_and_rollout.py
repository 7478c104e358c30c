"""Head scores and rollout on hand-made attention weights, where the answer is known."""

import numpy as np
import pytest

from attn_explorer.analysis import head_scores, repeated_random_tokens, rollout
from attn_explorer.analysis.head_scores import duplicate_mask, induction_mask


def one_hot_rows(columns, t):
    """(T, T) weights: row i puts all its weight on key columns[i]."""
    w = np.zeros((t, t), dtype=np.float32)
    w[np.arange(t), columns] = 1
    return w


def test_a_previous_token_head_and_a_sink_head_score_one():
    t = 6
    previous = one_hot_rows([0, 0, 1, 2, 3, 4], t)
    sink = one_hot_rows([0] * t, t)
    weights = np.stack([previous, sink])[None]  # (1, 2, T, T)
    scores = head_scores(weights, np.arange(t))
    assert scores["previous_token"].tolist() == [[1.0, 1 / 5]]  # sink: only row 1 has j=0=i−1
    assert scores["first_token"].tolist() == [[2 / 6, 1.0]]  # previous: rows 0 and 1 on key 0
    # all ids differ: no duplicate, no induction row -> undefined
    assert np.isnan(scores["duplicate_token"]).all() and np.isnan(scores["induction"]).all()


def test_duplicate_and_induction_sets_on_a_repeated_sequence():
    ids = np.array([5, 7, 9, 5, 7, 9])
    dup, ind = duplicate_mask(ids), induction_mask(ids)
    assert [tuple(np.flatnonzero(row)) for row in dup] == [(), (), (), (0,), (1,), (2,)]
    assert [tuple(np.flatnonzero(row)) for row in ind] == [(), (), (), (1,), (2,), (3,)]
    # the token after the earlier copy: an induction head looks at i − 2 here
    induction = one_hot_rows([0, 0, 0, 1, 2, 3], 6)
    duplicate = one_hot_rows([0, 0, 0, 0, 1, 2], 6)
    scores = head_scores(np.stack([induction, duplicate])[None], ids)
    assert scores["induction"].tolist() == [[1.0, 0.0]]
    assert scores["duplicate_token"].tolist() == [[0.0, 1.0]]


def test_induction_needs_j_below_i_minus_one_and_sums_every_match():
    ids = np.array([3, 3, 3])
    # D_2 = {0, 1}; S_2 = {1} (j = 0 only: j = 1 is not < i − 1); S_1 is empty
    assert np.flatnonzero(induction_mask(ids)[2]).tolist() == [1]
    assert not induction_mask(ids)[1].any()
    w = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], dtype=np.float32)
    scores = head_scores(w[None, None], ids)
    assert scores["duplicate_token"][0, 0] == pytest.approx((0.5 + (0.2 + 0.3)) / 2)
    assert scores["induction"][0, 0] == pytest.approx(0.3, abs=1e-7)


def test_one_token_has_no_previous_token_score():
    scores = head_scores(np.ones((2, 3, 1, 1), dtype=np.float32), np.array([4]))
    assert np.isnan(scores["previous_token"]).all()
    assert (scores["first_token"] == 1).all()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="head_scores"):
        head_scores(np.ones((2, 2, 3, 3)), np.arange(4))
    with pytest.raises(ValueError, match="rollout"):
        rollout(np.ones((2, 3, 3)))


def test_rollout_of_identity_attention_is_identity_and_of_uniform_is_known():
    t = 4
    eye = np.broadcast_to(np.eye(t), (3, 2, t, t))
    np.testing.assert_array_equal(rollout(eye), np.eye(t))
    # one layer of uniform causal attention: ½ A + ½ I, rows renormalised (already sum to 1)
    causal = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    expected = 0.5 * causal + 0.5 * np.eye(t)
    np.testing.assert_allclose(rollout(causal[None, None]), expected)
    two = rollout(np.stack([causal[None], causal[None]]))
    np.testing.assert_allclose(two, expected @ expected)
    np.testing.assert_allclose(two.sum(axis=1), 1)


def test_repeated_random_tokens_are_seeded_and_repeat():
    a = repeated_random_tokens(1000, length=8, seed=3)
    b = repeated_random_tokens(1000, length=8, seed=3)
    c = repeated_random_tokens(1000, length=8, seed=4)
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()
    assert a.size == 16 and a[:8].tolist() == a[8:].tolist()
    assert a.min() >= 100 and a.max() < 1000
    with_bos = repeated_random_tokens(1000, length=8, seed=3, prefix=[1])
    assert with_bos.tolist() == [1, *a.tolist()]


def test_probe_text_is_a_repeated_sequence_of_single_token_words():
    from attn_explorer.analysis.head_scores import probe_text

    vocabulary = [" cat", " dog", " sun", " sky", "Ġx", " Big", " a1b", " moon", " tree", " two"]
    multi = {" two"}  # pretend " two" splits in two tokens: never chosen

    def encode(text):
        return [0, 1] if text in multi else [vocabulary.index(text)]

    text = probe_text(vocabulary, encode, length=4, seed=1)
    words = text.split()
    assert text.startswith(" ") and words[:4] == words[4:] and len(set(words)) == 4
    assert set(words) <= {"cat", "dog", "sun", "sky", "moon", "tree"}
    assert probe_text(vocabulary, encode, length=4, seed=1) == text
    with pytest.raises(ValueError, match="plain words"):
        probe_text(vocabulary, encode, length=8)
    with pytest.raises(ValueError, match="one token"):
        probe_text(vocabulary, encode, length=7)
    bert = probe_text(["[CLS]", "cat", "dog", "##s", "sun"], lambda w: [w], 2, 0, False)
    assert len(bert.split()) == 4 and bert.split()[:2] == bert.split()[2:]
