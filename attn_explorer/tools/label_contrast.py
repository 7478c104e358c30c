"""Text contrast of every label a user can see, measured on the window's own pixels.

WCAG 2's contrast ratio, ``(L1 + 0.05) / (L2 + 0.05)`` of the relative luminances of the
lighter and the darker colour, asks for at least 4.5 : 1 for body text. Each visible,
enabled label with text is cut out of one ``window.grab()``: its background is the colour
most of its pixels have, its text the pixel that stands furthest from that background (the
core of a glyph stem, where anti-aliasing does not blend it). So the figure is what is on
screen, whatever set the colours: the palette, a style sheet or rich text.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QLabel, QWidget

#: WCAG 2.1 success criterion 1.4.3, normal text
LEAST_RATIO = 4.5


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG relative luminance of an sRGB colour (0 black … 1 white)."""
    r, g, b = (_channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: tuple[int, int, int], second: tuple[int, int, int]) -> float:
    """WCAG contrast ratio of two colours, 1 (the same) … 21 (black on white)."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def text_and_background(
    image: QImage, x0: int, y0: int, width: int, height: int
) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """(text, background) colours of the rectangle of ``image``; None if it is one colour."""
    counts: Counter[tuple[int, int, int]] = Counter()
    for y in range(max(0, y0), min(image.height(), y0 + height)):
        for x in range(max(0, x0), min(image.width(), x0 + width)):
            rgb = image.pixel(x, y)
            counts[((rgb >> 16) & 255, (rgb >> 8) & 255, rgb & 255)] += 1
    if len(counts) < 2:
        return None
    background = counts.most_common(1)[0][0]
    text = max(counts, key=lambda colour: contrast_ratio(colour, background))
    return text, background


def _shown_labels(window: QWidget) -> list[QLabel]:
    from PySide6.QtWidgets import QLabel

    labels = []
    for label in window.findChildren(QLabel):
        if not label.isVisible() or not label.isEnabled() or not label.text().strip():
            continue
        if label.pixmap() is not None and not label.pixmap().isNull():
            continue  # a picture, not text
        labels.append(label)
    return labels


def label_contrasts(window: QWidget) -> dict[str, float]:
    """Contrast ratio of each visible label's text, by the label's path and first words."""
    from PySide6.QtCore import QRect

    from attn_explorer.tools.layout_rules import _path, visible_rect

    image = window.grab().toImage()
    scale = image.devicePixelRatio()
    found: dict[str, float] = {}
    for label in _shown_labels(window):
        inner = label.contentsRect()
        inner = QRect(label.mapTo(window, inner.topLeft()), inner.size())
        shown = inner.intersected(visible_rect(label, window))
        if shown.width() < 4 or shown.height() < 4:
            continue  # scrolled away or behind another dock
        colours = text_and_background(
            image,
            int(shown.x() * scale),
            int(shown.y() * scale),
            int(shown.width() * scale),
            int(shown.height() * scale),
        )
        if colours is None:
            continue  # its text is not in sight (scrolled out of a tall label)
        words = " ".join(label.text().split()[:6])
        name = f"{_path(label, window)} {words!r}"
        found[name] = contrast_ratio(*colours)
    return found


def low_contrast(window: QWidget, least: float = LEAST_RATIO) -> list[str]:
    """Problems: the visible labels whose text contrasts less than ``least`` : 1."""
    return [
        f"{name} has text contrast {ratio:.2f}:1 (below {least}:1)"
        for name, ratio in label_contrasts(window).items()
        if ratio < least
    ]
