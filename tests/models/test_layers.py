"""erf, GELU and LayerNorm: accuracy against math.erf and dtype kept."""

import math

import numpy as np
import pytest

from attn_explorer.models import erf, gelu, layer_norm
from attn_explorer.models.layers import gelu_tanh


def test_erf_float64_is_accurate_to_1e_15():
    x = np.concatenate([np.linspace(-30, 30, 120_001), [0.46875, -0.46875, 4.0, -4.0, 5e-300]])
    expected = np.array([math.erf(v) for v in x])
    assert np.abs(erf(x) - expected).max() < 1e-15


def test_erf_float32_is_accurate_to_1e_7():
    x = np.linspace(-9, 9, 180_001).astype(np.float32)
    expected = np.array([math.erf(float(v)) for v in x])
    out = erf(x)
    assert out.dtype == np.float32
    assert np.abs(out.astype(np.float64) - expected).max() <= 1e-7


def test_erf_edge_values():
    out = erf(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300]))
    np.testing.assert_array_equal(out[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.isnan(out[4]) and out[5] == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_matches_the_definition_and_keeps_dtype(dtype):
    x = np.linspace(-6, 6, 1001).astype(dtype)
    expected = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(float)])
    out = gelu(x)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, expected, atol=2e-7 if dtype == np.float32 else 1e-15)
    assert gelu_tanh(x).dtype == dtype
    np.testing.assert_allclose(gelu_tanh(x), expected, atol=1e-3)


def test_layer_norm_keeps_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    out = layer_norm(x, np.ones(8, np.float32), np.zeros(8, np.float32), 1e-12)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-6)
    np.testing.assert_allclose(out.std(-1), 1, atol=1e-5)
