"""Headless export of a real model's attention: the work behind ``attn-explorer export --model``.

``run_model_export(folder, text, out_dir, fmt)`` loads the model, runs the sentence
and writes ``out_dir/<name>.npz`` (every array plus ``tokens``) or
``out_dir/<name>.png`` (the model view: a layers × heads montage of attention
heatmaps). The PNG is drawn with Qt's QImage/QPainter, imported only inside the
PNG path, so this module and the rest of ``attn_explorer.models`` stay free of Qt.
Both are written atomically (``state.files.write_atomic``): a failed write, on a
full disk say, leaves the previous file as it was.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from attn_explorer.colormaps import to_rgb
from attn_explorer.models.bert import ModelAttention, load_model
from attn_explorer.models.errors import check_text
from attn_explorer.models.session import shown_values
from attn_explorer.state.files import write_atomic, write_atomic_with

if TYPE_CHECKING:  # for annotations only: Qt is imported inside the PNG path
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtGui import QImage

FORMATS = ("npz", "png")

#: Longest file stem of an export (file systems allow 255 bytes per name).
MAX_EXPORT_STEM = 100


def export_name(result: ModelAttention) -> str:
    """File stem for an export: the model's name made safe for a file system, and short."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", result.model_name)[:MAX_EXPORT_STEM]
    return stem.strip("._") or "model"


def write_npz(result: ModelAttention, path: Path, text: str, text_pair: str | None) -> Path:
    """Every array of ``result`` plus ``tokens`` and the summaries, as an uncompressed .npz.

    Streamed into a temporary file next to ``path`` and renamed over it.
    """
    summaries = result.summaries()
    arrays: dict[str, ArrayLike] = {
        "tokens": np.array(result.tokens, dtype=str),
        "input_ids": result.input_ids,
        "token_type_ids": result.token_type_ids,
        "query": result.query,
        "key": result.key,
        "value": result.value,
        "scores": result.scores,
        "weights": result.weights,
        "hidden_states": result.hidden_states,
        "last_hidden_state": result.last_hidden_state,
        "entropy": summaries.entropy,
        "cls": summaries.cls,
        "sep": summaries.sep,
        "previous": summaries.previous,
        "scale": np.float32(result.scale),
        "truncated": np.bool_(result.truncated),
        "model_name": np.array(result.model_name),
        "text": np.array(text),
        "text_pair": np.array(text_pair or ""),
    }
    return write_atomic_with(path, lambda stream: np.savez(stream, allow_pickle=False, **arrays))


def png_bytes(image: QImage) -> bytes:
    """A QImage encoded as PNG in memory (written to disk by the caller, atomically)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImageWriter

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # QImageWriter rather than QImage.save: the same encoder, and a format argument
    # whose type the PySide6 stubs and the binding agree on.
    if not QImageWriter(buffer, QByteArray(b"PNG")).write(image):
        raise ValueError("Qt could not encode the PNG (the image may be too large).")
    buffer.close()
    return bytes(data.data())


def _ensure_gui_application() -> QCoreApplication:
    """The running Qt application, or a new one (offscreen unless a platform is already set).

    A QApplication (a QGuiApplication that also allows widgets), so that the GUI
    or a test started later in the same process can still open windows.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication([])
    return app


def render_montage(result: ModelAttention, values: str = "weights") -> QImage:
    """The model view as a QImage: rows = layers, columns = heads, one heatmap per head.

    Each heatmap has rows = query token i and columns = key token j. ``values``
    is ``"weights"`` (viridis, 0 → 1) or ``"scores"`` (raw Q·Kᵀ, blue–white–red
    centred at 0, symmetric range over all heads).
    """
    _app = _ensure_gui_application()
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter

    shown = shown_values(result, scores=values == "scores")  # the model view's colours
    data, (low, high), label = shown.values, shown.levels, shown.label
    n_layers, n_heads, length = data.shape[0], data.shape[1], data.shape[-1]
    cell = int(np.clip(4 * length, 64, 160))
    gap, left, top, bar = 8, 70, 90, 90
    width = left + n_heads * (cell + gap) + bar
    height = top + n_layers * (cell + gap) + 40
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        font = QFont()
        font.setPixelSize(12)
        painter.setFont(font)
        painter.setPen(QColor("black"))
        title = f"{result.model_name}: {label}, rows = query i, columns = key j"
        painter.drawText(QRect(8, 6, width - 16, 18), Qt.AlignmentFlag.AlignLeft, title)
        tokens = " ".join(result.tokens)
        if result.truncated:
            tokens = "[truncated] " + tokens
        painter.drawText(
            QRect(8, 26, width - 16, 36),
            Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap,
            tokens,
        )
        for head in range(n_heads):
            x = left + head * (cell + gap)
            painter.drawText(
                QRect(x, top - 20, cell, 16), Qt.AlignmentFlag.AlignCenter, f"head {head + 1}"
            )
        rgb = to_rgb(data, shown.colormap, low, high)  # (L, H, T, T, 3)
        for layer in range(n_layers):
            y = top + layer * (cell + gap)
            painter.drawText(
                QRect(4, y, left - 12, cell), Qt.AlignmentFlag.AlignVCenter, f"layer {layer + 1}"
            )
            for head in range(n_heads):
                tile = np.ascontiguousarray(rgb[layer, head])  # (T, T, 3): row = query i
                heat = QImage(tile.data, length, length, 3 * length, QImage.Format.Format_RGB888)
                target = QRect(left + head * (cell + gap), y, cell, cell)
                painter.drawImage(target, heat.copy())
        # colour bar with its range, top = high
        bar_x, bar_h = width - bar + 16, n_layers * (cell + gap) - gap
        ramp = to_rgb(np.linspace(high, low, 256), shown.colormap, low, high)  # (256, 3)
        ramp = np.ascontiguousarray(np.repeat(ramp[:, None], 12, axis=1))  # (256, 12, 3)
        ramp_image = QImage(ramp.data, 12, 256, 36, QImage.Format.Format_RGB888).copy()
        painter.drawImage(QRect(bar_x, top, 16, bar_h), ramp_image)
        painter.drawText(bar_x + 20, top + 10, f"{high:.3g}")
        painter.drawText(bar_x + 20, top + bar_h, f"{low:.3g}")
        if values == "scores":
            painter.drawText(bar_x + 20, top + bar_h // 2 + 4, "0")
    finally:
        painter.end()
    return image


def run_model_export(
    folder: str | Path,
    text: str,
    out_dir: str | Path,
    fmt: str,
    text_pair: str | None = None,
    *,
    strategy: str = "batched",
    values: str = "weights",
) -> list[Path]:
    """Run ``text`` (and ``text_pair``) through the model in ``folder`` and write ``fmt`` files.

    ``fmt`` is ``"npz"`` (arrays + tokens) or ``"png"`` (the model view; ``values``
    chooses weights or raw scores). Returns the paths written. Raises ``ModelError``
    for a bad folder, ``TextError`` for bad text (both ``ValueError``), ``ValueError``
    for an unknown format and ``OSError`` when a file cannot be written (the
    previous file is then unchanged).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format: {fmt!r} is not one of {', '.join(FORMATS)} for a model export.")
    if values not in ("weights", "scores"):
        raise ValueError(f"values: {values!r}; choose 'weights' or 'scores'.")
    check_text("text", text)  # before the model is loaded
    check_text("text_pair", text_pair, optional=True)
    result = load_model(folder).attention(text, text_pair, strategy=strategy)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{export_name(result)}.{fmt}"
    if fmt == "npz":
        return [write_npz(result, path, text, text_pair)]
    return [write_atomic(path, png_bytes(render_montage(result, values)))]
