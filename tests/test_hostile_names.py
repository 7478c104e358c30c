"""Issue 12, item 5: any session name gives short, safe file names, and every export works."""

import os

import pytest

from attn_explorer.render.figure import export_heatmaps
from attn_explorer.state.app_state import AppState
from attn_explorer.state.presets import preset
from attn_explorer.state.session import Session
from attn_explorer.state.storage.export import default_filename


def named(name: str) -> AppState:
    chosen = preset("random")
    return AppState(Session(chosen.snapshot, chosen.options), name=name)


@pytest.mark.parametrize(
    "name",
    ["n" * 300, "é" * 300, "/" * 300 + "x", "../" * 100, "a" + "\u202e" * 500, "\ud800" * 50, ""],
)
def test_default_file_names_are_short_and_safe(name):
    session = named(name)
    for fmt, heads in (("png", "montage"), ("csv", 3), ("npz", "montage")):
        file_name = default_filename(session, "weights", heads, fmt)
        assert len(file_name.encode("utf-8")) <= 150
        assert "/" not in file_name and not file_name.startswith(".")
        assert file_name.isascii()


@pytest.mark.parametrize("fmt", ["png", "svg", "csv", "npz"])
def test_a_300_character_name_still_exports(tmp_path, fmt, qapp):  # qapp: a QApplication
    session = named("x" * 300)
    paths = export_heatmaps(session, tmp_path, heads="montage", fmt=fmt, width=400)
    assert paths and all(path.exists() for path in paths)
    assert all(len(os.fsencode(path.name)) <= 255 for path in paths)
