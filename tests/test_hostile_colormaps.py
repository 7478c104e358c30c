"""Issue 12, item 1: colour mapping never fails on ±inf, NaN or a range too wide for a float."""

import numpy as np
import pytest

from attn_explorer.state.colormaps import (
    COLORMAPS,
    INVALID_RGB,
    MASKED_RGB,
    lut,
    stage_range,
    to_rgb,
    value_range,
)

HUGE = np.array([[1.7e308, -1.7e308], [0.0, 1.0]])


@pytest.mark.parametrize("name", COLORMAPS)
@pytest.mark.parametrize("stage", ["scores", "weights"])
def test_huge_finite_values_map_to_the_ends(name, stage):
    low, high = stage_range(HUGE, stage, name)
    assert np.isfinite([low, high]).all()
    rgb = to_rgb(HUGE, name, low, high)
    table = lut(name)
    assert rgb.shape == (2, 2, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[0, 0]) == tuple(table[-1])  # the largest value: the top of the map
    assert tuple(rgb[0, 1]) == tuple(table[0])  # the most negative: the bottom


def test_a_range_wider_than_float64_still_orders_the_colours():
    low, high = value_range(HUGE, diverging=True)
    assert (low, high) == (-1.7e308, 1.7e308)  # high - low overflows: to_rgb must not care
    rgb = to_rgb(np.array([-1.7e308, 0.0, 1.7e308]), "greys", low, high)
    greys = rgb[:, 0].astype(int)
    assert greys[0] > greys[1] > greys[2]  # white (low) → black (high)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_cells_are_marked_never_an_index_error(dtype):
    values = np.array([np.inf, -np.inf, np.nan, 1.0, -2.0], dtype)
    for stage in ("scores", "masked", "weights"):
        low, high = stage_range(values, stage, "diverging")
        rgb = to_rgb(values, "diverging", low, high)
        assert tuple(rgb[0]) == INVALID_RGB  # +inf: an overflow, not a hidden key
        assert tuple(rgb[1]) == MASKED_RGB  # −inf: a hidden key
        assert tuple(rgb[2]) == INVALID_RGB  # NaN
        assert INVALID_RGB != MASKED_RGB
        assert tuple(rgb[3]) not in (INVALID_RGB, MASKED_RGB)


@pytest.mark.parametrize(
    ("low", "high"), [(np.inf, -np.inf), (np.nan, 1.0), (-np.inf, np.inf), (5.0, 5.0), (2.0, 1.0)]
)
def test_a_non_finite_or_empty_range_is_tolerated(low, high):
    rgb = to_rgb(np.array([0.0, 1.0, 1e308]), "sequential", low, high)
    assert rgb.shape == (3, 3)


def test_all_non_finite_input_has_a_drawable_range():
    values = np.full((2, 2), np.inf)
    assert stage_range(values, "scores", "diverging") == (-1.0, 1.0)
    assert (to_rgb(values, "diverging", -1.0, 1.0) == INVALID_RGB).all()
