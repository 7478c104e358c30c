"""RoPE's score depends on distance only: one head's pair rotated at every Δ (no Qt)."""

import numpy as np
import pytest

from attn_explorer.models import load_model
from attn_explorer.models.decoder.llama import DecoderModel
from attn_explorer.models.decoder.rope import (
    head_position_curve,
    rotate,
    score_by_distance,
    unrotate,
)
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

THETA = 100_000.0  # SmolLM2's base


@pytest.fixture
def pair():
    rng = np.random.default_rng(3)
    return rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)


@pytest.mark.parametrize("start", [1, 37, 1000, 5000])
def test_the_curve_is_the_same_at_every_absolute_position(pair, start):
    query, key = pair
    at_zero = score_by_distance(query, key, THETA, max_distance=256, start=0)
    elsewhere = score_by_distance(query, key, THETA, max_distance=256, start=start)
    assert at_zero.shape == (257,) and at_zero.dtype == np.float32
    # float32 rounding of cos/sin and the products, relative to |q|·|k|
    bound = 2e-5 * float(np.linalg.norm(query) * np.linalg.norm(key))
    np.testing.assert_allclose(elsewhere, at_zero, rtol=0, atol=bound)
    assert np.ptp(at_zero) > 1.0  # it does change with the distance


@pytest.mark.parametrize("start", [0, 123])
def test_at_distance_zero_it_is_the_plain_dot_product(pair, start):
    query, key = pair
    curve = score_by_distance(query, key, THETA, max_distance=4, start=start)
    assert curve[0] == pytest.approx(float(query @ key), abs=1e-4)


def test_unrotate_undoes_the_rotation(pair):
    query, _ = pair
    positions = np.array([0, 5, 900])
    vectors = np.stack([query] * 3)
    back = unrotate(rotate(vectors, positions, THETA), positions, THETA)
    np.testing.assert_allclose(back, vectors, atol=1e-5)


def test_a_tiny_decoder_heads_real_pair_sits_on_its_curve(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_model(path)
    assert isinstance(model, DecoderModel)
    result = model.attention("the cat sat on the mat")
    theta = model.config.rope_theta
    for layer, head in [(0, 0), (1, 3)]:
        curve = head_position_curve(result, layer, head, theta, max_distance=40)
        assert curve.query_index == len(result.tokens) - 1
        assert curve.key_index == int(np.argmax(result.weights[layer, head, -1]))
        assert curve.kv_head == result.kv_head(head)
        # the model's own score of the pair is the curve at their real distance
        assert curve.scores[curve.actual_distance] == pytest.approx(curve.actual_score, abs=1e-4)
        assert curve.scores[0] == pytest.approx(curve.unrotated, abs=1e-4)


def test_bert_has_no_rotation(tiny_model):
    result = tiny_model.attention("the cat")
    with pytest.raises(ValueError, match="no rotary positions"):
        head_position_curve(result, 0, 0, 10_000.0)
