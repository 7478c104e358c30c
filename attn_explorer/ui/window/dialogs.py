"""Small form dialogs of the window: the random preset and heatmap export.

Each dialog only collects choices; the work is done by the function it calls
(``FileCommands.load_preset``, ``render.export_heatmaps``), which reports failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QFormLayout,
    QMessageBox,
    QSpinBox,
    QWidget,
)

from attn_explorer.compute import LIMITS
from attn_explorer.state.app_state import AppState
from attn_explorer.state.storage.export import DEFAULT_WIDTH, ExportError
from attn_explorer.ui.common.export_form import accepted, image_options
from attn_explorer.ui.common.settings import last_dir
from attn_explorer.ui.common.text import message_box

if TYPE_CHECKING:
    from attn_explorer.ui.window.file_commands import FileCommands


def random_preset_dialog(parent: QWidget, files: FileCommands) -> bool:
    """Ask for B, H, T, d and a seed, then load seeded random Q, K, V of that size."""
    session = files.session
    dialog = QDialog(parent)
    dialog.setWindowTitle("Random preset")
    form = QFormLayout(dialog)
    b, h, t, d = session.shape
    spins = {}
    for label, value, limit in (
        ("B (batch)", b, LIMITS.max_batch),
        ("H (heads)", max(h, 4), LIMITS.max_heads),
        ("T (tokens)", max(t, 8), LIMITS.max_tokens),
        ("d (vector size)", max(d, 4), LIMITS.max_dim),
        ("seed", 0, 1_000_000),
    ):
        spin = QSpinBox()
        spin.setRange(0 if label == "seed" else 1, limit)
        spin.setValue(value)
        form.addRow(label, spin)
        spins[label] = spin
    if not accepted(dialog, form):
        return False
    batch, heads, tokens, dim, seed = (spin.value() for spin in spins.values())
    problem = session.check_size(batch, heads, tokens, dim)
    if problem:
        session.report(f"Random preset: {problem}; kept the current tables")
        return False
    return files.load_preset("random", batch=batch, heads=heads, tokens=tokens, dim=dim, seed=seed)


def export_heatmap(
    state: AppState,
    target: str,
    heads: str = "current",
    width: int = DEFAULT_WIDTH,
    fmt: str | None = None,
) -> list[Path]:
    """Export without dialogs; a failure is reported through the session and returns []."""
    from attn_explorer.render.figure import export_heatmaps

    session = state.session
    try:
        paths = export_heatmaps(state, target, heads=heads, width=width, fmt=fmt)
    except ExportError as exc:
        session.report(f"Export failed: {exc}")
        return []
    session.report("Exported " + ", ".join(str(p) for p in paths), "info")
    return paths


def export_dialog(parent: QWidget, state: AppState, heads: str | None = None) -> list[Path]:
    """Choose heads, format and width, then a file name; export and say what was written."""
    from attn_explorer.state.storage.export import default_filename

    session = state.session
    options = image_options(parent, "Export heatmap", heads=heads)
    if options is None:
        return []
    ext, width_px, heads_value = options
    job = session.options.head if heads_value == "current" else "montage"
    name = default_filename(state, session.options.stage, job, ext)
    path, _ = QFileDialog.getSaveFileName(
        parent, "Export heatmap", str(Path(last_dir()) / name), f"{ext.upper()} (*.{ext})"
    )
    if not path:
        return []
    if not Path(path).suffix:  # a name typed without its extension is a file, not a folder
        path += f".{ext}"
    errors: list[str] = []
    session.events.message.connect(collect := lambda text, level: errors.append(text))
    try:
        paths = export_heatmap(state, path, heads_value or "current", width_px, ext)
    finally:
        session.events.message.disconnect(collect)
    if not paths:
        message = errors[-1] if errors else "Export failed"
        message_box(parent, QMessageBox.Icon.Warning, "Export failed", message)
    return paths
