"""How many columns the explorer's heatmap grid uses: the biggest cells for the view's shape."""

import math

import pytest

from attn_explorer.state.views.figure import best_columns

MIN_HEAD_PX, TITLE_PX = 48, 18  # what the explorer's heatmaps pass


def test_one_head_is_one_column():
    assert best_columns(1, 500, 500, 8, 8, 0) == 1


def test_title_rows_take_height_from_every_row():
    # 2 × 2 gives the biggest cells, until tall titles make one row of 4 the better deal
    assert best_columns(4, 400, 400, 8, 8, 0) == 2
    assert best_columns(4, 400, 400, 8, 8, 0, title_px=110) == 4


def test_a_square_view_gets_a_square_grid():
    assert best_columns(16, 800, 800, 12, 12, 0) == 4
    assert best_columns(4, 600, 600, 8, 8, 0) == 2


def test_a_wide_short_view_gets_one_row_and_a_tall_narrow_one_a_column():
    assert best_columns(4, 1600, 300, 8, 8, 0) == 4
    assert best_columns(4, 300, 1600, 8, 8, 0) == 1


def test_columns_never_narrower_than_a_title_when_another_choice_fits():
    columns = best_columns(16, 200, 2000, 4, 64, 0, min_column_px=MIN_HEAD_PX)
    assert 200 / columns >= MIN_HEAD_PX
    assert best_columns(16, 200, 200, 4, 4, 0) == 4  # 50-pixel columns are the biggest cells
    assert best_columns(16, 200, 200, 4, 4, 0, min_column_px=60) == 3  # but too narrow
    assert best_columns(16, 10, 10, 4, 4, 0, min_column_px=MIN_HEAD_PX) == 1  # not zero


@pytest.mark.parametrize("count", [2, 3, 5, 7, 12, 16, 64])
def test_no_column_count_that_only_makes_cells_narrower(count):
    columns = best_columns(count, 900, 700, 10, 10, 0)
    rows = math.ceil(count / columns)
    assert columns == 1 or math.ceil(count / (columns - 1)) > rows


def test_a_colour_bar_per_head_takes_room_from_every_column():
    shared = best_columns(8, 600, 600, 8, 8, 80)
    per_head = best_columns(8, 600, 600, 8, 8, 0, per_column_px=80)
    assert per_head < shared
