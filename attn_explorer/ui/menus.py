"""The window's menus and the file side of it: open, save, examples, export, autosave.

Every file operation is a dialog that picks a path and a function (in
``state.io`` or ``ui.render``) that does the work; a failure is a clear message
and the open session is untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QMessageBox,
    QSpinBox,
)

from attn_explorer.compute import LIMITS, STAGES, STRATEGIES
from attn_explorer.state.io import (
    ExportError,
    SessionFileError,
    list_examples,
    load_example,
    load_session,
    save_session,
    session_json,
    snapshot_to_dict,
    write_atomic,
)
from attn_explorer.state.presets import PRESETS
from attn_explorer.ui.controls import STAGE_NAMES
from attn_explorer.ui.matrix_table import MatrixTable
from attn_explorer.ui.settings import data_dir, settings

if TYPE_CHECKING:
    from attn_explorer.ui.main_window import MainWindow

MAX_RECENT = 8
SESSION_FILTER = "Attention Explorer sessions (*.json);;All files (*)"
AUTOSAVE_NAME = "autosave.json"


def _add(
    window: MainWindow,
    menu: Any,
    text: str,
    slot: Callable[..., Any],
    shortcut: Any = None,
    tip: str = "",
    checkable: bool = False,
) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        if isinstance(shortcut, list):
            action.setShortcuts([QKeySequence(s) for s in shortcut])
        else:
            action.setShortcut(QKeySequence(shortcut))
    if tip:
        action.setToolTip(tip)
        action.setStatusTip(tip)
    action.setCheckable(checkable)
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def build_menus(w: MainWindow) -> None:
    """File, Edit, View, Presets, Timing and Help menus with their shortcuts."""
    bar = w.menuBar()
    s = w.session

    file = bar.addMenu("&File")
    _add(
        w,
        file,
        "&New session",
        partial(new_session, w),
        QKeySequence.StandardKey.New,
        "Start again from the worked example",
    )
    _add(
        w,
        file,
        "&Open…",
        partial(open_dialog, w),
        QKeySequence.StandardKey.Open,
        "Open a saved session (.json)",
    )
    w.recent_menu = file.addMenu("Open &Recent")
    w.recent_menu.aboutToShow.connect(partial(_fill_recent, w))
    examples = file.addMenu("E&xamples")
    for title, entry in list_examples():
        _add(
            w,
            examples,
            title,
            partial(open_example, w, entry),
            tip=f"Open the example {entry.name}",
        )
    file.addSeparator()
    _add(w, file, "&Save", partial(save, w), QKeySequence.StandardKey.Save, "Save the session")
    _add(
        w,
        file,
        "Save &As…",
        partial(save_as, w),
        QKeySequence.StandardKey.SaveAs,
        "Save the session under a new name",
    )
    file.addSeparator()
    _add(
        w,
        file,
        "&Export heatmap…",
        partial(export_dialog, w),
        "Ctrl+E",
        "Export the current head or all heads as PNG, SVG, CSV or NPZ",
    )
    file.addSeparator()
    _add(w, file, "&Quit", w.close, QKeySequence.StandardKey.Quit)

    edit = bar.addMenu("&Edit")
    w.undo_action = _add(w, edit, "&Undo", w.undo, QKeySequence.StandardKey.Undo)
    w.redo_action = _add(w, edit, "&Redo", w.redo, ["Ctrl+Shift+Z", "Ctrl+Y"])
    edit.addSeparator()
    _add(
        w,
        edit,
        "Add &token",
        lambda: s.insert_token(),
        "Ctrl+Shift+=",
        "Add a token (a row in Q, K and V)",
    )
    _add(
        w,
        edit,
        "Remove current token",
        partial(_remove_current_token, w),
        "Ctrl+Shift+-",
        "Remove the token of the selected row",
    )
    _add(
        w,
        edit,
        "Re&name current token…",
        partial(_rename_current_token, w),
        "F2",
        "Rename the token of the selected row",
    )

    def update_undo() -> None:
        w.undo_action.setEnabled(s.can_undo())
        w.redo_action.setEnabled(s.can_redo())
        w.undo_action.setText(f"&Undo {s.undo_text()}".rstrip())
        w.redo_action.setText(f"&Redo {s.redo_text()}".rstrip())

    s.events.undo_changed.connect(update_undo)
    update_undo()

    view = bar.addMenu("&View")
    strategies = QActionGroup(w)
    w.strategy_actions = {}
    for n, name in enumerate(STRATEGIES):
        action = _add(
            w, view, f"Strategy: {name}", partial(w.set_strategy, name), str(n + 1), checkable=True
        )
        strategies.addAction(action)
        w.strategy_actions[name] = action
    view.addSeparator()
    for n, name in enumerate(STAGES):
        _add(w, view, f"Stage: {STAGE_NAMES[name]}", partial(w.set_stage, name), f"Ctrl+{n + 1}")
    view.addSeparator()
    w.shared_action = _add(
        w, view, "Shared colour scale", lambda on: s.set_option("shared_scale", on), checkable=True
    )
    _add(w, view, "Enlarge current head / show all", partial(_toggle_enlarge, w), "F")
    w.dark_action = _add(w, view, "Dark palette", w.set_dark, checkable=True)
    view.addSeparator()
    for dock in w.findChildren(type(w.inputs_dock)):
        view.addAction(dock.toggleViewAction())

    def sync_checks(name: str = "all") -> None:
        w.strategy_actions[s.options.strategy].setChecked(True)
        w.shared_action.setChecked(s.options.shared_scale)

    s.events.options.connect(sync_checks)
    sync_checks()

    presets = bar.addMenu("&Presets")
    for name, make in PRESETS.items():
        if name == "random":
            _add(
                w,
                presets,
                "Random…",
                partial(random_dialog, w),
                tip="Seeded random Q, K, V of a size you choose",
            )
        else:
            p = make()
            _add(w, presets, p.title, partial(w.load_preset, name), tip=p.description)

    timing = bar.addMenu("&Timing")
    _add(w, timing, "&Time strategies", lambda: w.timing_panel.run_timing(False), "Ctrl+T")
    _add(w, timing, "&Scaling sweep", lambda: w.timing_panel.run_sweep(), "Ctrl+Shift+T")
    _add(w, timing, "Run loop &anyway", lambda: w.timing_panel.run_timing(True))
    _add(w, timing, "&Cancel", lambda: w.timing_panel.runner.cancel(), "Ctrl+.")

    step = bar.addMenu("&Step")
    stepper = w.stepper
    for action in (
        stepper.play_action,
        stepper.step_action,
        stepper.back_action,
        stepper.start_action,
        stepper.end_action,
        stepper.stop_action,
    ):
        step.addAction(action)

    model = bar.addMenu("&Model")
    _add(
        w,
        model,
        "Show &model view",
        w.open_model_view,
        "Ctrl+M",
        "Real attention of a BERT-family model, computed offline with numpy",
    )
    _add(
        w,
        model,
        "&Open model folder…",
        lambda: w.open_model_view()._on_open_clicked(),
        tip="A Hugging Face-layout folder: config.json, model.safetensors, vocab.txt",
    )

    w.help_menu = bar.addMenu("&Help")
    _add(w, w.help_menu, "&Keyboard shortcuts", partial(_show_shortcuts, w), "F1")
    _add(w, w.help_menu, "&About Attention Explorer", w.about)

    w.autosave_timer = QTimer(w)
    w.autosave_timer.setSingleShot(True)
    w.autosave_timer.setInterval(2000)
    w.autosave_timer.timeout.connect(partial(write_autosave, w))
    s.events.dirty.connect(lambda dirty: w.autosave_timer.start())
    s.events.values.connect(lambda matrix: w.autosave_timer.start())
    s.events.shape.connect(lambda: w.autosave_timer.start())


# -- edit helpers --------------------------------------------------------------------------------
def _focused_table(w: MainWindow) -> MatrixTable:
    focus = QApplication.focusWidget()
    while focus is not None and not isinstance(focus, MatrixTable):
        focus = focus.parentWidget()
    return focus if isinstance(focus, MatrixTable) else w.tables["query"]


def _remove_current_token(w: MainWindow) -> None:
    index = _focused_table(w).currentIndex()
    w.session.remove_token(index.row() if index.isValid() else w.session.shape[2] - 1)


def _rename_current_token(w: MainWindow) -> None:
    table = _focused_table(w)
    index = table.currentIndex()
    table.rename_token(index.row() if index.isValid() else 0)


def _toggle_enlarge(w: MainWindow) -> None:
    if w.heatmaps is not None:
        w.heatmaps.set_enlarged(None if w.heatmaps.enlarged is not None else w.session.options.head)


def _show_shortcuts(w: MainWindow) -> None:
    QMessageBox.information(
        w,
        "Keyboard shortcuts",
        "1 / 2 / 3 — strategy loop / matmul / batched\n"
        "Ctrl+1 … Ctrl+5 — stage scores / scaled / masked / weights / output\n"
        "Ctrl+Z / Ctrl+Shift+Z — undo / redo (edits, pastes, resizes, presets)\n"
        "Ctrl+C / Ctrl+V — copy / paste a block of numbers in a table\n"
        "Ctrl+Shift+= / Ctrl+Shift+- — add / remove a token; F2 — rename it\n"
        "Space, ← / →, Home / End — play, step, jump (stepper panel)\n"
        "F — enlarge the current head's heatmap; Ctrl+E — export heatmap\n"
        "Ctrl+T — time strategies; Ctrl+Shift+T — scaling sweep; Ctrl+. — cancel\n"
        "Ctrl+S / Ctrl+O — save / open a session",
    )


# -- sessions ---------------------------------------------------------------------------------
def confirm_discard(w: MainWindow) -> bool:
    """True if unsaved changes may be dropped (saved, discarded, or none)."""
    if not w.session.dirty or not w.ask_before_discard:
        return True
    answer = QMessageBox.question(
        w,
        "Unsaved changes",
        f"Save the changes to {w.session.name}?",
        QMessageBox.StandardButton.Save
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel,
    )
    if answer == QMessageBox.StandardButton.Save:
        return save(w)
    return answer == QMessageBox.StandardButton.Discard


def open_path(w: MainWindow, path: str) -> bool:
    """Load a session file; on any problem show why and keep the open session."""
    try:
        loaded = load_session(path)
    except SessionFileError as exc:
        w.statusBar().showMessage(f"Could not open: {exc}")
        return False
    if not w.session.load(loaded.snapshot, loaded.options, f"open {Path(path).name}"):
        return False
    w.session.name = loaded.name or Path(path).stem
    w.session.mark_saved(str(path))
    w.session.clear_history()
    _remember_recent(path)
    w.statusBar().showMessage(f"Opened {path}", 6000)
    return True


def open_dialog(w: MainWindow) -> None:
    if not confirm_discard(w):
        return
    path, _ = QFileDialog.getOpenFileName(w, "Open session", _last_dir(), SESSION_FILTER)
    if path and not open_path(w, path):
        QMessageBox.warning(w, "Could not open the session", w.statusBar().currentMessage())


def open_example(w: MainWindow, entry: Any) -> None:
    if not confirm_discard(w):
        return
    try:
        loaded = load_example(entry)
    except SessionFileError as exc:
        w.statusBar().showMessage(f"Could not open the example: {exc}")
        return
    if w.session.load(loaded.snapshot, loaded.options, f"open example {entry.name}"):
        w.session.name = loaded.name
        w.session.path = None
        w.statusBar().showMessage(f"Opened the example {entry.name}", 6000)


def new_session(w: MainWindow) -> None:
    if not confirm_discard(w):
        return
    w.load_preset("worked")
    w.session.name = "untitled"
    w.session.path = None
    w.session.mark_saved(None)
    w.session.path = None


def save_to(w: MainWindow, path: str) -> bool:
    try:
        save_session(w.session, path)
    except SessionFileError as exc:
        w.statusBar().showMessage(f"Could not save: {exc}")
        return False
    w.session.name = Path(path).stem
    w.session.mark_saved(str(path))
    _remember_recent(path)
    w._update_title()
    w.statusBar().showMessage(f"Saved {path}", 6000)
    return True


def save(w: MainWindow) -> bool:
    if w.session.path:
        return save_to(w, w.session.path)
    return save_as(w)


def save_as(w: MainWindow) -> bool:
    start = str(Path(_last_dir()) / f"{w.session.name or 'untitled'}.json")
    path, _ = QFileDialog.getSaveFileName(w, "Save session", start, SESSION_FILTER)
    if not path:
        return False
    if not path.endswith(".json"):
        path += ".json"
    ok = save_to(w, path)
    if not ok:
        QMessageBox.warning(w, "Could not save", w.statusBar().currentMessage())
    return ok


def _last_dir() -> str:
    return str(settings().value("last_dir", str(Path.home())))


def _remember_recent(path: str) -> None:
    s = settings()
    recent = [p for p in (s.value("recent", []) or []) if p != str(path)]
    s.setValue("recent", [str(path), *recent][:MAX_RECENT])
    s.setValue("last_dir", str(Path(path).parent))


def recent_files() -> list[str]:
    value = settings().value("recent", []) or []
    return [value] if isinstance(value, str) else list(value)


def _fill_recent(w: MainWindow) -> None:
    w.recent_menu.clear()
    files = recent_files()
    if not files:
        action = w.recent_menu.addAction("(no recent sessions)")
        action.setEnabled(False)
    for n, path in enumerate(files):
        w.recent_menu.addAction(f"&{n + 1} {path}", partial(_open_recent, w, path))


def _open_recent(w: MainWindow, path: str) -> None:
    if confirm_discard(w):
        open_path(w, path)


def autosave_path() -> Path:
    return data_dir() / AUTOSAVE_NAME


#: Sessions with more numbers than this are not autosaved (the JSON would be huge and slow).
AUTOSAVE_MAX_VALUES = 1_000_000
_autosave_lock = threading.Lock()


def write_autosave(w: MainWindow, final: bool = False) -> threading.Thread | None:
    """Keep a copy of the session in the app-data folder (restored on the next start).

    The numbers are copied here; the JSON is built and written in a background
    thread so typing never waits for it. Very large sessions are skipped with a note.
    """
    session = w.session
    b, h, t, d = session.shape
    if 3 * b * h * t * d > AUTOSAVE_MAX_VALUES:
        if not final:
            w.statusBar().showMessage(
                "Autosave is off for sessions this large; save with Ctrl+S to keep your work.", 6000
            )
        return None
    snapshot, options, name = session.snapshot(), session.options, session.name
    path = autosave_path()

    def work() -> None:
        with _autosave_lock:
            try:
                text = session_json(snapshot_to_dict(snapshot, options, name))
                write_atomic(path, text.encode("utf-8"))
            except (OSError, SessionFileError, ExportError):
                pass  # autosave is best effort; an explicit save reports its errors

    if final:
        work()
        return None
    thread = threading.Thread(target=work, name="autosave", daemon=True)
    thread.start()
    return thread


# -- presets and export dialogs ----------------------------------------------------------------
def _accepted(dialog: QDialog, form: QFormLayout) -> bool:
    """Add OK / Cancel to a form dialog, run it, and say whether the user pressed OK."""
    buttons = QDialogButtonBox(
        QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
    )
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    form.addRow(buttons)
    return dialog.exec() == QDialog.DialogCode.Accepted


def random_dialog(w: MainWindow) -> None:
    dialog = QDialog(w)
    dialog.setWindowTitle("Random preset")
    form = QFormLayout(dialog)
    b, h, t, d = w.session.shape
    spins = {}
    for label, value, limit in (
        ("B (batch)", b, LIMITS.max_batch),
        ("H (heads)", max(h, 4), LIMITS.max_heads),
        ("T (tokens)", max(t, 8), LIMITS.max_tokens),
        ("d (vector size)", max(d, 4), LIMITS.max_dim),
        ("seed", 0, 1_000_000),
    ):
        spin = QSpinBox()
        spin.setRange(0 if label == "seed" else 1, limit)
        spin.setValue(value)
        form.addRow(label, spin)
        spins[label] = spin
    if not _accepted(dialog, form):
        return
    values = [spins[k].value() for k in spins]
    problem = w.session.check_size(*values[:4])
    if problem:
        w.statusBar().showMessage(f"Random preset: {problem}; kept the current tables")
        return
    w.load_preset(
        "random", batch=values[0], heads=values[1], tokens=values[2], dim=values[3], seed=values[4]
    )


def export_heatmap(
    w: MainWindow, target: str, heads: str = "current", width: int = 1600, fmt: str | None = None
) -> list[Path]:
    """Export without dialogs; errors go to the status bar and return []."""
    from attn_explorer.ui.render import export_heatmaps

    try:
        paths = export_heatmaps(w.session, target, heads=heads, width=width, fmt=fmt)
    except ExportError as exc:
        w.statusBar().showMessage(f"Export failed: {exc}")
        return []
    w.statusBar().showMessage("Exported " + ", ".join(str(p) for p in paths), 8000)
    return paths


def export_dialog(w: MainWindow, heads: str | None = None) -> None:
    from attn_explorer.ui.render import default_filename

    dialog = QDialog(w)
    dialog.setWindowTitle("Export heatmap")
    form = QFormLayout(dialog)
    which = QComboBox()
    which.addItem("current head", "current")
    which.addItem("all heads as one montage", "montage")
    which.addItem("each head as its own file", "all")
    if heads is not None:
        which.setCurrentIndex(max(0, which.findData(heads)))
    fmt = QComboBox()
    for name in ("png", "svg", "csv", "npz"):
        fmt.addItem(name.upper(), name)
    width = QSpinBox()
    width.setRange(200, 8000)
    width.setValue(1600)
    width.setSuffix(" px")
    form.addRow("heads", which)
    form.addRow("format", fmt)
    form.addRow("width (PNG)", width)
    if not _accepted(dialog, form):
        return
    heads_value = which.currentData()
    ext = fmt.currentData()
    job = w.session.options.head if heads_value == "current" else "montage"
    name = default_filename(w.session, w.session.options.stage, job, ext)
    path, _ = QFileDialog.getSaveFileName(
        w, "Export heatmap", str(Path(_last_dir()) / name), f"{ext.upper()} (*.{ext})"
    )
    if not path:
        return
    if not export_heatmap(w, path, heads_value, width.value(), ext):
        QMessageBox.warning(w, "Export failed", w.statusBar().currentMessage())
