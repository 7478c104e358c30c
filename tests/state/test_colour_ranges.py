"""The shared-vs-per-head colour-range rule, stated once (state.colormaps.head_ranges) and used
by the window's heatmaps, their first picture and every export."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.state.colormaps import head_ranges, heads_extremes

# Three heads of (2, 2) scores: each head spans a different interval; one is partly masked.
VALUES = np.array(
    [
        [[1.0, -2.0], [0.5, 0.0]],
        [[4.0, 3.0], [3.5, 3.25]],
        [[-np.inf, 0.25], [-np.inf, -np.inf]],
    ]
)


def test_heads_extremes_are_each_heads_finite_low_and_high():
    assert heads_extremes(VALUES) == [(-2.0, 1.0), (3.0, 4.0), (0.25, 0.25)]


def test_a_shared_scale_gives_every_head_the_range_of_all_of_them():
    extremes = heads_extremes(VALUES)
    assert head_ranges(extremes, "scores", "diverging", shared=True) == [(-4.0, 4.0)] * 3
    assert head_ranges(extremes, "scores", "sequential", shared=True) == [(-2.0, 4.0)] * 3


def test_per_head_scales_are_each_heads_own():
    extremes = heads_extremes(VALUES)
    assert head_ranges(extremes, "scores", "diverging", shared=False) == [
        (-2.0, 2.0),
        (-4.0, 4.0),
        (-0.25, 0.25),
    ]
    # A head of one finite value still gets a drawable range around it.
    assert head_ranges(extremes, "scores", "sequential", shared=False) == [
        (-2.0, 1.0),
        (3.0, 4.0),
        (-0.25, 0.75),
    ]


@pytest.mark.parametrize("shared", [True, False])
def test_weights_are_probabilities_whatever_the_rule(shared):
    assert head_ranges(heads_extremes(VALUES), "weights", "sequential", shared) == [(0.0, 1.0)] * 3


def test_no_finite_value_anywhere_falls_back_to_a_drawable_range():
    hidden = np.full((2, 2, 2), -np.inf)
    assert head_ranges(heads_extremes(hidden), "masked", "diverging", True) == [(-1.0, 1.0)] * 2
