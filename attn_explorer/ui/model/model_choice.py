"""The Model dock's model picker, and what the dock remembers between launches.

A :class:`ModelPicker` is the combo box of the models found (the Hugging Face cache, LM
Studio's folder, model packages) and of the folders and ``.gguf`` files opened by hand,
with the *Open…* button beside it. The choice is kept in the app's QSettings
(:func:`attn_explorer.ui.common.settings.settings`; tests point ``ATTN_EXPLORER_SETTINGS_DIR``
at a folder of their own): the next launch chooses the same model again if it is still
there. The dock's width is kept there too (:func:`remember_dock_width`,
:func:`restore_dock_width`), so the dock opens as wide as the user left it, whether it is
a column of its own or shares the inputs' place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QMainWindow,
    QMenu,
    QPushButton,
    QWidget,
)

from attn_explorer.models.discovery import FoundModel
from attn_explorer.ui.common.settings import settings

#: QSettings keys: the chosen model's folder (or file) and the dock's width in pixels.
FOLDER_KEY, WIDTH_KEY = "model/folder", "model/dock_width"


def saved_folder() -> str | None:
    """The model chosen at the last launch, if it is still on disk; else None."""
    folder = settings().value(FOLDER_KEY, "")
    return str(folder) if folder and Path(str(folder)).exists() else None


def remember_dock_width(view: QWidget) -> None:
    """Keep the width of the dock holding ``view``, if it is open and in front."""
    dock = view.parentWidget()
    if isinstance(dock, QDockWidget) and dock.isVisible() and not dock.isFloating():
        settings().setValue(WIDTH_KEY, dock.width())


def restore_dock_width(window: QMainWindow, dock: QDockWidget) -> bool:
    """Give a dock just made the width it had when the last window closed; True if kept."""
    width = settings().value(WIDTH_KEY, 0, type=int)
    if not isinstance(width, int) or width <= 0:
        return False
    window.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
    return True


class ModelPicker(QWidget):
    """The models to choose from (``combo``) and the *Open…* button with its menu."""

    def __init__(self, open_folder: Callable[[], None], open_file: Callable[[], None]) -> None:
        super().__init__()
        self.combo = QComboBox()
        self.combo.setMinimumContentsLength(4)
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setPlaceholderText("Choose a model")  # no label: a narrow dock fits
        self.combo.setToolTip("The model whose attention is shown")
        self.combo.setAccessibleName("Model")
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip(
            "Open a BERT model folder (config.json, vocab.txt, weights) or a .gguf decoder file"
        )
        menu = QMenu(self.open_button)
        menu.addAction("Model folder…", open_folder)
        menu.addAction("GGUF model file…", open_file)
        self.open_button.setMenu(menu)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo, 1)
        layout.addWidget(self.open_button)
        self.combo.currentIndexChanged.connect(self._remember)
        self._restored = False  # the last launch's choice is tried once, at the first fill

    def current_folder(self) -> str | None:
        """The folder (or file) of the chosen model, or None."""
        data = self.combo.currentData()
        return str(data) if data else None

    def fill(self, found: Sequence[FoundModel]) -> None:
        """Add the models ``found`` (without a signal); the first time, choose the saved one."""
        current = self.current_folder()
        with QSignalBlocker(self.combo):
            for model in found:
                if self.combo.findData(str(model.folder)) < 0:
                    self.combo.addItem(f"{model.name} ({model.source})", str(model.folder))
            if current:
                self.combo.setCurrentIndex(self.combo.findData(current))
            elif not self._restored and (saved := saved_folder()) is not None:
                self.combo.setCurrentIndex(self.index_of(saved))
        self._restored = True

    def index_of(self, folder: str | Path) -> int:
        """The picker's entry for ``folder``, added (named after it) if it is new."""
        path = str(Path(folder))
        index = self.combo.findData(path)
        if index < 0:
            kind = "file" if Path(path).is_file() else "folder"
            self.combo.addItem(f"{Path(path).name} ({kind})", path)
            index = self.combo.count() - 1
        return index

    def _remember(self, *_: object) -> None:
        settings().setValue(FOLDER_KEY, self.current_folder() or "")
