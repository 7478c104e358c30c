"""Journeys on big heads: thumbnails reduced in blocks that say so, every cell when enlarged
and in exports, and an edit that recomputes and recolours only its own head.

Driven through the user's hands (dialogs, typing into a table, clicks, Ctrl+E); each step
checks what the window shows: image pixels and grabs, the hover read-out, the file written.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QSpinBox

from attn_explorer.compute import attention
from attn_explorer.state.colormaps import colour_index, lut, stage_range
from attn_explorer.state.labels import STAGE_NAMES
from attn_explorer.ui.explorer.heatmap_items import EMPTY_RGB

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
SCORES = STAGE_NAMES["scores"]


def load_random(user, heads: int, tokens: int, dim: int) -> None:
    """Presets ▸ Random… with these sizes, then wait for the result (a worker computes it)."""

    def sizes(dialog) -> None:
        spins = dialog.findChildren(QSpinBox)
        for spin, value in zip(spins, (1, heads, tokens, dim, 0), strict=False):
            spin.setValue(value)

    user.accept_form(sizes)
    user.choose("Presets", "Random…")
    window = user.window
    assert window.session.shape == (1, heads, tokens, dim)
    user.qtbot.waitUntil(
        lambda: window.results.up_to_date and window.recompute.wait_idle(), timeout=20000
    )
    user.settle()
    # The dock layout settles after the first draw; the heads re-fold once it has.
    user.qtbot.waitUntil(lambda: not window.heatmaps.settling, timeout=5000)
    user.settle()


def full_result(window):
    """Every stage, recomputed from scratch in the session's dtype (the preset may pick
    float32 for a big size)."""
    s = window.session
    dtype = np.dtype(s.options.dtype)
    return attention(*(s.matrix(m).astype(dtype) for m in ("query", "key", "value")))


def full_scores(window) -> np.ndarray:
    return full_result(window).scores[0]


def read_out(user, head: int, i: int, j: int) -> tuple[str, int, int]:
    """Hover over cell (i, j): the read-out, and the cell it names (0-based)."""
    user.hover_heatmap(head, i, j)
    text = user.window.heatmaps.hover.text()
    found = re.search(r"\(i=(\d+)\).*\(j=(\d+)\)", text)
    assert found is not None, text
    return text, int(found[1]) - 1, int(found[2]) - 1


def pixel_under(user, head: int, i: float, j: float) -> tuple[int, int, int]:
    """The colour a user sees over cell (i, j) of a head, from a grab of the heatmap view."""
    view = user.window.heatmaps.view
    image = view.grab().toImage()
    point = user.heatmap_point(head, i, j)
    colour = image.pixelColor(point)
    return colour.red(), colour.green(), colour.blue()


def farthest_from_zero(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Each rows × cols block's value farthest from 0, by the plain definition."""
    t_q, t_k = values.shape
    out = np.empty((-(-t_q // rows), -(-t_k // cols)))
    for r in range(out.shape[0]):
        for c in range(out.shape[1]):
            cells = values[r * rows : (r + 1) * rows, c * cols : (c + 1) * cols]
            out[r, c] = cells.flat[np.argmax(np.abs(cells))]
    return out


@pytest.mark.slow
def test_a_lone_extreme_cell_shows_in_its_block_and_the_read_out_says_it_is_a_block(user, tmp_path):
    load_random(user, heads=4, tokens=512, dim=8)
    heatmaps = user.window.heatmaps
    rows, cols = heatmaps.cells_per_pixel  # the thumbnails' pixels: fewer than 512 a side
    assert rows > 1 and cols > 1
    assert heatmaps.images[0].image.shape[:2] == (-(-512 // rows), -(-512 // cols))
    assert f"each pixel is a block of {rows} × {cols} cells" in heatmaps.hover.text()
    # q102 · k202 ≫ every other score: one cell, in an odd row and column (keeping every
    # other row and column, as the thumbnails did, would drop it).
    for matrix, row in (("query", 101), ("key", 201)):
        table = user.window.tables[matrix]
        table.scrollTo(table.model().index(row, 0))  # as a user scrolls down to it
        user.type_cell(matrix, row, 0, "90")
    every_head = full_scores(user.window)  # (H, T, T)
    assert np.unravel_index(np.argmax(np.abs(every_head)), every_head.shape) == (0, 101, 201)
    scores = every_head[0]
    darkest_red = tuple(int(c) for c in lut("diverging")[255])
    r, c = 101 // rows, 201 // cols
    assert tuple(heatmaps.images[0].image[r, c, :3]) == darkest_red
    # On screen, in the middle of that block.
    middle = ((2 * r + 1) * rows - 1) / 2, ((2 * c + 1) * cols - 1) / 2
    assert pixel_under(user, 0, *middle) == darkest_red

    # The read-out names the cell under the pointer (a pixel is several cells: the pointer
    # lands on one of them), its own value, and the block its pixel shows.
    blocks = farthest_from_zero(scores, rows, cols)
    for i, j in ((101, 201), (300, 300)):
        text, i, j = read_out(user, 0, i, j)
        assert heatmaps.cells_per_pixel == (rows, cols)  # hovering moves nothing
        r, c = i // rows, j // cols
        assert text.startswith(f"head 1 · query t{i + 1} (i={i + 1}) · key t{j + 1} (j={j + 1}) · ")
        assert (
            f"{SCORES} {scores[i, j]:.6g} — this pixel is a block of {rows} × {cols} cells" in text
        )
        assert (
            f"(queries i={r * rows + 1}–{(r + 1) * rows}, keys j={c * cols + 1}–{(c + 1) * cols}) "
            f"coloured by its value farthest from 0, {blocks[r, c]:.6g}"
        ) in text

    # View ▸ Enlarge current head: every cell, and a read-out of one cell.
    user.choose("View", "Enlarge current head / show all")
    assert heatmaps.enlarged == 0 and len(heatmaps.images) == 1
    assert heatmaps.images[0].image.shape[:2] == (512, 512)
    low, high = heatmaps.ranges[0]
    assert tuple(heatmaps.images[0].image[0, 0, :3]) == tuple(
        int(c) for c in lut("diverging")[colour_index(scores[:1, :1], low, high)[0, 0]]
    )
    text, i, j = read_out(user, 0, 3, 3)
    assert text.endswith(f"{SCORES} {scores[i, j]:.6g}")  # one cell: no block

    # Exports hold every cell, whatever the window draws.
    def npz(dialog) -> None:
        fmt = next(c for c in dialog.findChildren(QComboBox) if c.findData("npz") >= 0)
        fmt.setCurrentIndex(fmt.findData("npz"))

    user.accept_form(npz)
    user.pick_file(tmp_path / "big.npz")
    user.press(Qt.Key.Key_E, CTRL, widget=user.window)
    with np.load(tmp_path / "big.npz") as saved:
        assert saved["scores"].shape == (1, 4, 512, 512)
        np.testing.assert_array_equal(saved["scores"][0], every_head)


@pytest.mark.slow
def test_an_edit_of_one_head_recolours_only_that_head_at_once(user):
    load_random(user, heads=16, tokens=512, dim=8)
    window = user.window
    heatmaps = window.heatmaps
    before = [image.image for image in heatmaps.images]
    user.type_cell("key", 5, 2, "3")
    # Computed on the spot (one head of sixteen), not queued for the worker.
    assert window.results.up_to_date and not window.recompute.runner.is_busy()
    result = window.results.result
    full = full_result(window)
    np.testing.assert_array_equal(result.scores, full.scores)
    np.testing.assert_allclose(result.weights, full.weights, rtol=2e-6, atol=1e-7)
    after = [image.image for image in heatmaps.images]
    assert after[0] is not before[0]
    assert all(after[h] is before[h] for h in range(1, 16)), "other heads were redrawn"
    # Head 1 shows the new scores, block by block, on the scale shared by all heads.
    rows, cols = heatmaps.cells_per_pixel
    low, high = stage_range(full.scores[0], "scores", "diverging")
    blocks = farthest_from_zero(full.scores[0, 0], rows, cols)
    expected = lut("diverging")[colour_index(blocks, low, high)]
    np.testing.assert_array_equal(after[0][..., :3], expected)
    # On screen a block is about one pixel: the grab there shows it or a neighbour.
    r, c = 256 // rows, 256 // cols
    middle = ((2 * r + 1) * rows - 1) / 2, ((2 * c + 1) * cols - 1) / 2
    near = {
        tuple(int(v) for v in rgb) for rgb in expected[r - 1 : r + 2, c - 1 : c + 2].reshape(-1, 3)
    }
    assert pixel_under(user, 0, *middle) in near


@pytest.mark.slow
def test_stepping_a_big_session_fills_whole_blocks_only(user):
    load_random(user, heads=2, tokens=300, dim=2)
    heatmaps = user.window.heatmaps
    user.press(Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier, widget=user.window)  # loop
    user.window.stepper_dock.raise_()
    user.window.stepper.setFocus()
    user.press(Qt.Key.Key_Right, widget=user.window.stepper)
    assert user.window.stepper.stepper.frame() is not None
    image = heatmaps.images[0].image
    assert heatmaps.cells_per_pixel > (1, 1)
    assert (image[..., :3] == EMPTY_RGB).all()  # not one block is complete yet
    user.press(Qt.Key.Key_End, widget=user.window.stepper)
    image = heatmaps.images[0].image
    assert not (image[..., :3] == EMPTY_RGB).all(axis=-1).any()


@pytest.mark.slow
def test_after_an_edit_of_one_head_the_strategies_still_agree(user):
    load_random(user, heads=4, tokens=8, dim=2)
    user.press(Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier, widget=user.window)  # loop
    user.qtbot.waitUntil(
        lambda: "they agree" in user.window.code_panel.provenance.text(), timeout=5000
    )
    results = user.window.results
    scores = results.result.scores
    user.type_cell("query", 2, 1, "7")
    assert results.result.scores is scores  # head 1 recomputed into the result on screen
    assert results.up_to_date and results.used == "loop"
    assert "Result computed with <b>loop</b>" in results.provenance()
    user.qtbot.waitUntil(
        lambda: "they agree" in user.window.code_panel.provenance.text(), timeout=5000
    )
    full = full_result(user.window)
    np.testing.assert_allclose(results.result.weights, full.weights, rtol=1e-12, atol=1e-15)
    user.assert_grid_is_the_result()
