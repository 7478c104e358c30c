"""Thumbnail previews: every block keeps its largest and its farthest-from-0 value, every
head its exact extremes, whatever the block size, the ragged edge or the masked cells."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.state.colormaps import finite_extremes, stage_range
from attn_explorer.state.results.preview import MAX_PIXELS, block_all, block_size, make_preview


def blocks_by_hand(values: np.ndarray, rows: int, cols: int):
    """Each block's cells, one (H, cells) array per (r, c): the plain definition."""
    heads, t_q, t_k = values.shape
    for r in range(-(-t_q // rows)):
        for c in range(-(-t_k // cols)):
            cells = values[:, r * rows : (r + 1) * rows, c * cols : (c + 1) * cols]
            yield r, c, cells.reshape(heads, -1)


def with_mask(rng, shape, hidden: float) -> np.ndarray:
    values = rng.standard_normal(shape) * 3
    values[rng.random(shape) < hidden] = -np.inf
    return values


@pytest.mark.parametrize(
    ("shape", "limit"),
    [((3, 700, 530), 100), ((2, 257, 1000), 256), ((1, 1000, 64), 100), ((2, 513, 513), 256)],
)
@pytest.mark.parametrize("hidden", [0.0, 0.3])
def test_each_block_keeps_its_largest_and_its_farthest_from_zero(shape, limit, hidden):
    rng = np.random.default_rng(sum(shape))
    values = with_mask(rng, shape, hidden)
    values[0, : 3 * limit // 100] = -np.inf  # whole blocks hidden too
    preview = make_preview(values, limit=limit)
    assert (preview.rows, preview.cols) == (
        block_size(shape[1], limit),
        block_size(shape[2], limit),
    )
    for r, c, cells in blocks_by_hand(values, preview.rows, preview.cols):
        for h in range(shape[0]):
            top = cells[h].max()
            visible = cells[h][np.isfinite(cells[h])]
            assert preview.highest[h][r, c] == top
            if visible.size:
                bottom = visible.min()
                farthest = bottom if abs(bottom) > abs(top) else top
                assert preview.farthest[h][r, c] == farthest
            else:
                assert preview.farthest[h][r, c] == -np.inf  # all hidden: drawn as masked
    assert all(a.shape == preview.highest[0].shape for a in preview.highest)
    assert max(preview.highest[0].shape) <= limit


def test_the_colour_scale_is_the_one_an_export_of_every_cell_gets():
    rng = np.random.default_rng(7)
    values = with_mask(rng, (4, 600, 600), 0.2)
    values[2] = -np.inf  # a head with nothing visible
    values[1, 599, 599] = 40.0  # one outlier in a corner block
    preview = make_preview(values)
    for h in range(4):
        assert (preview.low[h], preview.high[h]) == finite_extremes(values[h])
    for name in ("diverging", "sequential"):
        for stage in ("scores", "masked", "weights"):
            assert stage_range(None, stage, name, extremes=preview.extremes()) == stage_range(
                values, stage, name
            )
            assert stage_range(None, stage, name, extremes=preview.extremes([2])) == stage_range(
                values[2], stage, name
            )


def test_a_small_stage_is_its_own_preview():
    values = np.arange(2 * 5 * 7, dtype=np.float64).reshape(2, 5, 7)
    preview = make_preview(values)
    assert not preview.reduced
    assert all(np.shares_memory(preview.highest[h], values) for h in range(2))
    np.testing.assert_array_equal(np.stack(preview.farthest), values)
    assert (preview.low.tolist(), preview.high.tolist()) == ([0.0, 35.0], [34.0, 69.0])
    assert max(MAX_PIXELS, 7) == MAX_PIXELS


def test_with_heads_replaces_only_those_heads_and_shares_the_rest():
    rng = np.random.default_rng(3)
    values = rng.standard_normal((4, 520, 520))
    before = make_preview(values)
    values[2] *= 10
    part = make_preview(values[[2]])
    after = before.with_heads([2], part)
    fresh = make_preview(values)
    for h in range(4):
        np.testing.assert_array_equal(after.highest[h], fresh.highest[h])
        np.testing.assert_array_equal(after.farthest[h], fresh.farthest[h])
        assert (after.highest[h] is before.highest[h]) == (h != 2)
    np.testing.assert_array_equal(after.low, fresh.low)
    np.testing.assert_array_equal(after.high, fresh.high)
    assert before.high[2] != after.high[2]  # the old preview is unchanged


def test_block_all_is_true_only_where_every_cell_is():
    rng = np.random.default_rng(5)
    mask = rng.random((2, 301, 299)) < 0.97
    reduced = block_all(mask, 2, 3)
    for r, c, cells in blocks_by_hand(mask, 2, 3):
        assert reduced[:, r, c].tolist() == cells.all(axis=1).tolist()
    assert block_all(mask, 1, 1) is mask
