"""A workspace lends attention() its arrays again only when nobody holds them."""

import gc
import threading

import numpy as np
import pytest

from attn_explorer.compute import STRATEGIES, Workspace, attention
from attn_explorer.compute.workspace import Workspace as WorkspaceClass


def _inputs(seed, shape=(2, 3, 5, 4), dtype=np.float32):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(3))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("causal", [False, True])
def test_same_numbers_with_and_without_a_workspace(strategy, causal):
    workspace = Workspace()
    for seed in range(3):  # the second and third calls reuse the first call's arrays
        q, k, v = _inputs(seed)
        plain = attention(q, k, v, strategy=strategy, causal=causal)
        lent = attention(q, k, v, strategy=strategy, causal=causal, workspace=workspace)
        for stage in ("scores", "scaled", "masked", "weights", "output"):
            np.testing.assert_array_equal(lent.stage(stage), plain.stage(stage))
            assert lent.stage(stage).dtype == np.float32
        del lent
    # The tiled strategy holds no grid, so it has no work arrays to borrow.
    assert workspace.reused >= 2 if strategy != "tiled" else workspace.reused == 0


def test_a_held_result_is_never_overwritten():
    workspace = Workspace()
    q, k, v = _inputs(0)
    first = attention(q, k, v, workspace=workspace)
    kept = first.weights.copy(), first.scores.copy(), first.output.copy()
    q2, k2, v2 = _inputs(1)
    second = attention(q2, k2, v2, workspace=workspace)  # first is still held
    assert not np.shares_memory(second.weights, first.weights)
    np.testing.assert_array_equal(first.weights, kept[0])
    np.testing.assert_array_equal(first.scores, kept[1])
    np.testing.assert_array_equal(first.output, kept[2])
    assert workspace.reused == 0
    del first
    gc.collect()
    third = attention(q, k, v, workspace=workspace)  # first's arrays are free again
    assert workspace.reused == 1
    np.testing.assert_array_equal(third.weights, kept[0])
    np.testing.assert_array_equal(second.weights, attention(q2, k2, v2).weights)


def test_a_view_or_one_array_held_keeps_the_set():
    workspace = Workspace(sets=1)
    q, k, v = _inputs(0)
    result = attention(q, k, v, workspace=workspace)
    head = result.weights[0, 1]  # a view, as a heatmap would keep
    expected = head.copy()
    del result
    q2, k2, v2 = _inputs(1)
    attention(q2, k2, v2, workspace=workspace)
    np.testing.assert_array_equal(head, expected)
    assert workspace.reused == 0


def test_another_shape_forgets_the_kept_arrays():
    workspace = Workspace()
    attention(*_inputs(0), workspace=workspace)
    assert workspace.nbytes > 0
    attention(*_inputs(0, shape=(1, 2, 7, 4)), workspace=workspace)
    assert workspace.nbytes == 2 * (2 * 7 * 7 * 4) + 2 * 7 * 4 * 4  # only the new shape
    workspace.clear()
    assert workspace.nbytes == 0


def test_threads_never_share_a_set():
    workspace = Workspace()
    q, k, v = _inputs(0, shape=(1, 4, 64, 8))
    expected = attention(q, k, v).weights
    failures = []

    def worker():
        for _ in range(50):
            result = attention(q, k, v, workspace=workspace)
            if not np.array_equal(result.weights, expected):
                failures.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_bad_sets_count():
    with pytest.raises(ValueError, match="sets"):
        WorkspaceClass(sets=0)
