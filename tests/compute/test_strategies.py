"""All three score strategies agree with each other and with a float64 reference."""

import inspect

import numpy as np
import pytest
from compute_reference import qkv, reference_scores, score_error_bound
from hypothesis import given, settings

from attn_explorer.compute import STRATEGIES, attention_scores, strategy_source
from attn_explorer.compute.strategies import STRATEGY_FUNCTIONS, scores_loop


@settings(max_examples=150, deadline=None)
@given(qkv())
def test_strategies_agree_with_float64_reference(inputs):
    query, key, _ = inputs
    reference = reference_scores(query, key)
    bound = score_error_bound(query, key, query.dtype)
    results = {}
    for strategy in STRATEGIES:
        scores = attention_scores(query, key, strategy)
        assert scores.dtype == query.dtype, strategy
        assert scores.shape == (*query.shape[:-1], key.shape[-2]), strategy
        error = np.abs(scores.astype(np.float64) - reference)
        assert (error <= bound).all(), (strategy, error.max(), bound.max())
        results[strategy] = scores
    # pairwise: any two strategies differ by at most two rounding-error bounds
    for a in STRATEGIES:
        for b in STRATEGIES:
            diff = np.abs(results[a].astype(np.float64) - results[b].astype(np.float64))
            assert (diff <= 2 * bound).all(), (a, b)


def test_reference_check_can_fail():
    """The agreement test notices a transposed result (it is not a tautology)."""
    rng = np.random.default_rng(1)
    query, key = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    wrong = np.swapaxes(attention_scores(query, key), -1, -2)
    assert not np.allclose(wrong, reference_scores(query, key))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_float64_integers_are_exact(strategy):
    rng = np.random.default_rng(2)
    query = rng.integers(-50, 50, (2, 3, 5, 4)).astype(np.float64)
    key = rng.integers(-50, 50, (2, 3, 6, 4)).astype(np.float64)
    np.testing.assert_array_equal(
        attention_scores(query, key, strategy), reference_scores(query, key)
    )


def test_integer_and_list_input_become_float64():
    scores = attention_scores([[1, 2]], [[3, 4], [5, 6]], "loop")
    assert scores.dtype == np.float64
    assert scores.tolist() == [[11.0, 17.0]]


def test_mixed_dtypes_compute_in_float64():
    query = np.ones((2, 3), np.float32)
    key = np.ones((4, 3), np.float64)
    assert attention_scores(query, key).dtype == np.float64


def test_loop_really_loops_over_python_floats():
    """The loop body must not call numpy: its marked source has no ``np.`` at all."""
    source = strategy_source("loop")
    assert "np." not in source
    for keyword in ("for b in range(B)", "for h in range(H)", "for i in range", "for j in range"):
        assert keyword in source
    assert "total += Q[i][d] * K[j][d]" in source


def test_batched_has_no_python_loop():
    assert "for " not in strategy_source("batched")
    assert "np.matmul" in strategy_source("batched")


def test_matmul_loops_over_heads_only():
    source = strategy_source("matmul")
    assert "for b in range(B)" in source and "for h in range(H)" in source
    assert "for i" not in source


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_source_is_the_running_code(strategy):
    """The text between the markers is a slice of the function that runs."""
    from attn_explorer.compute.tiled import attention_tiled  # tiled shows its attention

    function = attention_tiled if strategy == "tiled" else STRATEGY_FUNCTIONS[strategy]
    body = inspect.getsource(function)
    for line in strategy_source(strategy).splitlines():
        assert line.strip() in body


def test_loop_strategy_source_executes_as_shown():
    """Running the displayed loop text on nested lists gives the scores (what you read runs)."""
    query = [[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]]
    key = [[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]]]
    scores = [[[[0.0] * 4 for _ in range(3)]]]
    names = {"B": 1, "H": 1, "T_q": 3, "T_k": 4, "d_head": 2}
    exec(strategy_source("loop"), {**names, "Q_all": query, "K_all": key, "S_all": scores})
    assert scores[0][0] == [[1, 0, 1, 2], [0, 1, 1, 0], [1, 1, 2, 2]]
    direct = scores_loop(np.array(query), np.array(key))
    assert direct[0, 0].tolist() == scores[0][0]


def test_stage_source_is_the_running_code_and_computes_the_stage():
    """The lines shown for each later stage are lines of pipeline.py, and the scaled and
    masked ones, run on the worked example's scores, give that stage."""
    import attn_explorer.compute.pipeline as pipeline
    from attn_explorer.compute import STAGES, attention, stage_source

    body = inspect.getsource(pipeline)
    assert stage_source("scores") == ""
    for stage in STAGES[1:]:
        shown = stage_source(stage)
        assert shown, stage
        for line in shown.splitlines():
            assert line.strip() in body
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])
    result = attention(q, q, causal=True)
    names: dict = {"np": np, "self": result}
    exec(stage_source("scaled"), names)
    np.testing.assert_array_equal(names["scaled"], result.scaled)
    exec(stage_source("masked"), names)
    np.testing.assert_array_equal(names["masked"], result.masked)
    assert "softmax_rows(scores" in stage_source("weights")
    assert "np.matmul(weights, v, out=" in stage_source("output")
    with pytest.raises(ValueError, match="unknown stage"):
        stage_source("logits")
