"""Every preset loads into a session and shows what its description promises."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.state import MATRICES, PRESETS, Preset, Session, preset
from attn_explorer.state.presets import PRESET_TEXT, random_preset, random_title
from attn_explorer.state.results.results import Results


def loaded(name: str) -> Session:
    """A fresh session with preset ``name`` loaded the way the menu does it."""
    p = preset(name)
    session = Session()
    assert session.load(p.snapshot, p.options, text=f"load {p.title}")
    return session


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_loads_with_consistent_shapes(name):
    p = preset(name)
    assert isinstance(p, Preset)
    assert p.name == name
    assert p.title and p.description
    b, h, t, d = p.snapshot.shape
    for matrix in MATRICES:
        array = getattr(p.snapshot, matrix)
        assert array.shape == (b, h, t, d)
        assert array.dtype == np.float64
        assert np.isfinite(array).all()
    assert len(p.snapshot.tokens) == t
    assert all(isinstance(token, str) and token for token in p.snapshot.tokens)
    assert Session.check_size(b, h, t, d) == ""
    p.options.validate(b, h)

    messages: list[str] = []
    session = Session()
    session.events.message.connect(lambda text, level: messages.append(text))
    assert session.load(p.snapshot, p.options)
    assert messages == []
    assert session.shape == (b, h, t, d)
    assert session.tokens == list(p.snapshot.tokens)
    assert session.options == p.options
    result = Results(session).compute_now()
    assert result.scores.shape == (b, h, t, t)
    assert np.isfinite(result.weights).all()
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert session.undo()
    assert session.shape == (1, 1, 3, 2)


@pytest.mark.parametrize("name", list(PRESETS))
def test_menu_texts_are_the_presets_own(name):
    # The menus are made from PRESET_TEXT at start-up, without making any preset's numbers.
    p = preset(name)
    assert PRESET_TEXT[name] == (p.title, p.description)
    assert set(PRESET_TEXT) == set(PRESETS)


def test_random_title_names_the_arguments():
    assert random_preset(2, 3, 5, 6, seed=9).title == random_title(2, 3, 5, 6, seed=9)


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_are_fresh_objects(name):
    first = preset(name)
    first.snapshot.query[...] = 123.0
    assert not (preset(name).snapshot.query == 123.0).all()


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match="unknown 'nope'; choose one of worked, exercise"):
        preset("nope")


def test_worked_example_scores_are_the_articles_s():
    session = loaded("worked")
    assert session.head_matrix("query").tolist() == [[1, 0], [0, 1], [1, 1]]
    assert Results(session).compute_now().scores[0, 0].tolist() == [[1, 0, 1], [0, 1, 1], [1, 1, 2]]


def test_exercise_adds_k4_and_q2_prefers_k2():
    session = loaded("exercise")
    key = session.head_matrix("key")
    query = session.head_matrix("query")
    assert key[3].tolist() == [2.0, 0.0]
    assert key[:3].tolist() == [[1, 0], [0, 1], [1, 1]]
    assert query[:3].tolist() == [[1, 0], [0, 1], [1, 1]]
    scores = Results(session).compute_now().scores[0, 0]
    assert scores[1, 3] == 0.0  # q2·k4 = 0·2 + 1·0
    assert scores[1, 1] == 1.0  # q2·k2
    assert scores[1, 3] < scores[1, 1]
    assert scores[0, 3] == 2.0  # q1·k4: k4 is q1's best key
    assert session.options.predict
    assert session.options.strategy == "loop"


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_random_preset_is_reproducible_by_seed(seed):
    first, again = random_preset(seed=seed), random_preset(seed=seed)
    for matrix in MATRICES:
        np.testing.assert_array_equal(
            getattr(first.snapshot, matrix), getattr(again.snapshot, matrix)
        )
    other = random_preset(seed=seed + 1)
    assert not np.array_equal(first.snapshot.query, other.snapshot.query)
    assert first.options.seed == seed
    assert f"seed {seed}" in first.title


def test_random_preset_draws_q_k_v_independently_and_rounds():
    p = random_preset(batch=2, heads=3, tokens=5, dim=2, seed=9)
    assert p.snapshot.shape == (2, 3, 5, 2)
    assert p.snapshot.tokens == ("t1", "t2", "t3", "t4", "t5")
    assert not np.array_equal(p.snapshot.query, p.snapshot.key)
    assert not np.array_equal(p.snapshot.key, p.snapshot.value)
    np.testing.assert_array_equal(np.round(p.snapshot.query, 2), p.snapshot.query)


def test_random_preset_switches_big_runs_to_float32():
    assert random_preset().options.dtype == "float64"
    assert random_preset(batch=1, heads=64, tokens=128, dim=1).options.dtype == "float32"


def test_identity_scores_are_the_identity():
    session = loaded("identity")
    np.testing.assert_array_equal(Results(session).compute_now().scores[0, 0], np.eye(4))


def test_duplicates_preset_ties_the_weights():
    session = loaded("duplicates")
    assert session.tokens[0] == session.tokens[1]
    key = session.head_matrix("key")
    np.testing.assert_array_equal(key[0], key[1])
    weights = Results(session).compute_now().weights[0, 0]
    np.testing.assert_array_equal(weights[:, 0], weights[:, 1])  # exactly tied
    assert (weights[:, 0] > 0).all()
    assert session.options.stage == "weights"


def test_large_norms_saturate_softmax_in_every_row():
    session = loaded("large-norms")
    norms = np.linalg.norm(session.head_matrix("query"), axis=1)
    assert (norms > 9).all()
    weights = Results(session).compute_now().weights[0, 0]
    assert (weights.max(axis=-1) > 0.99).all()
    # one key per row, not a tie split between two
    assert (np.sort(weights, axis=-1)[:, -2] < 0.01).all()


def test_large_norms_saturation_comes_from_the_norms():
    session = loaded("large-norms")
    session.set_block("query", 0, 0, session.head_matrix("query") / 10)
    session.set_block("key", 0, 0, session.head_matrix("key") / 10)
    assert (Results(session).compute_now().weights.max(axis=-1) < 0.99).any()


def test_causal_preset_hides_later_keys():
    session = loaded("causal")
    assert session.options.causal
    weights = Results(session).compute_now().weights  # (1, 2, 6, 6)
    above = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert (weights[..., above] == 0).all()
    assert (weights[..., ~above] > 0).all()
    assert weights[0, :, 0, 0].tolist() == [1.0, 1.0]  # the first token sees only itself


def test_causal_preset_without_the_mask_sees_later_keys():
    session = loaded("causal")
    session.set_option("causal", False)
    weights = Results(session).compute_now().weights
    above = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert (weights[..., above] > 0).all()
