"""File ▸ Open tensors…: the query, key and value from a .npz, .npy or .safetensors file.

:func:`open_tensors_dialog` picks a file; :func:`open_tensors_path` reads its headers
(``state/storage/tensor_files.py``), and when the names do not say which array is which it
asks with :class:`MappingDialog`: each array listed with its dtype and shape, a choice of
array for the query, the key and the value, and what each axis of it is (batch, head,
token, dim). The mapping chosen is remembered per file (QSettings) and offered the next
time. A file the app cannot take gets one message, and the session stays as it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.state.storage.tensor_files import (
    AXES,
    ROLES,
    TensorFile,
    TensorFileError,
    TensorMapping,
    default_axes,
    guess_mapping,
    load_inputs,
    mapped_shape,
    mapping_problem,
    open_tensor_file,
)
from attn_explorer.ui.common.settings import settings
from attn_explorer.ui.common.text import message_box
from attn_explorer.ui.window.file_commands import last_dir

if TYPE_CHECKING:
    from attn_explorer.ui.window.file_commands import FileCommands

TENSOR_FILTER = "Tensors (*.npz *.npy *.safetensors);;All files (*)"
#: QSettings key of the remembered mappings: a JSON object {absolute path: mapping}.
MAPPINGS_KEY = "tensor_mappings"
MAX_REMEMBERED = 32
#: The value combo's entry for "no value array".
NO_VALUE = "(none: V = K)"


class MappingDialog(QDialog):
    """Which array is the query, the key and the value, and what each of its axes is."""

    def __init__(
        self, tensors: TensorFile, mapping: TensorMapping, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.tensors = tensors
        self.setWindowTitle(f"Open tensors: {tensors.path.name}")
        layout = QVBoxLayout(self)
        listing = QLabel(
            "The file holds:\n" + "\n".join(f"  {a.describe()}" for a in tensors.arrays.values())
        )
        listing.setObjectName("arrays")
        layout.addWidget(listing)
        form = QFormLayout()
        layout.addLayout(form)
        numeric = [a.name for a in tensors.arrays.values() if a.is_numeric]
        self.arrays: dict[str, QComboBox] = {}
        self.axes: dict[str, list[QComboBox]] = {}
        self._axes_rows: dict[str, QHBoxLayout] = {}
        for role in ROLES:
            combo = QComboBox()
            combo.setObjectName(f"{role}_array")
            combo.addItems(numeric + ([NO_VALUE] if role == "value" else []))
            chosen = mapping.arrays.get(role)
            combo.setCurrentText(chosen if chosen in numeric else NO_VALUE)
            self.arrays[role] = combo
            row = QHBoxLayout()
            self._axes_rows[role] = row
            self.axes[role] = []
            form.addRow(f"{role}:", combo)
            form.addRow(f"{role} axes:", row)
            self._fill_axes(role, mapping.axes.get(role))
            combo.currentTextChanged.connect(lambda _text, r=role: self._on_array_changed(r))
        self.summary = QLabel()
        self.summary.setObjectName("summary")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._update_summary()

    def mapping(self) -> TensorMapping:
        """The mapping as the dialog shows it now."""
        arrays, axes = {}, {}
        for role in ROLES:
            name = self.arrays[role].currentText()
            if name == NO_VALUE:
                continue
            arrays[role] = name
            axes[role] = tuple(combo.currentText() for combo in self.axes[role])
        return TensorMapping(arrays, axes)

    def _fill_axes(self, role: str, axes: tuple[str, ...] | None) -> None:
        """One combo per axis of the role's array, labelled with its size."""
        row = self._axes_rows[role]
        while row.count():  # the combos and their size labels
            item = row.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.axes[role] = []
        info = self.tensors.arrays.get(self.arrays[role].currentText())
        if info is None:
            return
        if axes is None or len(axes) != len(info.shape):
            axes = default_axes(len(info.shape))
        for n, (size, axis) in enumerate(zip(info.shape, axes, strict=True)):
            combo = QComboBox()
            combo.setObjectName(f"{role}_axis{n}")
            combo.addItems(list(AXES))
            combo.setCurrentText(axis)
            combo.setToolTip(f"axis {n} of {info.name} ({size} entries)")
            combo.currentTextChanged.connect(lambda _text: self._update_summary())
            row.addWidget(QLabel(f"{size}:"))
            row.addWidget(combo)
            self.axes[role].append(combo)

    def _on_array_changed(self, role: str) -> None:
        self._fill_axes(role, None)
        self._update_summary()

    def _update_summary(self) -> None:
        mapping = self.mapping()
        problem = mapping_problem(self.tensors, mapping)
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(not problem)
        if problem:
            self.summary.setText(f"Not yet: {problem}.")
            return
        parts = []
        for role, name in mapping.arrays.items():
            b, h, t, d = mapped_shape(self.tensors.arrays[name], mapping.axes[role])
            parts.append(f"{role} {name} as (B={b}, H={h}, T={t}, d={d})")
        if "value" not in mapping.arrays:
            parts.append("value = key")
        self.summary.setText("; ".join(parts) + ".")


def remembered_mapping(path: str | os.PathLike[str]) -> TensorMapping | None:
    """The mapping the user chose for this file before, or None."""
    table = _mappings()
    text = table.get(os.path.abspath(path))
    return TensorMapping.from_json(text) if isinstance(text, str) else None


def remember_mapping(path: str | os.PathLike[str], mapping: TensorMapping) -> None:
    table = {k: v for k, v in _mappings().items() if k != os.path.abspath(path)}
    table[os.path.abspath(path)] = mapping.to_json()
    kept = dict(list(table.items())[-MAX_REMEMBERED:])  # the newest last
    settings().setValue(MAPPINGS_KEY, json.dumps(kept))


def _mappings() -> dict[str, object]:
    try:
        table = json.loads(str(settings().value(MAPPINGS_KEY, "{}") or "{}"))
    except ValueError:
        return {}
    return table if isinstance(table, dict) else {}


def open_tensors_dialog(files: FileCommands) -> bool:
    """File ▸ Open tensors…: ask about unsaved work, pick a file, open it."""
    if not files.confirm_discard():
        return False
    path, _ = QFileDialog.getOpenFileName(files.window, "Open tensors", last_dir(), TENSOR_FILTER)
    if not path:
        return False
    return open_tensors_path(files, path)


def open_tensors_path(
    files: FileCommands, path: str | os.PathLike[str], *, quiet: bool = False
) -> bool:
    """Open the query, key and value of a tensor file (asking which is which when the names
    do not say); untitled and undoable. False, with one message, if it cannot be opened
    (in a message box too, unless ``quiet``: the command line prints it instead)."""

    def refuse(exc: TensorFileError) -> bool:
        message = f"Could not open {Path(path).name}: {str(exc).split(': ', 1)[-1]}"
        files.session.report(message)
        if not quiet:
            icon = QMessageBox.Icon.Warning
            message_box(files.window, icon, "Could not open the tensors", message)
        return False

    try:
        tensors = open_tensor_file(path)
    except TensorFileError as exc:
        return refuse(exc)
    mapping, certain = guess_mapping(tensors)
    before = remembered_mapping(path)
    if before is not None and not mapping_problem(tensors, before):
        mapping, certain = before, False  # offered again, still the user's to change
    if not certain:
        dialog = MappingDialog(tensors, mapping, files.window)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return False
        mapping = dialog.mapping()
        remember_mapping(path, mapping)
    try:
        inputs = load_inputs(tensors, mapping)
    except TensorFileError as exc:
        return refuse(exc)
    b, h, _, _ = inputs.snapshot.shape
    options = replace(  # the view options stay the user's; the attention is a model's
        files.session.options,
        stage="weights",
        scale=True,
        causal=False,
        dtype=inputs.options.dtype,
        head=0,
        batch_index=0,
        step=-1,
    )
    name = Path(path).stem
    if not files.replace(inputs.snapshot, options, f"open tensors {name}", name, confirm=False):
        return False
    _, _, t, d = inputs.snapshot.shape
    chosen = ", ".join(f"{role} = {array}" for role, array in mapping.arrays.items())
    parts = [f"Opened tensors from {Path(path).name} ({chosen}): B={b}, H={h}, T={t}, d={d}."]
    if inputs.sharing():
        parts.append(inputs.sharing())
    if inputs.notes:
        parts.append("; ".join(inputs.notes) + ".")
    files.session.report(" ".join(parts), "info")
    return True
