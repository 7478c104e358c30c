"""The window's keyboard: every command from any focus, Escape, one Tab order, F6 between panels.

:class:`Keyboard` watches the widget that has the keyboard (an event filter moved along
with the focus, and one on the window itself) and keeps four promises:

- **A command's shortcut works from any focus.** A text field (a B/H/T/d spin box, a
  table's cell editor) claims some chords for itself (``QLineEdit`` takes Ctrl+E and
  Ctrl+N as "end of line" and "next line" on X11). It keeps only what is typing: plain
  characters, Copy/Cut/Paste/Select all, and Undo/Redo while it has typing to undo or
  redo; every other chord of a window command goes to the window.
- **Escape releases the keyboard.** In a window control (a spin box, a combo box, a button,
  a slider) Escape first puts back what was typed and not applied (a control with a
  ``revert()`` method is asked to), then gives the keyboard back to the window, where
  the bare keys (1…4, F) work again. Tables and their editors keep their own Escape.
- **Tab goes through every panel, in reading order** (this module moves the focus itself:
  Qt's focus chain is creation order, split into pieces by widgets made parentless): the
  toolbar, the explorer's views, then each dock (inputs, stepper, timing, model, vectors,
  lessons), then the menu bar's corner, and round again; Tab never stays inside a table
  (arrows move between cells; Tab in a cell editor still commits and moves on).
- **F6 / Shift+F6 (and Ctrl+Tab / Ctrl+Shift+Tab outside a tab widget, where Qt's Ctrl+Tab
  switches tabs) move to the next / previous visible panel**, back to the control that last
  had the keyboard there.

Every interactive control also gets an accessible name (what a screen reader reads): its
own if its builder gave one, else one made from its text, its label or its tooltip.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from PySide6.QtCore import QChildEvent, QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDockWidget,
    QDoubleSpinBox,
    QGraphicsView,
    QLabel,
    QLayout,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QScrollBar,
    QSpinBox,
    QSplitter,
    QTabBar,
    QTabWidget,
    QTextEdit,
    QToolBar,
    QWidget,
)

#: The docks in Tab / F6 order (any other dock follows them).
DOCK_ORDER = (
    "inputs-dock",
    "stepper-dock",
    "timing-dock",
    "model-dock",
    "vectors-dock",
    "lessons-dock",
)
#: What F1's help says about the keys of this module (they are no menu's commands).
HELP_LINES = (
    "F6 / Shift+F6 — next / previous panel (Ctrl+Tab / Ctrl+Shift+Tab too, outside a tab widget)",
    "Tab / Shift+Tab — next / previous control, through every panel",
    "Escape — in a box: put back what was not applied and give the keyboard back to the window",
)
Key = Qt.Key
Mod = Qt.KeyboardModifier
CHORD = Mod.ControlModifier | Mod.AltModifier | Mod.MetaModifier
#: Chords a text field keeps while it has focus: they edit its text.
TEXT_KEYS = (
    QKeySequence.StandardKey.Copy,
    QKeySequence.StandardKey.Cut,
    QKeySequence.StandardKey.Paste,
    QKeySequence.StandardKey.SelectAll,
)
#: Controls whose Escape this module handles (tables, editors, dialogs keep their own).
RELEASED_BY_ESCAPE = (QAbstractSpinBox, QComboBox, QAbstractButton, QAbstractSlider, QTabBar)
#: Controls a person operates; each needs an accessible name.
INTERACTIVE = (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QAbstractSlider,
    QLineEdit,
    QAbstractItemView,
    QPlainTextEdit,
    QTextEdit,
    QTabBar,
    QGraphicsView,
)


def text_field(widget: QWidget) -> QLineEdit | QPlainTextEdit | QTextEdit | None:
    """The editable text under ``widget`` (a line edit, a spin box's or a combo's), if any."""
    if isinstance(widget, QAbstractSpinBox):
        widget = widget.findChild(QLineEdit) or widget
    elif isinstance(widget, QComboBox) and widget.isEditable():
        widget = widget.lineEdit() or widget
    if isinstance(widget, QLineEdit):
        return None if widget.isReadOnly() else widget
    if isinstance(widget, (QPlainTextEdit, QTextEdit)):
        return widget
    return None


def widget_keeps(widget: QWidget, event: QKeyEvent) -> bool:
    """Whether the focused ``widget`` keeps this key rather than the window's command."""
    if event.text() and event.text().isprintable() and not event.modifiers() & CHORD:
        return True  # typing (a table starts editing a cell, a spin box takes the digit)
    field = text_field(widget)
    if field is None:
        return False
    if event.matches(QKeySequence.StandardKey.Undo):
        return uncommitted(widget, field)
    if event.matches(QKeySequence.StandardKey.Redo):
        return isinstance(field, QLineEdit) and field.isRedoAvailable()
    return any(event.matches(key) for key in TEXT_KEYS)


def uncommitted(widget: QWidget, field: QLineEdit | QPlainTextEdit | QTextEdit) -> bool:
    """Whether ``widget`` holds typing not yet applied, which its own Undo takes back.

    A spin box's text is committed once it shows its value (Enter, focus-out): from then
    on Ctrl+Z is the window's Undo, not the line edit's memory of the keys."""
    match widget:  # a case per class: an int's text, then a float's
        case QSpinBox():
            shown = widget.textFromValue(widget.value())
        case QDoubleSpinBox():
            shown = widget.textFromValue(widget.value())
        case _:
            return isinstance(field, QLineEdit) and field.isUndoAvailable()
    return widget.text() != widget.prefix() + shown + widget.suffix()


def _plain_text(text: str) -> str:
    text = re.sub(r"<[^>]+>", "", text).replace("&&", "\0").replace("&", "").replace("\0", "&")
    return " ".join(text.split())


def guess_name(widget: QWidget) -> str:
    """A short name for a control that was given none: its text, its label, its tooltip."""
    if isinstance(widget, QAbstractButton):
        text = _plain_text(widget.text())
        text = re.sub(r"^\d+\s+", "", text)  # "1 loop" → "loop": the digit is a shortcut
        if text and not text.isdigit():
            return text
    if isinstance(widget, QTabBar) and widget.count():  # a tab widget's or tabified docks'
        return "Tabs: " + ", ".join(_plain_text(widget.tabText(n)) for n in range(widget.count()))
    window = widget.window()
    for label in window.findChildren(QLabel):
        if label.buddy() is widget and _plain_text(label.text()):
            return _plain_text(label.text())
    tip = _plain_text(widget.toolTip())
    if tip:
        return re.split(r"[.;:(]\s|\s\(", tip, maxsplit=1)[0].strip() or tip
    parent = widget.parentWidget()
    if parent is not None:  # a label just before it in its layout: "Step by [cell]"
        siblings = children_in_order(parent)
        before = siblings[siblings.index(widget) - 1] if siblings.index(widget) else None
        if isinstance(before, QLabel) and _plain_text(before.text()):
            return _plain_text(before.text()).rstrip(": ")
    if isinstance(widget, (QSpinBox, QDoubleSpinBox)) and _plain_text(widget.prefix()):
        return _plain_text(widget.prefix()).rstrip("= ")
    owner: QWidget | None = widget
    while owner is not None:  # its own object name, or the view's it is part of
        name = owner.objectName()
        if name and not name.startswith("qt_") and not name.endswith("-dock"):
            return name.replace("_", " ").replace("-", " ").capitalize()
        if isinstance(owner, QDockWidget):
            return owner.windowTitle()
        owner = owner.parentWidget()
    return ""


def is_interactive(widget: QWidget) -> bool:
    """A control a person operates (not a scroll bar, not a part of another control)."""
    if isinstance(widget, QScrollBar):
        return False
    if isinstance(widget, QLineEdit) and isinstance(
        widget.parentWidget(), (QComboBox, QAbstractSpinBox)
    ):
        return False  # the editor inside a control: the control is named
    if isinstance(widget, QAbstractButton):
        return True
    if isinstance(widget, QAbstractScrollArea) and not isinstance(widget, INTERACTIVE):
        return False  # a frame that scrolls other controls
    return bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)


def name_controls(root: QWidget) -> None:
    """Give every interactive control under ``root`` without an accessible name one."""
    window = root.window()
    for widget in root.findChildren(QWidget):
        if widget.window() is not window:
            continue  # a dialog's or a popup's: not this window's to name
        if is_interactive(widget) and not widget.accessibleName().strip():
            name = guess_name(widget)
            if name:
                widget.setAccessibleName(name)


def _layout_widgets(layout: QLayout) -> Iterator[QWidget]:
    for n in range(layout.count()):
        item = layout.itemAt(n)
        if item is None:
            continue
        child, inner = item.widget(), item.layout()
        if child is not None:
            yield child
        elif inner is not None:
            yield from _layout_widgets(inner)


def children_in_order(widget: QWidget) -> list[QWidget]:
    """``widget``'s child widgets in reading order: a splitter's or layout's order first."""
    kids = [c for c in widget.children() if isinstance(c, QWidget)]
    layout = widget.layout()
    placed: list[QWidget | None] = []
    if isinstance(widget, QSplitter):
        placed = [widget.widget(n) for n in range(widget.count())]
    elif layout is not None:
        placed = list(_layout_widgets(layout))
    rank = {id(w): n for n, w in enumerate(placed)}
    return sorted(kids, key=lambda c: rank.get(id(c), len(rank)))


def in_reading_order(root: QWidget) -> Iterator[QWidget]:
    """``root`` and every widget under it, depth first, children in reading order."""
    yield root
    for child in children_in_order(root):
        yield from in_reading_order(child)


def tab_stops(panel: QWidget) -> list[QWidget]:
    """The controls of ``panel`` Tab may stop at, in reading order."""
    stops: list[QWidget] = []
    window = panel.window()
    for widget in in_reading_order(panel):
        if widget.focusProxy() is not None or widget.window() is not window:
            continue  # a part of another control, or a popup (a combo box's list)
        if isinstance(widget, QAbstractItemView):
            widget.setTabKeyNavigation(False)  # Tab leaves a table; arrows move in it
        group = widget.group() if isinstance(widget, QAbstractButton) else None
        if group is not None and group.exclusive():
            # One stop for the group, its checked button (arrows choose another); Qt's own
            # rule would stop at whichever button last had the focus.
            checked = group.checkedButton() or group.buttons()[0]
            if widget is checked:
                stops.append(widget)
            continue
        if not widget.focusPolicy() & Qt.FocusPolicy.TabFocus:
            continue
        if isinstance(widget, QAbstractScrollArea) and not isinstance(
            widget, (QAbstractItemView, QPlainTextEdit, QTextEdit, QGraphicsView)
        ):
            continue  # a frame that scrolls other controls is not a stop of its own
        stops.append(widget)
    return stops


def _reachable(widget: QWidget) -> bool:
    grouped = isinstance(widget, QAbstractButton) and widget.group() is not None
    return (
        widget.isVisible()
        and widget.isEnabled()
        and (grouped or bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus))
    )


class Keyboard(QObject):
    """The keyboard rules of one main window (see the module docstring)."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self._watched: QWidget | None = None
        self._last_focus: dict[int, QWidget] = {}
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(self.refresh)
        self.next_panel = self._action("Next panel", "F6", 1)
        self.previous_panel = self._action("Previous panel", "Shift+F6", -1)
        window.installEventFilter(self)
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        app.focusChanged.connect(self._on_focus_changed)
        self.refresh()

    def _action(self, text: str, key: str, step: int) -> QAction:
        action = QAction(text, self.window)
        action.setShortcut(QKeySequence(key))
        action.triggered.connect(lambda _checked=False: self.move_to_panel(step))
        self.window.addAction(action)
        return action

    # -- panels and the Tab order ----------------------------------------------------------
    def panels(self) -> list[QWidget]:
        """The window's panels in Tab / F6 order (see the module docstring)."""
        w = self.window
        toolbars = [t for t in w.findChildren(QToolBar) if t.parentWidget() is w]
        docks = [d for d in w.findChildren(QDockWidget) if d.parentWidget() is w]
        rank = {name: n for n, name in enumerate(DOCK_ORDER)}
        docks.sort(key=lambda d: rank.get(d.objectName(), len(rank)))
        central = w.centralWidget()
        return [*toolbars, *([central] if central is not None else []), *docks, w.menuBar()]

    def refresh(self) -> None:
        """Name new controls and make tables release Tab; ``move_focus`` walks the panels'
        controls in reading order when Tab is pressed, so the order is never stale."""
        name_controls(self.window)
        self._tables_release_tab()
        for dock in self.window.findChildren(QDockWidget):
            if not dock.property("keyboardWatched"):
                dock.setProperty("keyboardWatched", True)
                dock.visibilityChanged.connect(lambda _visible: self._refresh_timer.start())

    def _tables_release_tab(self) -> None:
        """Tables and lists stop keeping Tab for themselves (arrows move in them).

        ``tab_stops`` does the same on its walk; this is that one effect without the walk
        in reading order (~20 ms of the window's construction, before its first paint).
        """
        for view in self.window.findChildren(QAbstractItemView):
            if view.focusProxy() is None and view.window() is self.window:
                view.setTabKeyNavigation(False)

    def _panel_of(self, widget: QWidget | None) -> int:
        panels = self.panels()
        while widget is not None:
            for n, panel in enumerate(panels):
                if widget is panel:
                    return n
            widget = widget.parentWidget()
        return -1

    def move_to_panel(self, step: int) -> QWidget | None:
        """Give the keyboard to the next (``step`` 1) or previous (-1) visible panel."""
        self.refresh()
        panels = self.panels()
        here = self._panel_of(QApplication.focusWidget())
        if here < 0:
            here = -1 if step > 0 else 0
        for n in range(1, len(panels) + 1):
            index = (here + step * n) % len(panels)
            panel = panels[index]
            last = self._last_focus.get(id(panel))
            target: QWidget | None = None
            if last is not None and _reachable(last) and self._panel_of(last) == index:
                target = last
            else:
                target = next((s for s in tab_stops(panel) if _reachable(s)), None)
            if target is not None:
                target.setFocus(Qt.FocusReason.ShortcutFocusReason)
                return target
        return None

    # -- following the focus -----------------------------------------------------------------
    def _on_focus_changed(self, old: QWidget | None, new: QWidget | None) -> None:
        if self._watched is not None and self._watched is not new:
            with contextlib.suppress(RuntimeError):  # the widget was deleted with its focus
                self._watched.removeEventFilter(self)
            self._watched = None
        if new is None or new.window() is not self.window:
            return
        new.installEventFilter(self)
        self._watched = new
        panel = self._panel_of(new)
        if panel >= 0:
            self._last_focus[id(self.panels()[panel])] = new
        if not new.accessibleName().strip() and is_interactive(new):
            new.setAccessibleName(guess_name(new))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.ChildPolished and watched is self.window:
            child = event.child() if isinstance(event, QChildEvent) else None
            if isinstance(child, (QDockWidget, QToolBar)):
                self._refresh_timer.start()  # a dock or toolbar was added: name it, chain it
        elif isinstance(event, QKeyEvent) and isinstance(watched, QWidget):
            if kind == QEvent.Type.ShortcutOverride:
                return self._release_shortcut(watched, event)
            if kind == QEvent.Type.KeyPress:
                return self._key_press(watched, event)
        return False

    def _release_shortcut(self, widget: QWidget, event: QKeyEvent) -> bool:
        """Let a window command's chord past a widget that would take it (module docstring)."""
        if widget is self.window or widget_keeps(widget, event):
            return False
        pressed = QKeySequence(event.keyCombination())
        for action in self.window.actions():
            if not action.isEnabled() or action.shortcutContext() not in (
                Qt.ShortcutContext.WindowShortcut,
                Qt.ShortcutContext.ApplicationShortcut,
            ):
                continue
            if any(key.matches(pressed) == QKeySequence.SequenceMatch.ExactMatch
                   for key in action.shortcuts()):  # fmt: skip
                event.ignore()  # not overridden: the shortcut fires
                return True
        return False

    def _key_press(self, widget: QWidget, event: QKeyEvent) -> bool:
        key, mods = event.key(), event.modifiers()
        if key in (Key.Key_Tab, Key.Key_Backtab):
            if mods & Mod.ControlModifier:
                if self._inside_tab_widget(widget):
                    return False  # Qt's Ctrl+Tab: the next tab of the tab widget
                self.move_to_panel(-1 if key == Key.Key_Backtab else 1)
                return True
            if self._types_tab(widget):
                return False  # a cell editor commits and moves on; a text box indents
            return self.move_focus(-1 if key == Key.Key_Backtab else 1)
        if key == Key.Key_Escape and not mods and self._releases_on_escape(widget):
            revert = getattr(widget, "revert", None)
            match widget:  # its own value again: the typed text goes
                case _ if callable(revert):
                    revert()
                case QSpinBox():
                    widget.setValue(widget.value())
                case QDoubleSpinBox():
                    widget.setValue(widget.value())
            widget.clearFocus()
            return True
        return False

    def _types_tab(self, widget: QWidget) -> bool:
        parent = widget.parentWidget()
        if parent is not None and isinstance(parent.parentWidget(), QAbstractItemView):
            return True  # an editor on a table's viewport
        if isinstance(widget, (QPlainTextEdit, QTextEdit)):
            return not widget.isReadOnly() and not widget.tabChangesFocus()
        return False

    def tab_order(self) -> list[QWidget]:
        """Every panel's tab stops, in order (hidden and disabled ones included)."""
        return [stop for panel in self.panels() for stop in tab_stops(panel)]

    def move_focus(self, step: int) -> bool:
        """Tab (``step`` 1) or Shift+Tab (-1): the next reachable control, round the panels."""
        chain = [stop for stop in self.tab_order() if _reachable(stop)]
        if not chain:
            return False
        focus = QApplication.focusWidget()
        here = -1 if step > 0 else 0
        while focus is not None and focus is not self.window:
            if focus in chain:
                here = chain.index(focus)
                break
            focus = focus.parentWidget()
        chain[(here + step) % len(chain)].setFocus(
            Qt.FocusReason.TabFocusReason if step > 0 else Qt.FocusReason.BacktabFocusReason
        )
        return True

    def _releases_on_escape(self, widget: QWidget) -> bool:
        if widget is self.window or widget.window() is not self.window:
            return False
        return isinstance(widget, RELEASED_BY_ESCAPE)

    def _inside_tab_widget(self, widget: QWidget | None) -> bool:
        while widget is not None and widget is not self.window:
            if isinstance(widget, QTabWidget):
                return True
            widget = widget.parentWidget()
        return False


def walk(root: QWidget) -> Iterator[QWidget]:
    """Every interactive control under ``root`` (what a screen reader can reach)."""
    for widget in root.findChildren(QWidget):
        if is_interactive(widget):
            yield widget
