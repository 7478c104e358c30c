"""Heatmap export: decode the written PNG / SVG bytes and check they really show the session."""

import errno
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from attn_explorer.render import figure as render
from attn_explorer.render.figure import export_heatmaps, layout_figure
from attn_explorer.state.app_state import AppState
from attn_explorer.state.colormaps import lut, stage_range, to_rgb
from attn_explorer.state.presets import preset, random_preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage import session_file as io
from attn_explorer.state.storage.export import default_filename
from attn_explorer.state.storage.session_file import ExportError
from attn_explorer.state.types import MATRICES
from attn_explorer.state.views.figure import build_figure


@pytest.fixture(autouse=True)
def gui_app(qapp):
    """pytest-qt's QApplication (shared with widget tests); render uses whatever app runs."""
    assert render.ensure_gui_app() is qapp
    return qapp


def make_state(name="worked", **options):
    """A preset's numbers, results and name, as the window holds them after loading it."""
    chosen = random_preset(heads=3, tokens=5, dim=2) if name == "random3" else preset(name)
    session = Session(chosen.snapshot, replace(chosen.options, **options))
    return AppState(session, name=chosen.name)


def pixel(image, x, y):
    color = image.pixelColor(int(x), int(y))
    return color.red(), color.green(), color.blue()


def cell_centre(layout, panel, i, j):
    grid = layout.grids[panel]
    return grid.left() + (j + 0.5) * layout.cell, grid.top() + (i + 0.5) * layout.cell


def export_png(state, tmp_path, width=1600, **kwargs):
    [path] = export_heatmaps(state, tmp_path / "out.png", width=width, **kwargs)
    image = QImage(str(path))
    assert not image.isNull()
    return path, image


# -- PNG ------------------------------------------------------------------------------------------
def test_png_of_worked_example_shows_S(tmp_path):
    """S = [[1,0,1],[0,1,1],[1,1,2]] with the sequential map: 2 is the top colour, 0 the bottom."""
    state = make_state("worked", score_colormap="sequential")
    _, image = export_png(state, tmp_path, stage="scores")
    assert image.width() == 1600
    assert image.dotsPerMeterX() == image.dotsPerMeterY() == round(300 / 0.0254)
    layout = layout_figure(build_figure(state, "scores", [0]), 1600)
    assert image.height() == layout.height
    table = lut("sequential")
    assert pixel(image, *cell_centre(layout, 0, 2, 2)) == tuple(table[-1])  # (q3, k3) = 2
    assert pixel(image, *cell_centre(layout, 0, 0, 1)) == tuple(table[0])  # (q1, k2) = 0
    assert pixel(image, *cell_centre(layout, 0, 0, 0)) == tuple(table[128])  # (q1, k1) = 1


def test_png_default_diverging_map_is_centred_at_zero(tmp_path):
    state = make_state("worked")
    _, image = export_png(state, tmp_path, width=900)
    assert image.width() == 900
    layout = layout_figure(build_figure(state, "scores", [0]), 900)
    table = lut("diverging")
    assert pixel(image, *cell_centre(layout, 0, 2, 2)) == tuple(table[-1])
    assert pixel(image, *cell_centre(layout, 0, 0, 1)) == tuple(table[128])  # 0 = middle (white)


def test_png_weights_every_cell_has_its_colour(tmp_path):
    state = make_state("worked")
    _, image = export_png(state, tmp_path, stage="weights")
    weights = state.results.compute_now().weights[0, 0]
    assert stage_range(weights, "weights", "sequential") == (0.0, 1.0)  # as on screen
    expected = to_rgb(weights, "sequential", 0.0, 1.0)
    layout = layout_figure(build_figure(state, "weights", [0]), 1600)
    for i in range(3):
        for j in range(3):
            assert pixel(image, *cell_centre(layout, 0, i, j)) == tuple(expected[i, j])


def test_small_grid_exports_as_crisp_squares(tmp_path):
    state = make_state("worked")
    _, image = export_png(state, tmp_path, width=700)
    layout = layout_figure(build_figure(state, "scores", [0]), 700)
    assert layout.cell == int(layout.cell)
    grid = layout.grids[0]
    # every pixel inside a cell (away from the 1-px frame) has exactly that cell's colour
    for i in range(3):
        for j in range(3):
            x0, y0 = int(grid.left() + j * layout.cell), int(grid.top() + i * layout.cell)
            colours = {
                pixel(image, x, y)
                for x in range(x0 + 1, x0 + int(layout.cell) - 1, 3)
                for y in range(y0 + 1, y0 + int(layout.cell) - 1, 3)
            }
            assert len(colours) == 1, (i, j, colours)


def test_masked_cells_are_grey_and_named_in_the_legend(tmp_path):
    state = make_state("causal")
    _, image = export_png(state, tmp_path, stage="masked", heads=[2])  # head 2: index 1
    figure = build_figure(state, "masked", [1])
    assert figure.masked
    layout = layout_figure(figure, 1600)
    assert pixel(image, *cell_centre(layout, 0, 0, 5)) == render.MASKED_GREY  # key after query
    assert pixel(image, *cell_centre(layout, 0, 5, 0)) != render.MASKED_GREY


def test_montage_has_a_panel_per_head_and_per_head_colour_bars(tmp_path):
    state = make_state("random3", shared_scale=False)
    figure = build_figure(state, "scores", [0, 1, 2])
    layout = layout_figure(figure, 1600)
    assert len(layout.grids) == 3 and len(layout.bars) == 3
    assert [p.title for p in figure.panels] == ["head 1", "head 2", "head 3"]
    ranges = {(p.low, p.high) for p in figure.panels}
    assert len(ranges) == 3
    shared = build_figure(make_state("random3"), "scores", [0, 1, 2])
    assert len({(p.low, p.high) for p in shared.panels}) == 1
    assert len(layout_figure(shared, 1600).bars) == 1
    [path] = export_heatmaps(state, tmp_path, heads="montage")
    assert path.name == "random-scores-all-heads.png"
    image = QImage(str(path))
    for head in range(3):
        panel = figure.panels[head]
        rgb = to_rgb(panel.values, "diverging", panel.low, panel.high)
        assert pixel(image, *cell_centre(layout, head, 4, 1)) == tuple(rgb[4, 1])


def test_large_grid_renders(tmp_path):
    chosen = random_preset(heads=2, tokens=400, dim=4)
    state = AppState(Session(chosen.snapshot, chosen.options))
    [path] = export_heatmaps(state, tmp_path, heads="montage", stage="weights", width=1000)
    assert QImage(str(path)).width() == 1000


# -- SVG ------------------------------------------------------------------------------------------
def test_svg_parses_and_names_axes_and_heads(tmp_path):
    state = make_state("causal")
    [path] = export_heatmaps(state, tmp_path / "montage.svg", heads="montage")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert (
        root.get("viewBox")
        == f"0 0 1600 {layout_figure(build_figure(state, 'weights', [0, 1]), 1600).height}"
    )
    text = " ".join(t for t in root.itertext())
    for label in ("head 1", "head 2", "query i", "key j", "weights", "The", "mat"):
        assert label in text
    renderer = QSvgRenderer(str(path))
    assert renderer.isValid()
    image = QImage(800, 400, QImage.Format.Format_RGB32)
    image.fill(0xFFFFFFFF)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    colours = {image.pixel(x, y) for x in range(0, 800, 7) for y in range(0, 400, 7)}
    assert len(colours) > 10  # not blank


# -- files, names, errors -------------------------------------------------------------------------
def test_default_file_names(tmp_path):
    state = make_state("random3")
    session = state.session
    assert default_filename(state, "scores", 2, "png") == "random-scores-head3.png"
    assert default_filename(state, "weights", "montage", "svg") == ("random-weights-all-heads.svg")
    state = AppState(session, name="my session/1")
    written = export_heatmaps(state, tmp_path / "new" / "folder", heads="all", fmt="csv")
    assert [p.name for p in written] == [f"my-session-1-scores-head{h}.csv" for h in (1, 2, 3)]
    written = export_heatmaps(state, tmp_path / "x.svg", heads=[1, 3])
    assert [p.name for p in written] == ["x-head1.svg", "x-head3.svg"]


def test_csv_and_npz_via_export_round_trip(tmp_path):
    state = make_state("random3")
    session = state.session
    written = export_heatmaps(state, tmp_path, heads="montage", fmt="csv", stage="weights")
    assert len(written) == 3
    for head, path in enumerate(written):
        _, _, matrix = io.read_csv(path)
        assert matrix.tobytes() == state.results.compute_now().weights[0, head].tobytes()
    [npz] = export_heatmaps(state, tmp_path / "all.npz")
    with np.load(npz) as data:
        assert np.array_equal(data["key"], session.matrix("key"))
        assert np.array_equal(data["output"], state.results.compute_now().output)


def state_of(state):
    session = state.session
    snap = session.snapshot()
    return (
        snap.tokens,
        [getattr(snap, m).tobytes() for m in MATRICES],
        session.options,
        session.revision,
        session.dirty,
        state.document.name,
    )


ERRORS = {
    "unknown extension": (dict(target="out.jpg"), "unknown file type .jpg; name the file .png"),
    "unknown format": (dict(target=".", fmt="gif"), "unknown format 'gif'"),
    "format and name disagree": (dict(target="a.png", fmt="svg"), "ends in .png but the format"),
    "bad head": (dict(target=".", heads=[7]), "there is no head 7; this session has heads 1..3"),
    "bad head word": (dict(target=".", heads="some"), "heads: unknown 'some'"),
    "bad stage": (dict(target=".", stage="softmax"), "stage: unknown 'softmax'"),
    "bad width": (dict(target=".", width=10), "width: 10 pixels is not allowed"),
    "under a file": (dict(target="file/out.png"), "part of the path is a file"),
    "missing folder": (dict(target="missing/out.png"), "the folder does not exist"),
    "a folder with an extension's name": (dict(target="dir.png"), ""),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_export_errors_are_clear_and_leave_the_session_alone(tmp_path, case):
    kwargs, expected = ERRORS[case]
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir.png").mkdir()
    state = make_state("random3")
    session = state.session
    session.set_cell("query", 0, 0, 5.0)
    before = state_of(state)
    kwargs = dict(kwargs)
    target = tmp_path / kwargs.pop("target")
    if case == "a folder with an extension's name":
        # a folder named like a file is a folder: export goes inside it, no error
        assert export_heatmaps(state, target, **kwargs)[0].parent == target
    else:
        with pytest.raises(ExportError) as info:
            export_heatmaps(state, target, **kwargs)
        assert expected in str(info.value)
    assert state_of(state) == before


def test_disk_full_gives_export_error_and_keeps_old_file(tmp_path, monkeypatch):
    state = make_state("worked")
    path = tmp_path / "out.png"
    path.write_bytes(b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.os, "fsync", full)
    before = state_of(state)
    with pytest.raises(ExportError, match=r"out\.png: the disk is full"):
        export_heatmaps(state, path)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]
    assert state_of(state) == before
