"""Every command of the window, declared once as a QAction, and the menu bar built from them.

:class:`WindowActions` names each command as an attribute (``actions.save``,
``actions.strategies["loop"]``), so tests and lessons reach them by name and the
menus, the shortcut help (F1) and the README's shortcut table all read the same
objects. A non-checkable action calls its slot with no arguments: Qt's
``triggered(bool)`` never reaches a handler that expects something else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

from attn_explorer.compute import STAGES, STRATEGIES
from attn_explorer.state.labels import STAGE_NAMES
from attn_explorer.state.presets import PRESET_TEXT, PRESETS
from attn_explorer.state.storage.examples import list_examples

if TYPE_CHECKING:
    from attn_explorer.lessons.window import WindowCommands
    from attn_explorer.state.session import Session
    from attn_explorer.ui.window.file_commands import FileCommands

Shortcut = str | QKeySequence.StandardKey | Sequence[str] | None

#: QAction properties read by :func:`shortcut_rows`.
HELP_TEXT = "helpText"
PRIMARY_ONLY = "helpPrimaryKeyOnly"
#: Keys that work while a table has the keyboard (Alt+1…3) beside the bare 1…3.
STRATEGY_KEYS = {name: (str(n + 1), f"Alt+{n + 1}") for n, name in enumerate(STRATEGIES)}


def plain(text: str) -> str:
    """A menu text as the user reads it: ``&Save…`` → ``Save…``."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def _open_tensors(files: FileCommands) -> None:
    """File > Open tensors…: its dialog module (and the tensor file readers) load when used,
    not at the window's start (the first paint does not need them)."""
    from attn_explorer.ui.window.open_tensors import open_tensors_dialog

    open_tensors_dialog(files)


class WindowActions(QObject):
    """The window's commands, one attribute each (see the module docstring).

    Each action calls ``commands`` (the window's command layer, typed by its Protocol),
    ``files`` (open, save, presets) or ``session`` (undo, redo, tokens, options); the
    actions belong to ``host``, so their shortcuts work even while the menu bar is hidden.
    """

    # Every command, by menu (see the _*_actions builders).
    new_session: QAction
    open: QAction
    open_tensors: QAction
    examples: dict[str, QAction]
    save: QAction
    save_as: QAction
    export: QAction
    quit: QAction
    undo: QAction
    redo: QAction
    copy: QAction
    paste: QAction
    add_token: QAction
    remove_token: QAction
    rename_token: QAction
    strategies: dict[str, QAction]
    stages: dict[str, QAction]
    shared_scale: QAction
    enlarge: QAction
    dark: QAction
    vectors: QAction
    presets: dict[str, QAction]
    time_strategies: QAction
    sweep: QAction
    run_loop: QAction
    cancel_timing: QAction
    model_view: QAction
    open_model: QAction
    open_model_file: QAction
    lessons: QAction
    shortcuts: QAction
    about: QAction

    def __init__(
        self, host: QWidget, commands: WindowCommands, files: FileCommands, session: Session
    ) -> None:
        super().__init__(host)
        self.host = host
        self.commands = commands
        self.files = files
        self.session = session
        for build in (
            self._file_actions,
            self._edit_actions,
            self._view_actions,
            self._presets_actions,
            self._timing_actions,
            self._model_actions,
            self._help_actions,
        ):
            build()
        session.events.undo_changed.connect(self._sync_undo)
        session.events.options.connect(self._sync_checks)
        self._sync_undo()
        self._sync_checks()

    def _file_actions(self) -> None:
        files = self.files
        w = self.commands
        act = self._action
        self.new_session = act(
            "&New session", files.new_session, QKeySequence.StandardKey.New,
            "Start again from the worked example (untitled)",
        )  # fmt: skip
        self.open = act(
            "&Open…", files.open_dialog, QKeySequence.StandardKey.Open,
            "Open a saved session (.json)",
        )  # fmt: skip
        self.open_tensors = act(
            "Open &tensors…", partial(_open_tensors, files), None,
            "Open your own query, key and value arrays (.npz, .npy, .safetensors)",
        )  # fmt: skip
        self.examples = {
            entry.name: act(title, partial(files.open_example, entry), None,
                            f"Open the example {entry.name} (untitled)")
            for title, entry in list_examples()
        }  # fmt: skip
        self.save = act(
            "&Save", files.save, QKeySequence.StandardKey.Save,
            "Save to the session's file (asks where if it has none)",
        )  # fmt: skip
        self.save_as = act(
            "Save &As…", files.save_as, QKeySequence.StandardKey.SaveAs,
            "Save the session under a new name",
        )  # fmt: skip
        self.export = act(
            "&Export heatmap…", w.export_dialog, "Ctrl+E",
            "Export the current head or all heads as PNG, SVG, CSV or NPZ",
        )  # fmt: skip
        # Not StandardKey.Quit: it is empty on desktops without a platform theme.
        self.quit = act("&Quit", w.quit, "Ctrl+Q", "Close the window")

    def _edit_actions(self) -> None:
        w = self.commands
        session = self.session
        act = self._action
        self.undo = act(
            "&Undo", session.undo, QKeySequence.StandardKey.Undo, "Undo the last change"
        )
        self.redo = act("&Redo", session.redo, ("Ctrl+Shift+Z", "Ctrl+Y"), "Redo")
        self.copy = act(
            "&Copy", w.copy_cells, QKeySequence.StandardKey.Copy,
            "Copy the selected cells of the focused table (tab-separated, full precision)",
        )  # fmt: skip
        self.paste = act(
            "&Paste", w.paste_cells, QKeySequence.StandardKey.Paste,
            "Paste a block of numbers at the current cell of the focused table",
        )  # fmt: skip
        self.add_token = act(
            "Add &token", lambda: session.insert_token(), "Ctrl+Shift+=",
            "Add a token (a row in Q, K and V)",
        )  # fmt: skip
        self.remove_token = act(
            "Remove current token", w.remove_current_token, "Ctrl+Shift+-",
            "Remove the token of the selected row",
        )  # fmt: skip
        self.rename_token = act(
            "Re&name current token…", w.rename_current_token, "F2",
            "Rename the token of the selected row",
        )  # fmt: skip

    def _view_actions(self) -> None:
        w = self.commands
        session = self.session
        act = self._action
        group = QActionGroup(self)
        self.strategies = {}
        for name in STRATEGIES:
            action = act(
                f"Strategy: {name}", partial(w.set_strategy, name), STRATEGY_KEYS[name],
                f"Compute with {name} (Alt+{STRATEGIES.index(name) + 1} works while typing)",
                checkable=True,
            )  # fmt: skip
            group.addAction(action)
            self.strategies[name] = action
        self.stages = {
            name: act(f"Stage: {STAGE_NAMES[name]}", partial(w.set_stage, name),
                      f"Ctrl+{n + 1}", f"Show {STAGE_NAMES[name]}")
            for n, name in enumerate(STAGES)
        }  # fmt: skip
        self.shared_scale = act(
            "Shared colour scale", lambda on: session.set_option("shared_scale", on), None,
            "One colour scale for every head", checkable=True,
        )  # fmt: skip
        self.enlarge = act(
            "Enlarge current head / show all", w.toggle_enlarge, "F",
            "Show the current head's heatmap large, or every head",
        )  # fmt: skip
        self.dark = act("Dark palette", w.set_dark, None, "Dark window colours", checkable=True)
        self.vectors = act(
            "Show &vectors view", w.open_vectors_view, "F4",
            "Queries and keys as arrows: see and drag the dot product",
        )  # fmt: skip

    def _presets_actions(self) -> None:
        files = self.files
        w = self.commands
        act = self._action
        self.presets = {}
        for name in PRESETS:
            if name == "random":
                self.presets[name] = act(
                    "Random…", w.random_preset_dialog, None,
                    "Seeded random Q, K, V of a size you choose",
                )  # fmt: skip
            else:
                title, description = PRESET_TEXT[name]
                self.presets[name] = act(title, partial(files.load_preset, name), None, description)

    def _timing_actions(self) -> None:
        w = self.commands
        act = self._action
        self.time_strategies = act(
            "&Time strategies", w.run_timing, "Ctrl+T",
            "Time loop, matmul and batched on the current shape",
        )  # fmt: skip
        self.sweep = act(
            "&Scaling sweep", w.run_sweep, "Ctrl+Shift+T", "Time every strategy for T = 4 … 1024"
        )
        self.run_loop = act(
            "Run loop &anyway", partial(w.run_timing, True), None,
            "Really run the loop strategy even if it is predicted to be slow",
        )  # fmt: skip
        self.cancel_timing = act("&Cancel timing", w.cancel_timing, "Ctrl+.", "Stop the timing")

    def _model_actions(self) -> None:
        w = self.commands
        act = self._action
        self.model_view = act(
            "Show &model view", w.open_model_view, "Ctrl+M",
            "Real attention of a BERT encoder or a GGUF decoder, computed offline with numpy",
        )  # fmt: skip
        self.open_model = act(
            "&Open model folder…", w.open_model_folder, None,
            "A Hugging Face-layout folder: config.json, model.safetensors, vocab.txt",
        )  # fmt: skip
        self.open_model_file = act(
            "Open model &file…", w.open_model_file, None,
            "A .gguf decoder file (llama.cpp, Ollama, LM Studio), e.g. SmolLM2",
        )  # fmt: skip

    def _help_actions(self) -> None:
        w = self.commands
        act = self._action
        self.lessons = act(
            "&Lessons", w.open_lessons, "F3",
            "Guided lessons: the article, step by step in this window",
        )  # fmt: skip
        self.shortcuts = act(
            "&Keyboard shortcuts", w.show_shortcuts, "F1", "Every keyboard shortcut"
        )
        self.about = act("&About Attention Explorer", w.about, None, "Version and licence")

    def _action(
        self,
        text: str,
        slot: Callable[..., Any],
        shortcut: Shortcut,
        tip: str,
        *,
        checkable: bool = False,
    ) -> QAction:
        action = QAction(text, self.host)
        action.setProperty(HELP_TEXT, plain(text))  # the menu text may change (Undo edit Q)
        if isinstance(shortcut, QKeySequence.StandardKey):
            action.setShortcuts(shortcut)
            action.setProperty(PRIMARY_ONLY, True)  # the platform's alternates are noise in help
        elif isinstance(shortcut, str):
            action.setShortcut(QKeySequence(shortcut))
        elif shortcut is not None:
            action.setShortcuts([QKeySequence(key) for key in shortcut])
        action.setToolTip(tip)
        action.setStatusTip(tip)
        action.setCheckable(checkable)
        if checkable:
            action.triggered.connect(slot)  # a toggle: its slot takes the new state
        else:
            action.triggered.connect(lambda _checked=False: slot())
        self.host.addAction(action)  # shortcuts work even while the menu bar is hidden
        return action

    # -- following the session -------------------------------------------------------------
    def _sync_undo(self) -> None:
        s = self.session
        self.undo.setEnabled(s.can_undo())
        self.redo.setEnabled(s.can_redo())
        self.undo.setText(f"&Undo {s.undo_text()}".rstrip())
        self.redo.setText(f"&Redo {s.redo_text()}".rstrip())

    def _sync_checks(self, name: str = "all") -> None:
        options = self.session.options
        self.strategies[options.strategy].setChecked(True)
        self.shared_scale.setChecked(options.shared_scale)

    # -- reading ---------------------------------------------------------------------------------
    def all(self) -> list[QAction]:
        """Every action, in declaration order."""
        found: list[QAction] = []
        for value in vars(self).values():
            items = value.values() if isinstance(value, dict) else [value]
            found.extend(item for item in items if isinstance(item, QAction))
        return found


def build_menu_bar(
    bar: QMenuBar, actions: WindowActions, extra: dict[str, list[QAction]]
) -> dict[str, QMenu]:
    """Lay the actions out in File, Edit, View, Presets, Timing, Step, Model and Help.

    ``extra`` adds actions owned elsewhere to a menu (the stepper's to Step, the
    docks' show/hide toggles to View). Returns the menus by their plain title.
    """
    a = actions
    menus: dict[str, QMenu] = {}

    def menu(title: str, items: Sequence[QAction | QMenu | None]) -> QMenu:
        m = bar.addMenu(title)
        for item in items:
            if item is None:
                m.addSeparator()
            elif isinstance(item, QMenu):
                m.addMenu(item)
            else:
                m.addAction(item)
        menus[plain(title)] = m
        return m

    recent = QMenu("Open &Recent", bar)
    recent.aboutToShow.connect(lambda: a.files.fill_recent_menu(recent))
    examples = QMenu("E&xamples", bar)
    examples.addActions(list(a.examples.values()))
    menu("&File", [a.new_session, a.open, a.open_tensors, recent, examples, None, a.save,
                   a.save_as, None, a.export, None, a.quit])  # fmt: skip
    menu("&Edit", [a.undo, a.redo, None, a.copy, a.paste, None, a.add_token, a.remove_token,
                   a.rename_token])  # fmt: skip
    menu("&View", [*a.strategies.values(), None, *a.stages.values(), None, a.shared_scale,
                   a.enlarge, a.dark, None, a.vectors, *extra.get("View", [])])  # fmt: skip
    menu("&Presets", list(a.presets.values()))
    menu("&Timing", [a.time_strategies, a.sweep, a.run_loop, a.cancel_timing])
    menu("&Step", extra.get("Step", []))
    menu("&Model", [a.model_view, a.open_model, a.open_model_file])
    menu("&Help", [a.lessons, None, a.shortcuts, a.about])
    menus["Open Recent"], menus["Examples"] = recent, examples
    return menus


def shortcut_rows(actions: Sequence[QAction]) -> list[tuple[str, str]]:
    """(keys, what) for every action with a shortcut: the F1 help and the README's table.

    An action's ``helpText`` property, if set, names it (menu texts may change).
    """
    rows = []
    for action in actions:
        sequences = action.shortcuts()[:1] if action.property(PRIMARY_ONLY) else action.shortcuts()
        keys = [k.toString(QKeySequence.SequenceFormat.PortableText) for k in sequences]
        keys = [k for k in keys if k]
        if keys:
            rows.append((" / ".join(keys), action.property(HELP_TEXT) or plain(action.text())))
    return rows
