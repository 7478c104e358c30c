"""The tiled (online-softmax) strategy: exact against batched and a float64 reference,
with every option (scale, causal, mask, grouped-query K/V), and no T × T array held."""

import tracemalloc

import numpy as np
import pytest
from compute_reference import reference_causal_keep, reference_scores, reference_softmax, values
from hypothesis import given, settings
from hypothesis import strategies as st

import attn_explorer.compute.tiled as tiled
from attn_explorer.compute import attention, strategy_source
from attn_explorer.compute.tiled import TiledResult, attention_tiled


@st.composite
def grouped_inputs(draw):
    """(query, key, value, causal, mask, block, window): K/V may have fewer heads than Q (GQA);
    a sliding window (narrower or wider than a block) only with causal."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    kv_heads = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    lead_kind = draw(st.sampled_from(["none", "heads", "batch"]))
    t_q, t_k = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    d, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    if lead_kind == "none":
        q_lead, kv_lead = (), ()
    elif lead_kind == "heads":
        q_lead, kv_lead = (kv_heads * group,), (kv_heads,)
    else:
        batch = draw(st.integers(1, 2))
        q_lead, kv_lead = (batch, kv_heads * group), (batch, kv_heads)
    query = draw(values(dtype, (*q_lead, t_q, d), 3.0))
    key = draw(values(dtype, (*kv_lead, t_k, d), 3.0))
    value = draw(values(dtype, (*kv_lead, t_k, d_v), 10.0))
    causal = draw(st.booleans())
    mask_kind = draw(st.sampled_from(["none", "none", "grid", "per-key"]))
    if mask_kind == "grid":
        mask = np.asarray(draw(st.lists(st.booleans(), min_size=t_q * t_k, max_size=t_q * t_k)))
        mask = mask.reshape(t_q, t_k)
    elif mask_kind == "per-key":
        mask = np.asarray(draw(st.lists(st.booleans(), min_size=t_k, max_size=t_k)))
    else:
        mask = None
    block = draw(st.sampled_from([1, 2, 3, 5, 8, 16, 64]))
    window = draw(st.none() | st.integers(1, t_k + 1)) if causal else None
    return query, key, value, causal, mask, block, window


def repeat_heads(array, query):
    """K or V with each key head repeated for the query heads that read it."""
    if array.ndim == 2 or array.shape[-3] == query.shape[-3]:
        return array
    return np.repeat(array, query.shape[-3] // array.shape[-3], axis=-3)


def reference_keep(query, key, causal, mask, window=None):
    keep = np.ones((*query.shape[:-1], key.shape[-2]), dtype=bool)
    if causal:
        keep &= reference_causal_keep(query.shape[-2], key.shape[-2], window)
    if mask is not None:
        keep &= mask
    return keep


@settings(max_examples=150, deadline=None)
@given(grouped_inputs())
def test_tiled_equals_batched_and_the_reference(inputs):
    query, key, value, causal, mask, block, window = inputs
    result = attention(
        query, key, value, strategy="tiled", causal=causal, mask=mask, block=block, window=window
    )
    assert isinstance(result, TiledResult)
    key_full, value_full = repeat_heads(key, query), repeat_heads(value, query)
    batched = attention(query, key_full, value_full, causal=causal, mask=mask, window=window)
    dtype = query.dtype
    assert result.output.dtype == dtype and result.output.shape == batched.output.shape
    # Weights: max |Δ| ≤ 1e-5 of the largest weight in float32 (1e-12 in float64).
    tol = 1e-5 if dtype == np.float32 else 1e-12
    largest = max(float(np.abs(batched.weights).max()), np.finfo(dtype).tiny)
    assert np.abs(result.weights - batched.weights).max() <= tol * largest
    # The output is a weighted mean of the values: the same bound times the largest |v|.
    v_max = max(float(np.abs(value).max()), 1.0)
    assert np.abs(result.output - batched.output).max() <= tol * largest * v_max * 4
    np.testing.assert_array_equal(result.fully_masked_rows, batched.fully_masked_rows)
    # Against the float64 reference: the output, and each row's max and normaliser.
    factor = 1.0 / np.sqrt(query.shape[-1])
    keep = reference_keep(query, key_full, causal, mask, window)
    if result.keep is not None:
        np.testing.assert_array_equal(np.broadcast_to(result.keep, keep.shape), keep)
    scaled = reference_scores(query, key_full) * factor
    weights, fully = reference_softmax(scaled, keep)
    output = weights @ value_full.astype(np.float64)
    loose = 2e-5 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(result.output, output, rtol=loose, atol=loose * v_max * 4)
    hidden = np.where(keep, scaled, -np.inf)
    row_max = hidden.max(axis=-1)
    np.testing.assert_allclose(result.row_max[~fully], row_max[~fully], rtol=loose, atol=loose)
    assert np.isneginf(result.row_max[fully]).all() and (result.row_sum[fully] == 0).all()
    with np.errstate(invalid="ignore"):
        row_sum = np.exp(hidden - row_max[..., None]).sum(axis=-1)
    np.testing.assert_allclose(result.row_sum[~fully], row_sum[~fully], rtol=loose * 10)


def test_agreement_check_can_fail():
    """A tiled run with the rescale left out is caught by the comparison above."""
    rng = np.random.default_rng(3)
    query, key, value = (rng.standard_normal((2, 20, 4)) for _ in range(3))
    good, _, _ = attention_tiled(query[None], key[None], value[None], 0.5, block=20)
    split, _, _ = attention_tiled(query[None], key[None], value[None], 0.5, block=5)
    np.testing.assert_allclose(good, split, rtol=1e-12)
    wrong = attention(query, key, value, strategy="batched", scale=0.25).output
    assert not np.allclose(split[0], wrong)


def test_scale_options_and_float32_stays_float32():
    rng = np.random.default_rng(4)
    query, key, value = (rng.standard_normal((3, 9, 4)).astype(np.float32) for _ in range(3))
    for scale in (True, False, 0.3):
        tiled_result = attention(query, key, value, strategy="tiled", scale=scale, block=4)
        batched = attention(query, key, value, scale=scale)
        assert tiled_result.scale == batched.scale
        assert tiled_result.output.dtype == np.float32
        np.testing.assert_allclose(tiled_result.output, batched.output, rtol=1e-5, atol=1e-6)


def test_causal_rows_never_read_later_keys():
    """Changing a key after query i leaves row i's output unchanged (causal, tiled)."""
    rng = np.random.default_rng(5)
    query, key, value = (rng.standard_normal((12, 3)) for _ in range(3))
    before = attention(query, key, value, strategy="tiled", causal=True, block=4).output
    key[7:] += 100.0
    value[7:] -= 50.0
    after = attention(query, key, value, strategy="tiled", causal=True, block=4).output
    np.testing.assert_array_equal(before[:7], after[:7])
    assert not np.allclose(before[7:], after[7:])


def test_fully_masked_rows_are_zero_never_nan():
    query = np.ones((3, 2))
    mask = np.array([[True, False], [False, False], [False, True]])
    result = attention(query, query[:2], np.ones((2, 2)), strategy="tiled", mask=mask, block=1)
    assert result.fully_masked_rows.tolist() == [False, True, False]
    assert (result.output[1] == 0).all() and np.isfinite(result.output).all()
    assert (result.weights[1] == 0).all()


def test_no_grid_is_held():
    """At H4 T1024 d16 the grid is 16 MB; the tiled call's peak allocation stays far below."""
    rng = np.random.default_rng(6)
    query, key, value = (rng.standard_normal((4, 1024, 16)).astype(np.float32) for _ in range(3))
    grid_bytes = 4 * 1024 * 1024 * 4
    # The process's first threaded call starts the shared pool's threads, whose first
    # allocations (~0.3–0.5 MB, traced as the call's) are the process's, not the call's.
    attention(query, key, value, strategy="tiled", causal=True, block=64)
    tracemalloc.start()
    try:
        result = attention(query, key, value, strategy="tiled", causal=True, block=64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.nbytes_held < grid_bytes / 50
    assert peak < grid_bytes / 10, peak
    tracemalloc.start()
    try:
        attention(query, key, value, causal=True)  # the batched strategy does hold it
        _, batched_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batched_peak > grid_bytes


def test_grid_stages_are_derived_only_when_small_enough(monkeypatch):
    rng = np.random.default_rng(7)
    query, key, value = (rng.standard_normal((2, 6, 3)) for _ in range(3))
    result = attention(query, key, value, strategy="tiled")
    assert result.stages_shown and result.stage("weights").shape == (2, 6, 6)
    monkeypatch.setattr(tiled, "SHOW_CELLS", 71)  # the grid holds 72 cells
    big = attention(query, key, value, strategy="tiled")
    assert not big.stages_shown
    with pytest.raises(ValueError, match="never builds the 72-cell grid"):
        big.stage("scores")
    with pytest.raises(ValueError, match="too big"):
        _ = big.weights
    assert big.output.shape == (2, 6, 3)  # the output is there all the same


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block": 0}, "block: expected a whole number"),
        ({"block": 2.5}, "block: expected a whole number"),
        ({"block": True}, "block: expected a whole number"),
        ({"causal": "yes"}, "causal: expected True or False"),
        ({"scale": float("nan")}, "scale: expected True"),
    ],
)
def test_bad_options_are_refused(kwargs, message):
    query = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match=message):
        attention(query, query, query, strategy="tiled", **kwargs)


def test_bad_shapes_are_refused_with_a_message():
    query = np.ones((4, 3, 2))
    with pytest.raises(ValueError, match="divides the query's"):
        attention(query, np.ones((3, 3, 2)), np.ones((3, 3, 2)), strategy="tiled")
    with pytest.raises(ValueError, match="needs a value"):
        attention(query, query, None, strategy="tiled")
    with pytest.raises(ValueError, match="vector size d"):
        attention(query, np.ones((2, 3, 5)), np.ones((2, 3, 5)), strategy="tiled")
    with pytest.raises(ValueError, match="value: shape"):
        attention(query, query[:2], np.ones((2, 4, 2)), strategy="tiled")


def test_overflowing_scale_gives_a_message_not_nan():
    query = np.full((2, 3), 1e15)
    with pytest.raises(ValueError, match="not finite"):
        attention(query, query, query, strategy="tiled", scale=1e300)


def test_source_shown_is_the_online_softmax():
    source = strategy_source("tiled")
    for line in (
        "m_new = np.maximum(m, s.max(axis=-1))",
        "rescale = np.exp(m - shift)",
        "norm = rescale * norm + p.sum(axis=-1)",
        "acc += p @ V[..., j0:j1, :]",
    ):
        assert line in source
    import inspect

    body = inspect.getsource(attention_tiled)
    for line in source.splitlines():
        assert line.strip() in body


def test_sliding_window_skips_the_key_blocks_left_of_the_band():
    """T 16, block 4, window 4: query block b reads key blocks b-1 and b only, and a key
    older than the window never changes a row's output."""
    from attn_explorer.compute.tiled import first_key_block

    assert [first_key_block(i0, 0, 4, 4) for i0 in (0, 4, 8, 12)] == [0, 0, 4, 8]
    assert first_key_block(8, 0, None, 4) == 0
    rng = np.random.default_rng(5)
    query, key, value = (rng.standard_normal((16, 3)) for _ in range(3))
    before = attention(query, key, value, strategy="tiled", causal=True, block=4, window=4)
    key[2] += 100.0  # visible only to queries 2..5
    value[2] += 100.0
    after = attention(query, key, value, strategy="tiled", causal=True, block=4, window=4)
    np.testing.assert_array_equal(after.output[6:], before.output[6:])
    assert not np.allclose(after.output[2:6], before.output[2:6])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rise", [5.0, 30.0, 100.0])
def test_a_max_rising_block_after_block_keeps_the_numbers_exact(rise, causal):
    """Scaled scores that climb by ``rise`` per key block (float32, block 8): at 5 the
    shift m lags the max within SHIFT_LAG and the sums go on unrescaled (row_sum must
    then be brought to the true max); at 30 and 100 m must move, or e^score overflows
    float32 (e^100) and the old sums must shrink. Output, row max and normaliser match
    the float64 reference either way."""
    rng = np.random.default_rng(8)
    t, block, d = 64, 8, 4
    query = np.ones((2, t, d), np.float32)  # (H, T, d); scale 1/√d = 0.5: score = Σ key / 2
    key = (rng.standard_normal((2, t, d)) * 0.2).astype(np.float32)
    key += (np.arange(t) // block * rise / 2)[:, None].astype(np.float32)  # block b: b·rise
    value = rng.standard_normal((2, t, 3)).astype(np.float32)
    result = attention(query, key, value, strategy="tiled", block=block, causal=causal)
    scaled = reference_scores(query, key) * 0.5
    keep = reference_causal_keep(t, t) if causal else None
    weights, _ = reference_softmax(scaled, keep)
    # float32 scores of size |x| are only good to ~|x|·eps, and so is each exp(x − max)
    tol = 4 * np.finfo(np.float32).eps * np.abs(scaled).max()
    output = weights @ value.astype(np.float64)
    np.testing.assert_allclose(result.output, output, atol=tol * np.abs(value).max())
    hidden = scaled if keep is None else np.where(keep, scaled, -np.inf)
    row_max = hidden.max(axis=-1)
    np.testing.assert_allclose(result.row_max, row_max, rtol=1e-6)
    row_sum = np.exp(hidden - row_max[..., None]).sum(axis=-1)
    np.testing.assert_allclose(result.row_sum, row_sum, rtol=tol)
