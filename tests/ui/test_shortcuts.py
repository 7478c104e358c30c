"""One list of shortcuts: the menus' actions, the F1 help and the README's table agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attn_explorer.ui.window.actions import shortcut_rows

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_rows() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Keyboard shortcuts", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1]))
    return rows


def window_rows(window) -> list[tuple[str, str]]:
    return shortcut_rows([*window.menu_actions.all(), *window.stepper.transport_actions()])


def test_readme_table_is_the_windows_shortcuts(window):
    expected = window_rows(window)
    table = "\n".join(f"| `{keys}` | {what} |" for keys, what in expected)
    assert readme_rows() == expected, f"README's table should read:\n{table}"


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
