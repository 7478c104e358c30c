"""Render the app icon's PNG sizes (and, with Pillow, .ico / .icns) from the SVG.

    python packaging/make_icons.py                      # resources/icons/attn-explorer-<N>.png
    python packaging/make_icons.py --ico build/icons/attn-explorer.ico   # Windows, needs Pillow
    python packaging/make_icons.py --icns build/icons/attn-explorer.icns # macOS, needs Pillow

The PNGs are committed, so run this only after editing resources/icons/attn-explorer.svg.
Rendering uses Qt's own SVG renderer offscreen (no Inkscape or cairo needed). The .ico
(Windows) and .icns (macOS) files are built from the rendered PNGs with Pillow, which is
not a project dependency: ``pip install pillow`` first, or see packaging/README.md for the
platform tools (``iconutil`` on macOS) that do the same.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ICON_DIR = ROOT / "resources" / "icons"
SVG = ICON_DIR / "attn-explorer.svg"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # the .ico format stops at 256
ICNS_SIZES = (16, 32, 64, 128, 256, 512)  # Pillow's .icns writer picks from these


def png_path(size: int, icon_dir: Path = ICON_DIR) -> Path:
    """Where the ``size`` × ``size`` PNG lives: ``attn-explorer-<size>.png``."""
    return icon_dir / f"attn-explorer-{size}.png"


def render_pngs(
    svg: Path = SVG, icon_dir: Path = ICON_DIR, sizes: tuple[int, ...] = SIZES
) -> list[Path]:
    """Render ``svg`` to one square, transparent PNG per size with QSvgRenderer."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    # QPainter needs a GUI application; keep a reference so it lives until we are done.
    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"make_icons: cannot parse {svg}")
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        target = png_path(size, icon_dir)
        if not image.save(str(target), "PNG"):
            raise SystemExit(f"make_icons: cannot write {target}")
        written.append(target)
    return written


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise SystemExit(
            "make_icons: .ico/.icns need Pillow (pip install pillow); the PNGs are enough on Linux"
        ) from None
    return Image


def write_ico(target: Path, icon_dir: Path = ICON_DIR) -> None:
    """A multi-resolution Windows .ico holding the 16–256 px renders."""
    image_cls = _pillow()
    largest = image_cls.open(png_path(256, icon_dir))
    extra = [image_cls.open(png_path(s, icon_dir)) for s in ICO_SIZES if s != 256]
    target.parent.mkdir(parents=True, exist_ok=True)
    largest.save(target, format="ICO", sizes=[(s, s) for s in ICO_SIZES], append_images=extra)


def write_icns(target: Path, icon_dir: Path = ICON_DIR) -> None:
    """A macOS .icns holding the 16–512 px renders."""
    image_cls = _pillow()
    largest = image_cls.open(png_path(512, icon_dir))
    extra = [image_cls.open(png_path(s, icon_dir)) for s in ICNS_SIZES if s != 512]
    target.parent.mkdir(parents=True, exist_ok=True)
    largest.save(target, format="ICNS", append_images=extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ico", type=Path, help="also write a Windows .ico here (needs Pillow)")
    parser.add_argument("--icns", type=Path, help="also write a macOS .icns here (needs Pillow)")
    parser.add_argument(
        "--no-png", action="store_true", help="reuse the committed PNGs instead of re-rendering"
    )
    args = parser.parse_args(argv)
    if not args.no_png:
        for path in render_pngs():
            print(f"wrote {path.relative_to(ROOT)}")
    if args.ico:
        write_ico(args.ico)
        print(f"wrote {args.ico}")
    if args.icns:
        write_icns(args.icns)
        print(f"wrote {args.icns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
