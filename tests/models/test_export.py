"""run_model_export: the .npz holds the arrays and tokens, the .png is the model view."""

import numpy as np
import pytest

from attn_explorer.cli.model_export import montage_figure, run_model_export
from attn_explorer.models import load_model
from attn_explorer.render.figure import layout_figure
from attn_explorer.state.colormaps import lut, to_rgb


def test_npz_holds_every_array_and_the_tokens(tiny_model_dir, tmp_path):
    paths = run_model_export(tiny_model_dir, "the cat sat", tmp_path / "out", "npz", "on the mat")
    assert paths == [tmp_path / "out" / "tiny-bert.npz"]
    with np.load(paths[0]) as data:
        expected = load_model(tiny_model_dir).attention("the cat sat", "on the mat")
        assert data["tokens"].tolist() == expected.tokens
        for name in ("query", "key", "value", "scores", "weights", "hidden_states"):
            np.testing.assert_array_equal(data[name], getattr(expected, name))
            assert data[name].dtype == np.float32
        assert data["entropy"].shape == (2, 2)
        assert str(data["text_pair"]) == "on the mat"
        assert not data["truncated"]


@pytest.mark.parametrize("values", ["weights", "scores"])
def test_png_is_a_layers_by_heads_montage(tiny_model_dir, tmp_path, values):
    from PySide6.QtGui import QImage

    (path,) = run_model_export(
        tiny_model_dir, "the cat sat on the mat", tmp_path, "png", values=values
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = QImage(str(path))
    assert image.width() > 2 * 64 and image.height() > 2 * 64
    # the first heatmap's top-left pixel is weight[0, 0, 0, 0] in the colour map: viridis
    # from 0 to 1 for weights, blue-white-red over ±(largest |score|) for raw scores
    result = load_model(tiny_model_dir).attention("the cat sat on the mat")
    layout = layout_figure(montage_figure(result, values), image.width())
    assert image.height() == layout.height and len(layout.grids) == 2 * 2  # layers × heads
    first = layout.grids[0]  # layer 1, head 1
    color = image.pixelColor(int(first.left()) + 2, int(first.top()) + 2)
    if values == "weights":
        expected = to_rgb(result.weights[0, 0, :1, 0], "sequential", 0, 1)[0]
    else:
        bound = float(np.abs(result.scores).max())
        expected = to_rgb(result.scores[0, 0, :1, 0], "diverging", -bound, bound)[0]
    assert (color.red(), color.green(), color.blue()) == tuple(int(c) for c in expected)


def test_bad_format_and_bad_folder(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="format"):
        run_model_export(tiny_model_dir, "the cat", tmp_path, "svg")
    with pytest.raises(ValueError, match=r"config\.json"):
        run_model_export(tmp_path, "the cat", tmp_path, "npz")
    with pytest.raises(ValueError, match="empty"):
        run_model_export(tiny_model_dir, "", tmp_path, "npz")


def test_montage_colours_ends_and_middle():
    """The export uses state/colormaps.py: viridis ends, clipped above; white-ish at 0."""
    rgb = to_rgb(np.array([0.0, 1.0, 2.0]), "sequential", 0, 1)
    assert rgb.tolist() == [[68, 1, 84], [253, 231, 37], [253, 231, 37]]
    middle = to_rgb(np.array([0.0]), "diverging", -3, 3)[0]
    assert middle.tolist() == lut("diverging")[128].tolist()
    np.testing.assert_allclose(middle, [247, 247, 247], atol=1)


@pytest.mark.parametrize("values", ["weights", "scores"])
def test_png_colour_bar_spans_the_range(tiny_model_dir, tmp_path, values):
    """The bar's top is the top of the range, its bottom the bottom (both ends drawn)."""
    from PySide6.QtGui import QImage

    (path,) = run_model_export(tiny_model_dir, "the cat sat", tmp_path, "png", values=values)
    image = QImage(str(path))
    name = "sequential" if values == "weights" else "diverging"
    result = load_model(tiny_model_dir).attention("the cat sat")
    layout = layout_figure(montage_figure(result, values), image.width())
    bar = layout.bars[0]
    assert bar.bottom() >= layout.grids[-1].bottom()  # the bar spans every layer
    bottom = image.pixelColor(int(bar.center().x()), int(bar.bottom()) - 1)
    assert (bottom.red(), bottom.green(), bottom.blue()) == tuple(int(c) for c in lut(name)[0])
    top = image.pixelColor(int(bar.center().x()), int(bar.top()) + 1)
    assert (top.red(), top.green(), top.blue()) == tuple(int(c) for c in lut(name)[-1])
