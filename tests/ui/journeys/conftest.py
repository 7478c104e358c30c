"""A user's hands on the real window: key presses, menu items, clicks and dialog answers.

Journey tests drive the window only through what a user can reach — a key press on
the focused widget, a ``QAction`` found by its menu text and triggered, a click on a
widget, a button pressed in a dialog — and after every action assert what the user
would see: the numbers in the score grid, the title bar, the status bar, the files
on disk. Never a handler called directly (that hid a dead Ctrl+V before).

Set ``JOURNEY_SHOTS=DIR`` to save a screenshot of each journey's end state there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QFileDialog,
    QLineEdit,
    QMenu,
    QMessageBox,
    QWidget,
)
from qt_idle import settle

from attn_explorer.compute import attention
from attn_explorer.ui.window.actions import plain
from attn_explorer.ui.window.main_window import MainWindow


class DialogNotShown(AssertionError):
    """The action was expected to open a dialog, and none appeared."""


class User:
    """One user at one window (see the module docstring)."""

    def __init__(self, qtbot, window: MainWindow) -> None:
        self.qtbot = qtbot
        self.window = window
        self._answers: list[tuple[type[QWidget], Callable[[QWidget], bool]]] = []
        self.dialogs_seen: list[str] = []
        self.unexpected_dialogs: list[str] = []
        # A dialog nobody answers would block the test forever: close it and fail instead.
        self._watchdog = QTimer()
        self._watchdog.setInterval(3000)
        self._watchdog.timeout.connect(self._close_unexpected_dialog)
        self._watchdog.start()

    def _close_unexpected_dialog(self) -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is not None and not self._answers:
            self.unexpected_dialogs.append(dialog.windowTitle())
            dialog.close()

    # -- menus and keys -------------------------------------------------------------------
    def action(self, *path: str) -> QAction:
        """The action at a menu path as the user reads it, e.g. ``("File", "Save As…")``.

        The last part may be a prefix (menu texts like "Undo edit Q" change).
        """
        menu: QMenu | None = None
        actions = self.window.menuBar().actions()
        for depth, name in enumerate(path):
            last = depth == len(path) - 1
            found = None
            for action in actions:
                text = plain(action.text())
                if text == name or (last and text.startswith(name)):
                    found = action
                    break
            assert found is not None, (
                f"no menu item {name!r} in {[plain(a.text()) for a in actions]}"
            )
            if last:
                return found
            menu = found.menu()
            assert menu is not None, f"{name!r} is not a menu"
            menu.aboutToShow.emit()  # menus fill themselves when opened (Open Recent)
            actions = menu.actions()
        raise AssertionError("empty menu path")

    def choose(self, *path: str) -> None:
        """Pick a menu item (it must be enabled, as a user could only click it then)."""
        action = self.action(*path)
        assert action.isEnabled(), f"{' ▸ '.join(path)} is disabled"
        action.trigger()
        self.settle()

    def press(self, key: Qt.Key, modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier,
              widget: QWidget | None = None) -> None:  # fmt: skip
        """A key press on the widget with the keyboard focus (or ``widget``)."""
        self._activate()
        self.qtbot.keyClick(widget or self._focus(), key, modifiers)
        self.settle()

    def type_text(self, text: str, widget: QWidget | None = None) -> None:
        """Type characters one by one into whatever has the focus (an editor opens on the first)."""
        for char in text:
            self.qtbot.keyClicks(widget or self._focus(), char)
        self.settle()

    def _activate(self) -> None:
        if QApplication.activeWindow() is None:
            # A closed dialog leaves no active window offscreen; a window manager would
            # give the activation back to the main window, so do that.
            self.window.activateWindow()
            self.qtbot.waitUntil(lambda: QApplication.activeWindow() is not None, timeout=1000)

    def _focus(self) -> QWidget:
        """Where a key press goes: the focused widget of the active window."""
        self._activate()
        active = QApplication.activeModalWidget() or self.window
        focus = QApplication.focusWidget()
        if focus is None or not focus.isVisible() or focus.window() is not active:
            return active
        return focus

    def click(self, widget: QWidget, pos: QPoint | None = None,
              button: Qt.MouseButton = Qt.MouseButton.LeftButton) -> None:  # fmt: skip
        self._activate()
        if pos is None:
            self.qtbot.mouseClick(widget, button)
        else:
            self.qtbot.mouseClick(widget, button, pos=pos)
        self.settle()

    def move_mouse(self, widget: QWidget, pos: QPoint) -> None:
        """Move the pointer over ``widget`` as a hand does: never sooner after the last move
        than pyqtgraph's scene takes moves (``mouseRateLimit`` per second). A move it
        drops loses a hover, or the start of a drag (a drag journey failed that way)."""
        import pyqtgraph as pg

        rate = pg.getConfigOption("mouseRateLimit")
        if rate > 0:
            self.qtbot.wait(int(1000 / rate) + 5)
        self.qtbot.mouseMove(widget, pos)

    def settle(self) -> None:
        """Let the window catch up on what the last action set off (see ``qt_idle.settle``)."""
        settle()

    # -- tables and the grid ------------------------------------------------------------------
    def click_cell(self, matrix: str, row: int, col: int) -> None:
        table = self.window.tables[matrix]
        if matrix == "value":
            self.window.matrix_tabs.setCurrentIndex(1)
        else:
            self.window.matrix_tabs.setCurrentIndex(0)
        rect = table.visualRect(table.model().index(row, col))
        self.click(table.viewport(), rect.center())
        table.setFocus()

    def type_cell(self, matrix: str, row: int, col: int, text: str) -> None:
        """Click a cell, type ``text`` (the first key opens the editor), press Enter."""
        self.click_cell(matrix, row, col)
        table = self.window.tables[matrix]
        self.type_text(text)
        editor = table.findChild(QLineEdit)
        assert editor is not None and editor.isVisible(), "typing did not open an editor"
        self.press(Qt.Key.Key_Return, widget=editor)
        # The commit may be queued: wait until the editor has closed and its events ran.
        self.qtbot.waitUntil(lambda: table.findChild(QLineEdit) is None or
                             not table.findChild(QLineEdit).isVisible(), timeout=2000)  # fmt: skip
        self.settle()

    def click_grid(self, i: int, j: int) -> None:
        table = self.window.score_grid.table
        rect = table.visualRect(table.model().index(i, j))
        self.click(table.viewport(), rect.center())

    def heatmap_point(self, head_index: int, i: int, j: int) -> QPoint:
        """Where cell (i, j) of a head's heatmap is, in the heatmap view's viewport."""
        from PySide6.QtCore import QPointF

        heatmaps = self.window.heatmaps
        assert heatmaps is not None
        shown = heatmaps._heads_shown()
        plot = heatmaps.plots[shown.index(head_index)]
        scene = plot.vb.mapViewToScene(QPointF(j + 0.5, i + 0.5))
        return heatmaps.view.mapFromScene(scene)

    def click_heatmap(self, head_index: int, i: int, j: int) -> None:
        heatmaps = self.window.heatmaps
        assert heatmaps is not None
        self.click(heatmaps.view.viewport(), self.heatmap_point(head_index, i, j))

    def hover_heatmap(self, head_index: int, i: int, j: int) -> None:
        heatmaps = self.window.heatmaps
        assert heatmaps is not None
        self.move_mouse(heatmaps.view.viewport(), self.heatmap_point(head_index, i, j))
        self.settle()

    def grid(self) -> list[list[str]]:
        """The score grid's cells as the user reads them."""
        return self.window.score_grid.text_grid()

    def grid_numbers(self) -> list[list[float | None]]:
        return [[None if c in ("", "…") else float(c.replace("−", "-")) for c in row]
                for row in self.grid()]  # fmt: skip

    def set_size(self, label: str, value: int) -> None:
        """Type a new B / H / T / d into its spin box and press Enter."""
        spin = self.window.size_controls.spins[label]
        spin.setFocus()
        spin.selectAll()
        self.qtbot.keyClicks(spin, str(value))
        self.press(Qt.Key.Key_Return, widget=spin)

    # -- what the user sees -------------------------------------------------------------------
    def title(self) -> str:
        """The title bar's text (``name*`` while modified)."""
        return self.window.windowHandle().title()

    def status(self) -> str:
        return self.window.statusBar().currentMessage()

    def expected_grid(self) -> list[list[float]]:
        """The current stage of the selected head, computed independently of the window."""
        s = self.window.session
        o = s.options
        dtype = np.dtype(o.dtype)
        result = attention(
            s.matrix("query").astype(dtype),
            s.matrix("key").astype(dtype),
            s.matrix("value").astype(dtype),
            scale=o.scale,
            causal=o.causal,
        )
        return result.stage(o.stage)[o.batch_index, o.head]

    def assert_grid_is_the_result(self) -> None:
        """Every cell of the grid shows the current result (nothing hidden, nothing stale)."""
        expected = self.expected_grid()
        model = self.window.score_grid.model
        assert self.window.stepper.frame() is None, "a step-through is still in progress"
        shown = self.grid()
        assert len(shown) == expected.shape[0] and all(
            len(row) == expected.shape[1] for row in shown
        ), f"grid {len(shown)}×{len(shown[0]) if shown else 0} for {expected.shape}"
        np.testing.assert_allclose(model.values, expected, rtol=1e-6, atol=1e-9)
        for r, row in enumerate(shown):
            for c, text in enumerate(row):
                value = float(expected[r, c])
                wanted = "−∞" if value == -np.inf else model.short_text(value)
                assert text == wanted, f"cell ({r}, {c}) shows {text!r}, expected {wanted!r}"

    def heatmap_image(self, head: int = 0) -> np.ndarray:
        heatmaps = self.window.heatmaps
        assert heatmaps is not None
        return np.asarray(heatmaps.images[head].image)

    def assert_heatmap_drawn(self, head: int = 0) -> None:
        """The head's heatmap shows more than one colour wherever its values differ."""
        values = self.expected_grid() if head == self.window.session.options.head else None
        image = self.heatmap_image(head)
        assert image.ndim == 3 and image.size
        colours = {tuple(px) for px in image.reshape(-1, image.shape[-1])}
        if values is None or np.ptp(values[np.isfinite(values)]) > 0:
            assert len(colours) > 1, "the heatmap is one flat colour"

    # -- dialogs ------------------------------------------------------------------------------
    def answer(self, kind: type[QWidget], handler: Callable[[QWidget], bool]) -> None:
        """Queue an answer for the next modal dialog of ``kind`` (set it before the action)."""
        self._answers.append((kind, handler))
        QTimer.singleShot(0, self._answer_next)

    def _answer_next(self, tries: int = 0) -> None:
        if not self._answers:
            return
        kind, handler = self._answers[0]
        dialog = QApplication.activeModalWidget()
        fresh = (
            dialog is not None
            and dialog.isVisible()
            and isinstance(dialog, kind)
            and not dialog.property("answeredByTest")  # ids of Python wrappers get reused
        )
        if not fresh:
            if tries < 300:
                QTimer.singleShot(10, lambda: self._answer_next(tries + 1))
            return
        self._answers.pop(0)
        dialog.setProperty("answeredByTest", True)
        self.dialogs_seen.append(dialog.windowTitle())
        assert handler(dialog)
        if self._answers:
            QTimer.singleShot(0, self._answer_next)

    @staticmethod
    def _button_handler(text: str) -> Callable[[QWidget], bool]:
        def handler(dialog: QWidget) -> bool:
            for button in dialog.findChildren(QAbstractButton):
                if plain(button.text()) == text:
                    button.click()
                    return True
            names = [plain(b.text()) for b in dialog.findChildren(QAbstractButton)]
            raise AssertionError(f"no button {text!r} in {names}")

        return handler

    def press_button(self, text: str) -> None:
        """Answer the next message box by pressing the button labelled ``text``."""
        self.answer(QMessageBox, self._button_handler(text))

    def pick_file(self, path: str | Path | None) -> None:
        """Answer the next file dialog with ``path`` (None: press Cancel)."""

        def handler(dialog: QWidget) -> bool:
            assert isinstance(dialog, QFileDialog)
            if path is None:
                dialog.reject()
                return True
            # As a user does: go to the folder, type the name into the file-name box, OK.
            target = Path(path)
            dialog.setDirectory(str(target.parent))
            name_box = dialog.findChild(QLineEdit, "fileNameEdit")
            assert name_box is not None
            name_box.setText(target.name)
            if target.exists() and dialog.acceptMode() == QFileDialog.AcceptMode.AcceptSave:
                # "… already exists. Do you want to replace it?" comes up inside accept().
                self._answers.insert(0, (QMessageBox, self._button_handler("Yes")))
                QTimer.singleShot(0, self._answer_next)
            dialog.accept()
            return True

        self.answer(QFileDialog, handler)

    def accept_form(self, setup: Callable[[QWidget], None] = lambda dialog: None) -> None:
        """Answer the next form dialog (export, random preset): adjust it, then press OK."""
        from PySide6.QtWidgets import QDialog

        def handler(dialog: QWidget) -> bool:
            setup(dialog)
            for button in dialog.findChildren(QAbstractButton):
                if plain(button.text()) == "OK":
                    button.click()
                    return True
            raise AssertionError("no OK button")

        self.answer(QDialog, handler)

    def assert_all_answered(self) -> None:
        assert not self._answers, f"{len(self._answers)} expected dialog(s) never appeared"

    def shoot(self, name: str) -> None:
        folder = os.environ.get("JOURNEY_SHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self.window.grab().save(str(Path(folder) / f"{name}.png"))


@pytest.fixture
def user(qtbot, request):
    """A fresh window (asking before discarding, as a user's does) and the hands driving it.

    The window is closed here rather than by qtbot, after the question about
    unsaved changes is switched off: qtbot closes its widgets before fixtures end.
    """
    window = MainWindow()
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    person = User(qtbot, window)
    try:
        yield person
        person.shoot(request.node.name)
        assert not person.unexpected_dialogs, f"unanswered dialogs: {person.unexpected_dialogs}"
        person.assert_all_answered()
    finally:
        person._watchdog.stop()
        window.files.ask_before_discard = False  # the test is over: close without asking
        window.close()
        window.shutdown()
        with qtbot.waitSignal(window.destroyed):
            window.deleteLater()
