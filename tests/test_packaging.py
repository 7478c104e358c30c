"""Desktop integration and shipped resources: icons, .desktop entry, AppStream metainfo.

The validators (desktop-file-validate from desktop-file-utils, appstreamcli from appstream)
run when installed, as .ci/run installs them; without them those two tests skip and say so.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from attn_explorer import __version__
from attn_explorer.state.storage.resources import resource

ROOT = Path(__file__).resolve().parent.parent
APP_ID = "io.github.attn_explorer.AttentionExplorer"
LINUX = ROOT / "packaging" / "linux"
DESKTOP = LINUX / f"{APP_ID}.desktop"
METAINFO = LINUX / f"{APP_ID}.metainfo.xml"
ICON_DIR = ROOT / "resources" / "icons"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def _load_make_icons():
    spec = importlib.util.spec_from_file_location(
        "make_icons", ROOT / "packaging" / "make_icons.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, read without any image library."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR", f"{path.name} has no IHDR chunk first"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # keys are case-sensitive in desktop files
    parser.read(DESKTOP, encoding="utf-8")
    return parser["Desktop Entry"]


def run_tool(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


# -- icons ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ICON_SIZES)
def test_icon_png_has_the_size_its_name_says(size: int) -> None:
    assert png_size(ICON_DIR / f"attn-explorer-{size}.png") == (size, size)


def test_every_icon_png_is_one_of_the_listed_sizes() -> None:
    for path in ICON_DIR.glob("*.png"):
        size = int(path.stem.rsplit("-", 1)[1])
        assert size in ICON_SIZES, f"{path.name}: size not in ICON_SIZES"
        assert png_size(path) == (size, size), path.name


def test_make_icons_sizes_match_the_committed_pngs() -> None:
    assert _load_make_icons().SIZES == ICON_SIZES


def test_svg_icon_is_square_svg() -> None:
    root = ET.parse(ICON_DIR / "attn-explorer.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    _, _, width, height = (float(v) for v in root.attrib["viewBox"].split())
    assert width == height


def test_make_icons_renders_the_svg(qapp, tmp_path: Path) -> None:
    """The committed script still renders every size, and the render is not blank."""
    from PySide6.QtGui import QImage

    make_icons = _load_make_icons()
    written = make_icons.render_pngs(icon_dir=tmp_path, sizes=(16, 64))
    assert [png_size(p) for p in written] == [(16, 16), (64, 64)]
    image = QImage(str(tmp_path / "attn-explorer-64.png"))
    colours = {image.pixel(x, y) for x in range(64) for y in range(64)}
    assert len(colours) > 4
    assert image.pixelColor(0, 0).alpha() == 0, "corners should be transparent"


def test_icons_are_reachable_through_importlib_resources() -> None:
    """The app finds icons via the package, so they work in a venv, editable install or bundle."""
    assert resource("icons", "attn-explorer.svg").is_file()
    for size in ICON_SIZES:
        assert resource("icons", f"attn-explorer-{size}.png").is_file()


# -- .desktop entry ---------------------------------------------------------------------


def test_desktop_entry_names_the_app_id_icon_and_console_script() -> None:
    entry = desktop_entry()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    assert entry["Type"] == "Application"
    assert entry["Icon"] == APP_ID
    assert entry["Exec"].split()[0] in scripts
    assert entry["TryExec"] in scripts
    assert entry["Terminal"] == "false"


@pytest.mark.skipif(
    shutil.which("desktop-file-validate") is None,
    reason="desktop-file-validate not installed (apt-get install desktop-file-utils)",
)
def test_desktop_file_validates() -> None:
    result = run_tool("desktop-file-validate", str(DESKTOP))
    assert result.returncode == 0, result.stdout + result.stderr
    # Hints are fine; errors and warnings are not.
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if ": error:" in line or ": warning:" in line
    ]
    assert not problems, "\n".join(problems)


# -- AppStream metainfo ------------------------------------------------------------------


def metainfo() -> ET.Element:
    return ET.parse(METAINFO).getroot()


def test_metainfo_matches_app_id_desktop_file_and_version() -> None:
    root = metainfo()
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == DESKTOP.name
    assert root.findtext("metadata_license") == "CC0-1.0"
    assert root.findtext("project_license") == "MIT"
    assert root.findtext("developer_name"), "appstream 0.16 (Debian 12) wants <developer_name>"
    assert root.find("content_rating") is not None
    versions = [release.get("version") for release in root.iter("release")]
    assert __version__ in versions


def test_metainfo_screenshot_is_committed() -> None:
    """Every screenshot the metainfo shows is a file in resources/screenshots/."""
    images = [image.text or "" for image in metainfo().iter("image")]
    assert images, "metainfo lists no screenshot"
    for url in images:
        marker = "/resources/screenshots/"
        assert marker in url, url
        path = ROOT / "resources" / "screenshots" / url.split(marker, 1)[1]
        assert path.is_file(), (
            f"{path.relative_to(ROOT)} missing: "
            "run python -m attn_explorer.tools.screenshots resources/screenshots/"
        )


@pytest.mark.skipif(
    shutil.which("appstreamcli") is None,
    reason="appstreamcli not installed (apt-get install appstream)",
)
def test_metainfo_validates() -> None:
    result = run_tool("appstreamcli", "validate", "--no-net", "--explain", str(METAINFO))
    assert result.returncode == 0, result.stdout + result.stderr


# -- bundle recipe ------------------------------------------------------------------------


def test_spec_and_launcher_are_where_build_sh_expects_them() -> None:
    build = (ROOT / "packaging" / "build.sh").read_text("utf-8")
    assert "packaging/attn_explorer.spec" in build
    spec = (ROOT / "packaging" / "attn_explorer.spec").read_text("utf-8")
    assert '"launcher.py"' in spec and "SPECPATH" in spec
    assert f'APP_ID = "{APP_ID}"' in spec
    compile(spec, "attn_explorer.spec", "exec")
    launcher = ROOT / "packaging" / "launcher.py"
    result = subprocess.run(
        [sys.executable, str(launcher), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"attn-explorer {__version__}"


# -- self-test and screenshots ---------------------------------------------------------------


@pytest.mark.slow
def test_self_test_passes_from_the_command_line(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_EXPLORER_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "attn_explorer", "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "self-test ok"
    assert any(
        "S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]] (session and window)" in line for line in lines
    )
    assert not list(tmp_path.iterdir()), "the self-test wrote into the user's data folder"


@pytest.mark.slow
def test_self_test_reports_a_blank_export(qapp, monkeypatch, capsys, tmp_path: Path) -> None:
    """A broken exporter makes the self-test fail with a reason, not pass or crash."""
    from PySide6.QtGui import QColor, QImage

    from attn_explorer.cli import self_test
    from attn_explorer.render import figure as render

    def blank_export(session, target, **options):
        image = QImage(200, 100, QImage.Format.Format_RGB32)
        image.fill(QColor("white"))
        path = Path(target) / "blank.png"
        image.save(str(path))
        return [path]

    monkeypatch.setattr(render, "export_heatmaps", blank_export)
    monkeypatch.setenv("ATTN_EXPLORER_DATA_DIR", str(tmp_path))
    assert self_test.run_self_test() == 1
    assert "self-test FAILED: blank.png looks blank" in capsys.readouterr().out


@pytest.mark.slow
def test_screenshots_tool_grabs_the_window(qapp, tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    from attn_explorer.cli.self_test import private_app_folders
    from attn_explorer.tools import screenshots

    with private_app_folders(tmp_path / "scratch"):
        written = screenshots.take(tmp_path, screenshots.SHOTS[:1], report=str)
    assert [p.name for p in written] == ["main-window.png"]
    image = QImage(str(written[0]))
    assert (image.width(), image.height()) == screenshots.SIZE


def test_committed_screenshots_are_the_tools_shots_at_full_size() -> None:
    """Every shot is committed where it goes; a picture of the window has the shot's size."""
    from attn_explorer.tools.screenshots import SHOTS

    for shot in SHOTS:
        size = png_size(ROOT / shot.folder / shot.filename)
        assert size == shot.size or not shot.whole_window, shot.filename


def test_pyproject_lists_every_package_folder() -> None:
    """A wheel built from pyproject holds exactly the folders the source tree has.

    The list is written by hand (resources/ maps onto attn_explorer.resources), so a new
    sub-package left off it installs nowhere; the bundle then failed its self-test with
    ModuleNotFoundError for attn_explorer.models.decoder.text.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "attn_explorer").rglob("__init__.py")
    }
    assert tree - listed == set(), "pyproject.toml's packages misses these folders"
    assert listed - tree == {"attn_explorer.resources"}, "pyproject.toml lists missing folders"
