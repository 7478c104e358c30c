"""The seed article's worked example and exercise, exactly, for every strategy."""

import numpy as np
import pytest

from attn_explorer.compute import STRATEGIES, attention_scores

Q = [[1, 0], [0, 1], [1, 1]]
S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_worked_example_exact(strategy, dtype):
    q = np.array(Q, dtype=dtype)
    scores = attention_scores(q, q, strategy)
    assert scores.dtype == dtype
    assert scores.tolist() == S


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_exercise_q2_k4(strategy):
    key = np.array([*Q, [2, 0]], dtype=np.float64)
    scores = attention_scores(np.array(Q, dtype=np.float64), key, strategy)
    assert scores.shape == (3, 4)
    assert scores[1, 3] == 0.0  # q2·k4 = 0·2 + 1·0
    assert scores[1, 1] == 1.0  # q2·k2 = 1
    assert scores[1, 3] < scores[1, 1]
