"""Where preferences and app data live (overridable, so tests never touch the user's files)."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

ORGANIZATION = "attn-explorer"
APPLICATION = "Attention Explorer"


def settings() -> QSettings:
    """The app's QSettings; ``ATTN_EXPLORER_SETTINGS_DIR`` puts them in an ini file there."""
    folder = os.environ.get("ATTN_EXPLORER_SETTINGS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return QSettings(str(Path(folder) / "settings.ini"), QSettings.Format.IniFormat)
    return QSettings(ORGANIZATION, "attn-explorer")


def data_dir() -> Path:
    """App-data folder (autosave): ``ATTN_EXPLORER_DATA_DIR`` or QStandardPaths' AppDataLocation."""
    folder = os.environ.get("ATTN_EXPLORER_DATA_DIR")
    if not folder:
        base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
        folder = str(Path(base or Path.home()) / "attn-explorer")
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def last_dir() -> str:
    """The folder a file dialog opens in: where the user last opened or saved a file."""
    return str(settings().value("last_dir", str(Path.home())))
