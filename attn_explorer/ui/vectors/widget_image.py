"""A widget as it is on screen, painted to PNG or SVG bytes: the Vectors dock's export.

The heatmaps export from figure data (:mod:`attn_explorer.render.figure`); the vectors
view is exported as drawn, so it is painted from the widget itself: into a
:class:`~PySide6.QtSvg.QSvgGenerator` for SVG, into a scaled white image for PNG.
"""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRectF, QSize
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

from attn_explorer.render.figure import png_bytes


def widget_image_bytes(widget: QWidget, fmt: str, scale: float = 2.0, title: str = "") -> bytes:
    """``widget`` painted as PNG (``scale`` × its size on screen, on white) or SVG bytes."""
    size = widget.size()
    if fmt == "svg":
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        generator = QSvgGenerator()
        generator.setOutputDevice(buffer)
        generator.setSize(QSize(size.width(), size.height()))
        generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
        generator.setTitle(title)
        painter = QPainter(generator)
        try:
            widget.render(painter, QPoint(0, 0))
        finally:
            painter.end()
        buffer.close()
        return bytes(data.data())
    image = QImage(
        round(size.width() * scale), round(size.height() * scale), QImage.Format.Format_RGB32
    )
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.scale(scale, scale)
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    return png_bytes(image)
