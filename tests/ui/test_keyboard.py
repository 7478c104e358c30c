"""The keyboard (issue 23, defect 6 and the Apply rule of 11): every shortcut from any focus,
Escape, the Apply rule of B/H/T/d, Tab through every panel, F6 between panels, dialog
mnemonics, accessible names. Keys go to the focused widget (or the window), never a handler."""

from __future__ import annotations

import itertools
import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QAbstractButton, QApplication, QDockWidget, QLineEdit
from qt_idle import settle

from attn_explorer.ui.window.actions import PRIMARY_ONLY
from attn_explorer.ui.window.keyboard import is_interactive, walk

Key = Qt.Key
Mod = Qt.KeyboardModifier
CTRL, SHIFT, ALT = Mod.ControlModifier, Mod.ShiftModifier, Mod.AltModifier


def focus_on(qtbot, window, widget) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=2000)
    widget.setFocus(Qt.FocusReason.OtherFocusReason)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget, timeout=2000)


def press(qtbot, key, modifiers=Mod.NoModifier, widget=None) -> None:
    qtbot.keyClick(widget or QApplication.focusWidget(), key, modifiers)
    settle()


def where_focus(window) -> str:
    """The focused control as a person would name it, with its dock's object name."""
    focus = QApplication.focusWidget()
    if focus is None:
        return "(nothing)"
    owner = focus
    while owner is not None and not isinstance(owner, QDockWidget):
        owner = owner.parentWidget()
    return f"{focus.accessibleName()} [{owner.objectName() if owner else 'window'}]"


# -- every shortcut from any focus ------------------------------------------------------------
def shortcut_presses(window):
    """(action, key, modifiers, its text) for every key of every window command (the keys F1
    lists: a standard key's first, as the platform's alternates are not the app's)."""
    for action in window.menu_actions.all():
        sequences = action.shortcuts()
        for sequence in sequences[:1] if action.property(PRIMARY_ONLY) else sequences:
            if sequence.isEmpty():
                continue
            combo = sequence[0]
            yield action, combo.key(), combo.keyboardModifiers(), sequence.toString()


def expected_in(focus: str, text: str, modifiers) -> bool:
    """The rule: typing and text editing stay in a text box; every other key is the window's."""
    if len(text) == 1:  # 1…4, F: a table starts editing, a spin box takes the character
        return focus == "score grid"
    # Copy / paste in a spin box are the box's text; every other chord is the window's.
    return not (focus == "spin box" and text in ("Ctrl+C", "Ctrl+V"))


@pytest.mark.slow
@pytest.mark.parametrize("focus", ["spin box", "table", "score grid"])
def test_every_shortcut_reaches_its_command_from_any_focus(qtbot, window, focus):
    """Failed before the fix: Ctrl+E (export) and Ctrl+N (new) did nothing in a spin box."""
    target = {
        "spin box": window.size_controls.spins["T"],
        "table": window.tables["query"],
        "score grid": window.score_grid.table,
    }[focus]
    presses = list(shortcut_presses(window))
    assert len(presses) >= 30
    fired: list[str] = []
    for action, *_ in presses:
        action.triggered.disconnect()  # what each command does is tested elsewhere
        action.triggered.connect(lambda _checked=False, a=action: fired.append(a.text()))
    wrong = []
    for action, key, modifiers, text in presses:
        action.setEnabled(True)
        focus_on(qtbot, window, target)
        fired.clear()
        press(qtbot, key, modifiers)
        editor = window.tables["query"].findChild(QLineEdit)
        if editor is not None and editor.isVisible():  # a bare key opened a cell editor
            press(qtbot, Key.Key_Escape, widget=editor)
        if (action.text() in fired) != expected_in(focus, text, modifiers):
            wrong.append(f"{text} ({action.text()}): fired={action.text() in fired}")
    assert not wrong, f"from the {focus}: {wrong}"


def test_ctrl_e_after_typing_t_and_enter_opens_the_export(qtbot, window, monkeypatch):
    """The issue's report, exactly: T typed, Enter, focus still in the box, Ctrl+E."""
    opened = []
    monkeypatch.setattr(
        "attn_explorer.ui.window.dialogs.export_dialog",
        lambda parent, state, heads=None: opened.append(heads),
    )
    spin = window.size_controls.spins["T"]
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, "4")
    press(qtbot, Key.Key_Return)
    assert window.session.shape == (1, 1, 4, 2) and QApplication.focusWidget() is spin
    press(qtbot, Key.Key_E, CTRL)
    assert opened == [None]
    # Undo from the same box is the window's Undo (nothing typed is pending in it).
    press(qtbot, Key.Key_Z, CTRL)
    assert window.session.shape == (1, 1, 3, 2) and spin.text() == "T=3"


def test_ctrl_z_in_a_box_with_typing_takes_back_the_typing_only(qtbot, window):
    window.session.set_cell("query", 0, 0, 5.0)
    spin = window.size_controls.spins["d"]
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, "7")
    press(qtbot, Key.Key_Z, CTRL)
    assert spin.text() == "d=2" and window.session.matrix("query")[0, 0, 0, 0] == 5.0
    press(qtbot, Key.Key_Z, CTRL)  # nothing typed now: the window's Undo
    assert window.session.matrix("query")[0, 0, 0, 0] != 5.0


# -- Escape and the Apply rule ----------------------------------------------------------------
def test_escape_in_a_size_box_puts_the_size_back_and_releases_the_keyboard(qtbot, window):
    """Failed before the fix: Escape left the typed 9 and the focus in the box."""
    spin = window.size_controls.spins["T"]
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, "9")
    press(qtbot, Key.Key_Escape)
    assert spin.text() == "T=3" and window.session.shape == (1, 1, 3, 2)
    assert QApplication.focusWidget() is not spin
    press(qtbot, Key.Key_2, widget=window)  # a bare key is the window's again
    assert window.session.options.strategy == "matmul"
    assert window.strategy_toggle.buttons["matmul"].isChecked()


def test_escape_in_a_toolbar_box_releases_the_keyboard(qtbot, window):
    stage = window.options_bar.stage
    focus_on(qtbot, window, stage)
    press(qtbot, Key.Key_Escape)
    assert QApplication.focusWidget() is not stage
    press(qtbot, Key.Key_F, widget=window)  # F: enlarge, a bare key of the window
    assert window.heatmaps.enlarged == 0


def test_a_size_applies_on_enter_or_apply_and_leaving_the_box_keeps_it_pending(qtbot, window):
    """Failed before the fix: Tab out of the box resized at once, and Apply had no role."""
    controls = window.size_controls
    spin_h, apply = controls.spins["H"], controls.apply_button
    assert not apply.isEnabled() and "Nothing to apply" in apply.toolTip()
    assert "Enter or Apply applies it" in spin_h.toolTip()
    focus_on(qtbot, window, spin_h)
    spin_h.selectAll()
    qtbot.keyClicks(spin_h, "2")
    press(qtbot, Key.Key_Tab)
    assert window.session.shape == (1, 1, 3, 2), "leaving the box applied the size"
    assert spin_h.text() == "H=2" and apply.isEnabled() and "H = 2" in apply.toolTip()
    assert "H = 2 not applied yet: press Enter in its box or Apply" in (
        window.statusBar().currentMessage()
    )
    for _ in range(6):  # on to Apply: T, d, the fill box, Apply
        if QApplication.focusWidget() is apply:
            break
        press(qtbot, Key.Key_Tab)
    assert QApplication.focusWidget() is apply
    press(qtbot, Key.Key_Space)
    assert window.session.shape == (1, 2, 3, 2) and not apply.isEnabled()
    spin_t = controls.spins["T"]
    focus_on(qtbot, window, spin_t)
    spin_t.selectAll()
    qtbot.keyClicks(spin_t, "5")
    press(qtbot, Key.Key_Return)
    assert window.session.shape == (1, 2, 5, 2) and not apply.isEnabled()
    assert window.tables["query"].model().rowCount() == 5


def test_a_pending_size_survives_an_option_change_and_escape_drops_it(qtbot, window):
    controls = window.size_controls
    spin = controls.spins["d"]
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, "4")
    press(qtbot, Key.Key_Tab)
    window.session.set_option("causal", True)
    assert spin.text() == "d=4" and controls.apply_button.isEnabled()
    focus_on(qtbot, window, spin)
    press(qtbot, Key.Key_Escape)
    assert spin.text() == "d=2" and not controls.apply_button.isEnabled()
    assert window.session.shape == (1, 1, 3, 2)


@pytest.mark.parametrize(("label", "digits"), [("T", "12"), ("d", "7"), ("H", "3")])
def test_a_size_typed_without_enter_is_applied_by_a_click_on_apply(qtbot, window, label, digits):
    """Issue 36: typing a size and clicking Apply without Enter did nothing (Apply stayed
    disabled until the box committed its text, so the click was lost)."""
    controls = window.size_controls
    spin, apply = controls.spins[label], controls.apply_button
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, digits)  # no Enter, no Tab: the box has not committed the text
    assert spin.text() == f"{label}={digits}" and QApplication.focusWidget() is spin
    assert apply.isEnabled() and f"{label} = {digits}" in apply.toolTip()
    qtbot.mouseClick(apply, Qt.MouseButton.LeftButton)
    settle()
    _, h, t, d = window.session.shape
    assert {"H": h, "T": t, "d": d}[label] == int(digits)
    rows, cols = (
        window.tables["query"].model().rowCount(),
        window.tables["query"].model().columnCount(),
    )
    assert (rows, cols) == (t, d)  # what the query table shows (one head's T × d)
    assert spin.text() == f"{label}={digits}" and not apply.isEnabled()


def test_apply_is_disabled_while_a_box_holds_no_size_and_says_what_to_type(qtbot, window):
    controls = window.size_controls
    spin, apply = controls.spins["T"], controls.apply_button
    focus_on(qtbot, window, spin)
    spin.selectAll()
    qtbot.keyClicks(spin, "9")
    assert apply.isEnabled()
    press(qtbot, Key.Key_Backspace)  # "T=": no size
    assert not apply.isEnabled()
    assert "T is no size: type a whole number from 1 to 8192" in apply.toolTip()
    qtbot.keyClicks(spin, "0")  # "T=0": below 1, still no size
    assert not apply.isEnabled()
    press(qtbot, Key.Key_Return)  # the box puts its last size back; nothing resized
    assert window.session.shape == (1, 1, 3, 2) and spin.text() == "T=3"
    assert not apply.isEnabled() and "Nothing to apply" in apply.toolTip()


# -- Tab and F6 -----------------------------------------------------------------------------
def tab_walk(qtbot, window, key, count):
    seen = []
    for _ in range(count):
        press(qtbot, key)
        seen.append(QApplication.focusWidget())
    return seen


@pytest.mark.slow
def test_tab_goes_through_every_panel_and_round_again(qtbot, window):
    """Failed before the fix: Tab reached the score grid and stayed in its cells forever,
    never the inputs, the stepper, the timing or the export; strategy buttons skipped."""
    w = window
    first = w.strategy_toggle.buttons[w.session.options.strategy]  # the checked one takes Tab
    focus_on(qtbot, w, first)
    stops = [first, *tab_walk(qtbot, w, Key.Key_Tab, 60)]
    lap = stops[: stops.index(first, 1)]
    order = [w.options_bar.stage, w.options_bar.scale, w.options_bar.causal,
             w.options_bar.shared, w.options_bar.head, w.score_grid.table,
             w.code_panel, *w.size_controls.spins.values(), w.tables["query"],
             w.tables["key"], w.stepper, w.lessons_dock.start_button]  # fmt: skip
    positions = [next(n for n, stop in enumerate(lap) if widget is stop or
                      widget.isAncestorOf(stop)) for widget in order]  # fmt: skip
    assert positions == sorted(positions), [where_focus(w) for w in lap]
    export_frame = next(b for b in w.stepper.findChildren(QAbstractButton)
                        if b.text().startswith("Export frame"))  # fmt: skip
    assert export_frame in lap
    assert all(a is not b for a, b in itertools.pairwise(lap)), "Tab stayed in place"
    # Shift+Tab walks the same lap backwards.
    focus_on(qtbot, w, first)
    back = tab_walk(qtbot, w, Key.Key_Backtab, len(lap))
    assert back == [*reversed(lap[1:]), first]


def test_the_checked_strategy_takes_tab_and_arrows_choose_another(qtbot, window):
    assert window.session.options.strategy == "batched"
    focus_on(qtbot, window, window.options_bar.stage)
    press(qtbot, Key.Key_Backtab)
    assert QApplication.focusWidget() is window.strategy_toggle.buttons["batched"]
    press(qtbot, Key.Key_Left)
    assert window.session.options.strategy == "matmul"
    assert QApplication.focusWidget() is window.strategy_toggle.buttons["matmul"]


def test_f6_and_ctrl_tab_move_between_panels(qtbot, window):
    """Failed before the fix: F6 and Ctrl+Tab did nothing."""
    w = window
    focus_on(qtbot, w, w.strategy_toggle.buttons["batched"])
    press(qtbot, Key.Key_F6)
    assert QApplication.focusWidget() is w.score_grid.table  # the explorer's first view
    press(qtbot, Key.Key_F6)
    assert QApplication.focusWidget() is w.size_controls.spins["B"]  # the inputs
    press(qtbot, Key.Key_F6)
    assert w.stepper.isAncestorOf(QApplication.focusWidget()) or (
        QApplication.focusWidget() is w.stepper
    )
    press(qtbot, Key.Key_F6, SHIFT)
    assert QApplication.focusWidget() is w.size_controls.spins["B"]  # back where it was
    press(qtbot, Key.Key_F6, SHIFT)
    assert QApplication.focusWidget() is w.score_grid.table
    press(qtbot, Key.Key_Tab, CTRL)  # Ctrl+Tab outside a tab widget: the next panel
    assert QApplication.focusWidget() is w.size_controls.spins["B"]
    focus_on(qtbot, w, w.tables["query"])  # inside the inputs' tabs: Qt's next tab
    press(qtbot, Key.Key_Tab, CTRL)
    assert w.matrix_tabs.currentIndex() == 1


# -- dialogs and names ------------------------------------------------------------------------
@pytest.mark.slow
def test_every_control_has_a_spoken_name(qtbot, window):
    """Failed before the fix: no control had an accessible name ("1 loop" was read)."""
    w = window
    for key in (Key.Key_F4, Key.Key_F3):  # vectors, lessons
        press(qtbot, key, widget=w)
    press(qtbot, Key.Key_M, CTRL, widget=w)  # the model dock
    w.timing_dock.raise_()
    settle()
    controls = [c for c in walk(w) if c.isVisible()]
    assert len(controls) > 40
    bad = [
        f"{type(c).__name__} {c.objectName()!r}: {c.accessibleName()!r}"
        for c in controls
        if not c.accessibleName().strip()
        or c.accessibleName().strip().isdigit()
        or re.match(r"\d+ ", c.accessibleName())  # "1 loop": a key, not a name
    ]
    assert not bad, bad
    names = {b.accessibleName() for b in w.strategy_toggle.buttons.values()}
    assert names == {"Strategy: loop", "Strategy: matmul", "Strategy: batched", "Strategy: tiled"}
    assert w.size_controls.spins["T"].accessibleName() == "T, number of tokens"
    assert is_interactive(w.stepper)  # a panel that takes the keyboard is named too
    assert w.stepper.accessibleName()


def test_f1_tells_about_f6_tab_and_escape(window):
    text = window.commands.shortcuts_text()
    assert "F6 / Shift+F6" in text and "Escape" in text and "Tab / Shift+Tab" in text


def test_key_sequences_of_the_window_are_portable(window):
    """The test above presses each action's first key; each has one chord (no multi-key)."""
    for action in window.menu_actions.all():
        for sequence in action.shortcuts():
            assert sequence.count() <= 1, sequence.toString(QKeySequence.SequenceFormat.NativeText)


def test_the_timing_dock_in_front_is_a_panel_of_f6_and_tab(qtbot, window):
    w = window
    w.commands.views.build_timing()
    w.timing_dock.show()
    w.timing_dock.raise_()
    settle()
    panel = w.timing_panel
    assert panel.isVisible()
    focus_on(qtbot, w, w.size_controls.spins["B"])
    for _ in range(3):  # after the inputs: the stepper (unless it is behind), the timing
        press(qtbot, Key.Key_F6)
        if panel.isAncestorOf(QApplication.focusWidget()):
            break
    assert QApplication.focusWidget() is panel.time_button
    press(qtbot, Key.Key_Tab)
    assert QApplication.focusWidget() is panel.sweep_button


def test_commands_reach_the_window_from_the_code_view(qtbot, window):
    from PySide6.QtWidgets import QPlainTextEdit

    code = window.code_panel.findChild(QPlainTextEdit)
    assert code is not None and code.isReadOnly()
    fired = []
    for action in (window.menu_actions.paste, window.menu_actions.export):
        action.triggered.disconnect()
        action.triggered.connect(lambda _checked=False, a=action: fired.append(a.text()))
    focus_on(qtbot, window, code)
    press(qtbot, Key.Key_V, CTRL)
    press(qtbot, Key.Key_E, CTRL)
    assert fired == [window.menu_actions.paste.text(), window.menu_actions.export.text()]
