"""One list of shortcuts: the menus' actions, the F1 help and the keyboard page's table agree,
and every shortcut the README and the guide mention is one the window has."""

from __future__ import annotations

import re

import pytest
from docs_checks import ROOT, keys_of, shortcut_problems, shortcut_table

from attn_explorer.ui.window.actions import shortcut_rows

KEYBOARD_PAGE = ROOT / "docs" / "guide" / "keyboard.md"
#: The documents whose shortcuts must be the window's: the README and every guide page.
GUIDE = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]


def window_rows(window) -> list[tuple[str, str]]:
    return shortcut_rows([*window.menu_actions.all(), *window.stepper.transport_actions()])


def test_the_keyboard_pages_table_is_the_windows_shortcuts(window):
    expected = window_rows(window)
    table = "\n".join(f"| `{keys}` | {what} |" for keys, what in expected)
    rows = shortcut_table(KEYBOARD_PAGE.read_text(encoding="utf-8"))
    assert rows == expected, f"docs/guide/keyboard.md's table should read:\n{table}"


def test_every_shortcut_the_readme_and_the_guide_mention_is_the_windows(window):
    known = keys_of(window_rows(window), window.commands.shortcuts_text())
    problems = [
        problem
        for path in GUIDE
        for problem in shortcut_problems(path.name, path.read_text(encoding="utf-8"), known)
    ]
    assert problems == []


def test_a_shortcut_the_window_lost_is_reported(window):
    known = keys_of(window_rows(window), window.commands.shortcuts_text())
    assert "Ctrl+T" in known and "F6" in known and "Alt+4" in known
    page = "Press `Ctrl+T` to time, `Ctrl+Alt+T` to time faster, `F6` for the next panel."
    assert shortcut_problems("page.md", page, known) == [
        "page.md:1: `Ctrl+Alt+T` is not a shortcut of the window"
    ]


def test_f1_lists_every_shortcut_of_the_window(window):
    text = window.commands.shortcuts_text()
    for keys, what in window_rows(window):
        assert f"{keys} — {what}" in text
    assert "Alt+1" in text and "Escape" in text


def test_every_menu_action_is_declared_once_and_reachable_by_name(window):
    actions = window.menu_actions.all()
    assert len(actions) == len(set(map(id, actions)))
    in_menus = set()
    for menu in window.menus.values():
        in_menus.update(id(a) for a in menu.actions())
    missing = [a.text() for a in actions if id(a) not in in_menus]
    assert not missing, f"actions in no menu: {missing}"
    keys = [k for _, k in [(a, a.shortcut().toString()) for a in actions] if k]
    duplicates = {k for k in keys if keys.count(k) > 1}
    assert not duplicates, f"one shortcut, two actions: {duplicates}"


@pytest.mark.slow
def test_every_command_runs_when_triggered(qtbot, window):
    """QAction.trigger() passes ``checked`` to every slot; no handler may choke on it."""
    skipped = re.compile(r"^(&Quit|&Save)$|…$|Keyboard|About")  # dialogs: see the journeys
    ran = 0
    for action in window.menu_actions.all():
        if skipped.search(action.text()):
            continue
        action.trigger()
        ran += 1
    assert ran >= 30
    window.commands.cancel_timing()
    qtbot.waitUntil(lambda: not window.timing_panel.runner.is_busy(), timeout=20_000)
