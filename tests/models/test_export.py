"""run_model_export: the .npz holds the arrays and tokens, the .png is the model view."""

import numpy as np
import pytest

from attn_explorer.models import load_model
from attn_explorer.models.cli import SEQUENTIAL_STOPS, colorize, run_model_export


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
    # the first heatmap's top-left pixel is weight[0, 0, 0, 0] in the colour map
    result = load_model(tiny_model_dir).attention("the cat sat on the mat")
    data = result.weights if values == "weights" else result.scores
    color = image.pixelColor(70 + 2, 90 + 2)
    if values == "weights":
        expected = colorize(data[0, 0, 0, 0], 0, 1, SEQUENTIAL_STOPS)
        assert (color.red(), color.green(), color.blue()) == tuple(int(c) for c in expected)


def test_bad_format_and_bad_folder(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="format"):
        run_model_export(tiny_model_dir, "the cat", tmp_path, "svg")
    with pytest.raises(ValueError, match=r"config\.json"):
        run_model_export(tmp_path, "the cat", tmp_path, "npz")
    with pytest.raises(ValueError, match="empty"):
        run_model_export(tiny_model_dir, "", tmp_path, "npz")


def test_colorize_ends_and_middle():
    from attn_explorer.models.cli import DIVERGING_STOPS, SEQUENTIAL_STOPS

    rgb = colorize(np.array([0.0, 1.0, 2.0]), 0, 1, SEQUENTIAL_STOPS)
    assert rgb.tolist() == [[68, 1, 84], [253, 231, 37], [253, 231, 37]]
    assert colorize(np.array(0.0), -3, 3, DIVERGING_STOPS).tolist() == [247, 247, 247]
