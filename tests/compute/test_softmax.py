"""The blocked, threaded softmax: every way of cutting the rows gives the reference."""

import numpy as np
import pytest
from compute_reference import reference_softmax

from attn_explorer.compute import softmax as softmax_module
from attn_explorer.compute import softmax_rows


@pytest.fixture(params=["one-block", "row-blocks", "head-blocks"])
def blocking(request, monkeypatch):
    """Force each blocking regime, with threads, on small arrays."""
    monkeypatch.setattr(softmax_module, "THREADED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(softmax_module, "WORKERS", 2)
    sizes = {"one-block": 1 << 30, "row-blocks": 2 * 7 * 4, "head-blocks": 2 * 5 * 7 * 8}
    monkeypatch.setattr(softmax_module, "BLOCK_BYTES", sizes[request.param])
    return request.param


MASKS = {
    "none": None,
    "grid": lambda shape, rng: rng.random(shape[-2:]) > 0.4,
    "full": lambda shape, rng: rng.random(shape) > 0.5,
    "per-key": lambda shape, rng: rng.random((shape[0], 1, 1, shape[-1])) > 0.3,
    "per-head": lambda shape, rng: rng.random((1, shape[1], shape[2], 1)) > 0.3,
}


@pytest.mark.parametrize("mask_kind", list(MASKS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_softmax_matches_reference(blocking, mask_kind, dtype):
    rng = np.random.default_rng(7)
    shape = (2, 3, 5, 7)  # (B, H, T_q, T_k)
    x = (rng.standard_normal(shape) * 30).astype(dtype)
    make = MASKS[mask_kind]
    keep = None if make is None else make(shape, rng)
    weights, fully = softmax_rows(x, factor=0.5, keep=keep)
    expected, expected_fully = reference_softmax(x.astype(np.float64) * 0.5, keep)
    assert weights.dtype == dtype and weights.shape == shape
    np.testing.assert_allclose(weights, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(fully, expected_fully)
    assert fully.shape == shape[:-1]
    assert not np.isnan(weights).any()


def test_blocks_cover_every_row_once():
    for heads, t_q, t_k in [(1, 1, 1), (3, 5, 7), (16, 64, 64), (2, 100, 3000), (5, 2, 2)]:
        covered = np.zeros((heads, t_q), dtype=int)
        for h0, h1, r0, r1 in softmax_module._blocks(heads, t_q, t_k, 4):
            assert h0 < h1 and r0 < r1
            covered[h0:h1, r0:r1] += 1
        assert (covered == 1).all(), (heads, t_q, t_k)


def test_in_place_and_out_argument():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    expected, _ = reference_softmax(x, None)
    out = np.empty_like(x)
    weights, _ = softmax_rows(x, out=out)
    assert weights is out
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    softmax_rows(x, out=x)  # in place is allowed
    np.testing.assert_allclose(x, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="out"):
        softmax_rows(x, out=np.empty((3, 4), np.float64))


def test_one_row_and_huge_factor():
    weights, fully = softmax_rows(np.array([1.0, 2.0, 3.0]), factor=1e300)
    assert weights.tolist() == [0.0, 0.0, 1.0]
    assert fully.shape == () and not fully


def test_real_threads_on_a_big_input():
    """Big enough that the default settings use the thread pool."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 256, 512)).astype(np.float32)
    assert x.size >= softmax_module.THREADED_MIN_ELEMENTS
    keep = rng.random((256, 512)) > 0.2
    keep[17] = False
    weights, fully = softmax_rows(x, factor=0.3, keep=keep)
    assert fully[:, 17].all() and fully.sum() == 8
    rows = weights.reshape(-1, 512)
    row_sums = rows.sum(axis=1).reshape(8, 256)
    np.testing.assert_allclose(row_sums[~fully], 1.0, rtol=1e-5)
    expected, _ = reference_softmax(x[1:2].astype(np.float64) * 0.3, keep)
    np.testing.assert_allclose(weights[1:2], expected, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0.0, -10.0, -19.0, -25.0, -100.0, -1000.0, -1e6])
def test_rows_far_below_the_block_max_stay_exact(dtype, offset):
    """One block, rows whose maxima differ widely: each row is still its own softmax."""
    row = np.array([0.0, 1.0, 2.0, -30.0, -60.0], dtype=dtype)
    x = np.stack([row, row + dtype(offset), row + dtype(offset / 2)])
    weights, fully = softmax_rows(x)
    in_place, _ = softmax_rows(x, out=x)  # the rows set aside must be copied first
    np.testing.assert_array_equal(in_place, weights)
    expected, _ = reference_softmax(row[None, :].astype(np.float64), None)
    # float32 computes e^d as 2^(d·log2 e): a weight e^d off its row max carries ~|d|·eps
    tol = 5e-6 if dtype == np.float32 else 1e-14
    for r in range(3):
        np.testing.assert_allclose(weights[r], expected[0], rtol=tol, atol=0)
    assert not fully.any()


def test_mixed_dead_and_far_rows_in_one_block():
    x = np.array([[5.0, 4.0], [-500.0, -501.0], [7.0, 8.0]], dtype=np.float32)
    keep = np.array([[True, True], [True, True], [False, False]])
    weights, fully = softmax_rows(x, keep=keep)
    assert fully.tolist() == [False, False, True]
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-6)
    assert weights[2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("far_value", [None, -100.0, -1000.0, -np.inf])
def test_exp2_and_exp_paths_give_the_reference(far_value):
    """A block whose shifted values stay above 2^-126 takes exp2; one with a tiny, zero or
    hidden entry takes exp (exp2 is very slow there). Both give the textbook weights."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    if far_value is not None:
        x[2, 3] = far_value  # one entry far below the block max
    weights, fully = softmax_rows(x, factor=0.7)
    expected, _ = reference_softmax(x.astype(np.float64) * 0.7, None)
    np.testing.assert_allclose(weights, expected, rtol=2e-6, atol=1e-30)
    assert weights.dtype == np.float32 and not fully.any()
    if far_value is not None:
        assert weights[2, 3] < 1e-20


@pytest.mark.parametrize("top", [-20.0, 10.0, 63.0, 65.0, 127.0, 200.0, 1000.0])
def test_a_block_is_shifted_only_where_its_exponentials_could_overflow(top):
    """float32 blocks whose scaled scores (base 2) all lie in [−126, NO_SHIFT_MAX] skip the
    shift; above it (2^200 overflows float32) they are shifted. Either way: the reference."""
    rng = np.random.default_rng(12)
    x = rng.uniform(-8.0, 0.0, size=(3, 5, 9)).astype(np.float32)
    x += np.float32(top / np.log2(np.e))  # the block's largest scaled value lies near top
    weights, fully = softmax_rows(x)
    expected, _ = reference_softmax(x.astype(np.float64), None)
    # float32 scales each score before any shift: y = x·log2 e rounds by |y|·2^-24, so a
    # weight carries ~|top|·6e-8 of relative error whichever path it takes.
    tol = 2e-6 + abs(top) * 1.2e-7
    np.testing.assert_allclose(weights, expected, rtol=tol, atol=1e-30)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=2e-6)
    assert not fully.any()


@pytest.mark.parametrize("hidden_value", [np.inf, np.nan, 1e30])
def test_a_non_finite_or_overflowing_entry_under_a_hidden_key_is_ignored(hidden_value):
    """Hidden keys do not count, whatever they hold: +inf (or x · factor overflowing to
    +inf) under the causal mask must not turn the visible entries into NaN."""
    x = np.array([[1.0, hidden_value, 3.0], [0.5, 2.0, hidden_value]], dtype=np.float32)
    keep = np.array([[True, False, True], [True, True, False]])
    weights, fully = softmax_rows(x, factor=1e10 if hidden_value == 1e30 else 0.5, keep=keep)
    factor = 1e10 if hidden_value == 1e30 else 0.5
    clean = np.where(keep, x, 0).astype(np.float64) * factor
    expected, _ = reference_softmax(clean, keep)
    np.testing.assert_allclose(weights, expected, rtol=2e-6, atol=1e-30)
    assert weights[0, 1] == 0 and weights[1, 2] == 0 and not fully.any()
