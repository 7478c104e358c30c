"""Open the explorer on your own tensors from Python: ``attn_explorer.view(q, k, v)``.

As napari's ``view_image``: :func:`view` opens a window and returns a :class:`Viewer`
you keep driving (``result(stage)``, ``set_inputs(...)``, ``close()``). ``block=None``
blocks until the window is closed in a plain script, and returns at once inside
IPython or Jupyter, where ``%gui qt`` runs Qt's event loop beside the prompt (it is
switched on when it is off); ``block=False`` never blocks (call :func:`run` later to
keep the windows open in a script). See docs/guide/python-api.md.

Qt is imported inside the functions: ``import attn_explorer`` stays light, and the
inputs are checked (:mod:`attn_explorer.state.storage.tensor_inputs`) before any
window exists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from attn_explorer.compute import STAGES
from attn_explorer.state.app_state import AppState
from attn_explorer.state.session import Session
from attn_explorer.state.storage.tensor_inputs import ExplorerInputs, explorer_inputs

if TYPE_CHECKING:
    from attn_explorer.ui.window.main_window import MainWindow

__all__ = ["Viewer", "run", "view"]

#: What the window title and Edit ▸ Undo call numbers that came from Python.
SOURCE_NAME = "from Python"

_open_viewers: list[Viewer] = []


class Viewer:
    """One explorer window over your tensors; it keeps working after the window closes.

    ``result(stage)`` reads what the window shows, ``set_inputs`` replaces the numbers
    (the window follows at once), ``close()`` closes the window. ``state`` is the window's
    Qt-free state (session, results, stepper) for anything else.
    """

    def __init__(self, inputs: ExplorerInputs) -> None:
        session = Session(inputs.snapshot, inputs.options)
        self.state = AppState(session, name=SOURCE_NAME)
        self._inputs = inputs
        self.window: MainWindow | None = None

    # -- reading ------------------------------------------------------------------------
    @property
    def session(self) -> Session:
        return self.state.session

    @property
    def kv_heads(self) -> np.ndarray | None:
        """(H,): the key/value head each query head reads; None when none share."""
        heads = self._inputs.kv_heads
        return None if heads is None else heads.copy()

    @property
    def notes(self) -> tuple[str, ...]:
        """What was converted on the way in (float16 → float32, V = K, …)."""
        return self._inputs.notes

    def result(self, stage: str = "weights") -> np.ndarray:
        """A copy of the array the window shows for ``stage``: ``(B, H, T_q, T_k)`` for
        scores, scaled, masked and weights, ``(B, H, T, d)`` for output.

        Computed now if the window has not caught up yet; in the window's dtype
        (float32 when every input was float32 or narrower, else float64).
        """
        if stage not in STAGES:
            raise ValueError(f"stage: {stage!r} is not one of {', '.join(STAGES)}.")
        values = self.state.results.compute_now().stage(stage)
        assert values is not None  # the session always has V, so every stage exists
        return np.array(values)

    # -- driving ------------------------------------------------------------------------
    def set_inputs(
        self,
        query: object,
        key: object,
        value: object = None,
        *,
        tokens: Sequence[str] | None = None,
        causal: bool | None = None,
    ) -> None:
        """Replace the numbers (same rules as :func:`view`); the window shows them at once.

        ``causal=None`` keeps the window's choice, ``tokens=None`` the names (when T is
        unchanged). A refused input raises ``ValueError``
        and changes nothing. Undoable in the window (Edit ▸ Undo).
        """
        keep = self.session.options.causal if causal is None else causal
        inputs = explorer_inputs(query, key, value, tokens=tokens, causal=keep)
        if tokens is None and inputs.snapshot.shape[2] == self.session.shape[2]:
            named = replace(inputs.snapshot, tokens=tuple(self.session.tokens))
            inputs = replace(inputs, snapshot=named)  # the same T keeps its names
        options = self.session.options
        b, h, _, _ = inputs.snapshot.shape
        new = replace(
            options,
            causal=inputs.options.causal,
            dtype=inputs.options.dtype,
            head=min(options.head, h - 1),
            batch_index=min(options.batch_index, b - 1),
            step=-1,
        )
        problems: list[str] = []

        def remember(text: str, level: str) -> None:
            if level == "error":
                problems.append(text)

        self.session.events.message.connect(remember)
        try:
            loaded = self.state.document.replace(
                inputs.snapshot, new, "set inputs from Python", SOURCE_NAME
            )
        finally:
            self.session.events.message.disconnect(remember)
        if not loaded:
            raise ValueError(problems[-1] if problems else "the inputs were refused")
        self._inputs = inputs
        self._announce()

    def show(self) -> None:
        """Open (or bring back) the window."""
        from attn_explorer.render.qt_app import qt_application, use_offscreen_if_headless

        use_offscreen_if_headless()
        app = qt_application()
        if not app.applicationName() or app.applicationName() == "python":
            from attn_explorer.ui.common.settings import APPLICATION, ORGANIZATION

            app.setOrganizationName(ORGANIZATION)
            app.setApplicationName(APPLICATION)
        if self.window is None:
            from PySide6.QtCore import Qt

            from attn_explorer.ui.window.launch import prepare_interpreter
            from attn_explorer.ui.window.main_window import MainWindow

            prepare_interpreter()  # the GUI thread gets the GIL back quickly, as run_app does

            self.window = MainWindow(state=self.state, defer_plots=True)
            # Closed is gone: a closed window has stopped its timers and workers.
            window = self.window
            window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            window.destroyed.connect(lambda *_: self._forget_window(window))
            self._announce()
        self.window.show()
        if app.platformName() != "offscreen":  # which cannot raise a window (and says so)
            self.window.raise_()
        if self not in _open_viewers:
            _open_viewers.append(self)

    def close(self) -> None:
        """Close the window without asking (unsaved edits are kept for recovery, as at a
        crash); ``result`` and ``set_inputs`` still work on the numbers afterwards."""
        window = self.window
        if window is not None:
            window.files.ask_before_discard = False
            window.close()
            self._forget_window(window)

    @property
    def is_open(self) -> bool:
        """Whether the window is on screen (False once it is closed)."""
        window = self.window
        if window is None:
            return False
        try:
            return window.isVisible()
        except RuntimeError:  # deleted by Qt, its destroyed signal not yet delivered
            return False

    def wait(self) -> None:
        """Run Qt's event loop until this viewer's window is closed."""
        from PySide6.QtCore import QEventLoop, QTimer

        window = self.window
        if window is None or not window.isVisible():
            return
        loop = QEventLoop()
        poll = QTimer()  # closing hides the window; nothing else says so from outside
        poll.setInterval(50)
        poll.timeout.connect(lambda: loop.quit() if not self.is_open else None)
        poll.start()
        loop.exec()
        poll.stop()

    def _forget_window(self, window: MainWindow) -> None:
        """``window`` is gone: keep its numbers and options in a state of their own (the
        old state's events still call into the closed window's views)."""
        if self.window is not window:
            return
        self.window = None
        if self in _open_viewers:
            _open_viewers.remove(self)
        old = self.session
        session = Session(old.snapshot(), old.options)
        self.state = AppState(session, name=self.state.document.name)

    def _announce(self) -> None:
        """Say on the status bar what came in (shape, shared heads, conversions)."""
        b, h, t, d = self.session.shape
        parts = [f"Tensors from Python: B={b}, H={h}, T={t}, d={d}."]
        if self._inputs.sharing():
            parts.append(self._inputs.sharing())
        if self._inputs.notes:
            parts.append("; ".join(self._inputs.notes) + ".")
        self.session.report(" ".join(parts), "info")

    def __repr__(self) -> str:
        b, h, t, d = self.session.shape
        state = "open" if self.is_open else "closed"
        return f"<Viewer B={b} H={h} T={t} d={d} ({state})>"


def view(
    query: object,
    key: object,
    value: object = None,
    *,
    tokens: Sequence[str] | None = None,
    causal: bool = False,
    block: bool | None = None,
) -> Viewer:
    """Open the explorer on ``query``, ``key`` (and ``value``) and return its :class:`Viewer`.

    Arrays are ``(T, d)``, ``(H, T, d)`` or ``(B, H, T, d)``, anything ``np.asarray``
    accepts; key and value may have fewer heads when that number divides H (grouped-query).
    ``value=None`` uses the key. ``tokens`` names the rows; ``causal`` hides later keys.
    ``block``: None blocks in a plain script and not inside IPython / Jupyter (whose Qt
    event loop is switched on), nor without any display (the window is then offscreen);
    True blocks until the window is closed; False never blocks.
    Input over the window's limits raises ``ValueError`` naming the argument and its shape
    before anything is allocated or any window opens.
    """
    inputs = explorer_inputs(query, key, value, tokens=tokens, causal=causal)
    if block is not None and not isinstance(block, bool):
        raise ValueError(f"block: expected None, True or False, got {block!r}.")
    viewer = Viewer(inputs)
    ipython_loop = block is None and _ipython_qt_loop()
    had_platform = bool(os.environ.get("QT_QPA_PLATFORM"))
    viewer.show()
    # No display at all (a server, CI): the window was drawn offscreen, where nobody
    # could close it, so block=None must not wait for that.
    headless = not had_platform and os.environ.get("QT_QPA_PLATFORM") == "offscreen"
    if block or (block is None and not ipython_loop and not headless):
        viewer.wait()
    return viewer


def run() -> None:
    """Block until every window :func:`view` opened is closed (a script's last line)."""
    for viewer in list(_open_viewers):
        viewer.wait()


def _ipython_qt_loop() -> bool:
    """True inside IPython / Jupyter with Qt's event loop running beside the prompt,
    switching it on (``%gui qt``) if it is off; False in a plain script."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    if str(getattr(shell, "active_eventloop", "") or "").startswith("qt"):
        return True
    try:
        shell.enable_gui("qt")
    except Exception:  # no Qt integration for this front end: block as a script does
        return False
    return str(getattr(shell, "active_eventloop", "") or "").startswith("qt")
