"""The one form every image export asks for (heads, format, PNG width), and OK / Cancel.

The heatmaps' export dialog and the vectors view's export use it; it only collects
choices and returns them, the caller does the work.
"""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QSpinBox, QWidget

from attn_explorer.state.storage.export import (
    DEFAULT_WIDTH,
    EXPORT_FORMATS,
    HEAD_CHOICES,
    MAX_WIDTH,
    MIN_WIDTH,
)
from attn_explorer.ui.common.text import add_mnemonics

#: The export dialog's choices of heads: (label, value for ``export_heatmaps``).
#: How the export dialog words each of state.export's HEAD_CHOICES.
HEAD_LABELS = {
    "current": "current head",
    "montage": "all heads as one montage",
    "all": "each head as its own file",
}


def accepted(dialog: QDialog, form: QFormLayout) -> bool:
    """Add OK / Cancel to a form dialog, run it, and say whether the user pressed OK."""
    buttons = QDialogButtonBox(
        QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
    )
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    form.addRow(buttons)
    add_mnemonics(dialog)
    return dialog.exec() == QDialog.DialogCode.Accepted


def image_options(
    parent: QWidget,
    title: str,
    formats: tuple[str, ...] = EXPORT_FORMATS,
    heads: str | bool | None = None,
) -> tuple[str, int, str | None] | None:
    """The export options every image export asks for, in one form: which heads (unless
    ``heads`` is False: a view of one head), format and PNG width. Returns
    ``(format, width, heads)``, or None when the user cancels."""
    dialog = QDialog(parent)
    dialog.setWindowTitle(title)
    form = QFormLayout(dialog)
    which: QComboBox | None = None
    if heads is not False:
        which = QComboBox()
        for value in HEAD_CHOICES:
            which.addItem(HEAD_LABELS[value], value)
        if isinstance(heads, str):
            which.setCurrentIndex(max(0, which.findData(heads)))
        form.addRow("heads", which)
    fmt = QComboBox()
    for name in formats:
        fmt.addItem(name.upper(), name)
    width = QSpinBox()
    width.setRange(MIN_WIDTH, MAX_WIDTH)
    width.setValue(DEFAULT_WIDTH)
    width.setSuffix(" px")
    form.addRow("format", fmt)
    form.addRow("width (PNG)", width)
    if not accepted(dialog, form):
        return None
    return fmt.currentData(), width.value(), None if which is None else which.currentData()
