"""Issue 28 item 1: ``attn_explorer.view(query, key, value)`` from a plain Python script.

Each check runs a script in a fresh interpreter (offscreen, its own settings), as a user's
script would: the window's ``result("weights")`` against an independent numpy reference for
every accepted shape and array-like, grouped-query keys, ``block`` (returns at once, or waits
for the window), ``set_inputs`` and refusals before any allocation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The script's own attention, written from the formula, sharing nothing with the app.
REFERENCE = """
import numpy as np

def reference(q, k, v=None, causal=False):
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    v = k if v is None else np.asarray(v, dtype=np.float64)
    while q.ndim < 4:
        q = q[None]
    while k.ndim < 4:
        k = k[None]
    while v.ndim < 4:
        v = v[None]
    b, h, t, d = q.shape
    group = h // k.shape[1]
    weights = np.zeros((b, h, t, t))
    output = np.zeros((b, h, t, v.shape[-1]))
    for bi in range(b):
        for hi in range(h):
            kk, vv = k[bi, hi // group], v[bi, hi // group]
            for i in range(t):
                row = [sum(q[bi, hi, i, c] * kk[j, c] for c in range(d)) / d ** 0.5
                       for j in range(t)]
                seen = [j for j in range(t) if not causal or j <= i]
                top = max(row[j] for j in seen)
                exp = {j: np.exp(row[j] - top) for j in seen}
                total = sum(exp.values())
                for j in seen:
                    weights[bi, hi, i, j] = exp[j] / total
            output[bi, hi] = weights[bi, hi] @ vv
    return weights, output
"""


def run_script(tmp_path: Path, body: str, timeout: float = 120, display: bool = True) -> dict:
    """Run ``body`` (after the reference) in a fresh offscreen Python; return its JSON line.

    ``display=False`` runs it as on a machine without any display (no platform chosen)."""
    script = tmp_path / "script.py"
    script.write_text(REFERENCE + textwrap.dedent(body), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "QT_QPA_PLATFORM": "offscreen",
        "ATTN_EXPLORER_SETTINGS_DIR": str(tmp_path / "settings"),
        "ATTN_EXPLORER_DATA_DIR": str(tmp_path / "data"),
    }
    if not display:
        for name in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
            env.pop(name, None)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_accepted_shape_and_array_like_shows_the_reference_weights(tmp_path):
    out = run_script(
        tmp_path,
        """
        import json
        import attn_explorer

        rng = np.random.default_rng(28)

        class OnlyArray:  # what a jax array or torch tensor offers numpy, and nothing else
            def __init__(self, values):
                self._values = values
            def __array__(self, dtype=None, copy=None):
                return self._values if dtype is None else self._values.astype(dtype)

        def r(*shape, dtype=np.float64):
            return rng.standard_normal(shape).astype(dtype)

        cases = {
            "(T, d)": (r(4, 3), r(4, 3), r(4, 3), {}),
            "(H, T, d)": (r(2, 5, 4), r(2, 5, 4), r(2, 5, 4), {}),
            "(B, H, T, d)": (r(2, 3, 4, 2), r(2, 3, 4, 2), r(2, 3, 4, 2), {}),
            "float32": (r(2, 4, 3, dtype=np.float32),) * 3 + ({},),
            "__array__ only": (OnlyArray(r(3, 6, 4)), OnlyArray(r(3, 6, 4)),
                               OnlyArray(r(3, 6, 4)), {}),
            "nested lists": ([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],) * 2 + (None, {}),
            "float16": (r(4, 3, dtype=np.float16), r(4, 3, dtype=np.float16), None, {}),
            "causal": (r(1, 2, 5, 3), r(1, 2, 5, 3), r(1, 2, 5, 3), {"causal": True}),
            "GQA 3 of 9": (r(9, 6, 4), r(3, 6, 4), r(3, 6, 4), {}),
            "GQA batch": (r(2, 4, 5, 3), r(2, 2, 5, 3), None, {"causal": True}),
        }
        report = {}
        for name, (q, k, v, extra) in cases.items():
            viewer = attn_explorer.view(q, k, v, block=False, **extra)
            # the reference sees the numbers the user passed (float16 widened exactly)
            plain = [None if a is None else np.asarray(a, dtype=np.float64) for a in (q, k, v)]
            weights, output = reference(*plain, causal=extra.get("causal", False))
            shown = viewer.result("weights")
            report[name] = {
                "shape": list(shown.shape),
                "dtype": str(shown.dtype),
                "weights": float(np.max(np.abs(shown - weights))),
                "output": float(np.max(np.abs(viewer.result("output") - output))),
                "heads": viewer.session.shape[1],
                "kv_heads": None if viewer.kv_heads is None else viewer.kv_heads.tolist(),
                "notes": list(viewer.notes),
                "status": viewer.window.statusBar().currentMessage(),
            }
            viewer.close()
        print(json.dumps(report))
        """,
    )
    for name, case in out.items():
        tolerance = 1e-5 if case["dtype"] == "float32" else 1e-12
        assert case["weights"] <= tolerance, (name, case)
        assert case["output"] <= tolerance * 10, (name, case)
    assert out["(T, d)"]["shape"] == [1, 1, 4, 4]
    assert out["(H, T, d)"]["shape"] == [1, 2, 5, 5]
    assert out["(B, H, T, d)"]["shape"] == [2, 3, 4, 4]
    assert out["__array__ only"]["shape"] == [1, 3, 6, 6]
    assert out["float32"]["dtype"] == "float32" and out["(T, d)"]["dtype"] == "float64"
    assert out["float16"]["dtype"] == "float32"
    assert "query: float16 converted to float32" in out["float16"]["notes"]
    assert "float16 converted to float32" in out["float16"]["status"]
    gqa = out["GQA 3 of 9"]
    assert gqa["shape"] == [1, 9, 6, 6] and gqa["heads"] == 9
    assert gqa["kv_heads"] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert "9 query heads share 3 key/value heads" in gqa["status"]
    assert out["GQA batch"]["kv_heads"] == [0, 0, 1, 1]
    assert out["(B, H, T, d)"]["kv_heads"] is None


def test_block_false_returns_at_once_and_block_none_waits_for_the_window(tmp_path):
    out = run_script(
        tmp_path,
        """
        import json, time
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        import attn_explorer

        app = QApplication([])
        ticks = []
        QTimer.singleShot(0, lambda: ticks.append("loop ran"))
        start = time.perf_counter()
        free = attn_explorer.view(np.eye(3), np.eye(3), block=False)
        returned = time.perf_counter() - start
        ran_during_view = bool(ticks)
        visible = free.is_open
        free.close()

        closed = []

        def close_windows():
            closed.append(True)
            for widget in QApplication.topLevelWidgets():
                if widget.isVisible() and widget.isWindow():
                    widget.close()

        QTimer.singleShot(400, close_windows)
        start = time.perf_counter()
        waited = attn_explorer.view(np.eye(2), np.eye(2))  # block=None in a plain script
        blocked = time.perf_counter() - start
        closed_before_return = bool(closed)  # view() returned only after the timer closed it
        after = waited.result("weights").tolist()
        print(json.dumps({"returned": returned, "loop_during_free_view": ran_during_view,
                          "visible": visible, "blocked": blocked, "open_after": waited.is_open,
                          "closed_before_return": closed_before_return,
                          "weights_after_close": after}))
        """,
    )
    assert out["visible"]
    assert not out["loop_during_free_view"], "view(block=False) ran the event loop"
    assert out["returned"] < 30
    assert out["closed_before_return"], "view() in a plain script returned before the window closed"
    assert out["blocked"] >= 0.3  # the timer's 400 ms, less Qt's coarse timers' 5 %
    assert not out["open_after"]
    e = np.exp(1 / np.sqrt(2))
    np.testing.assert_allclose(
        out["weights_after_close"], [[[[e / (e + 1), 1 / (e + 1)], [1 / (e + 1), e / (e + 1)]]]]
    )


def test_set_inputs_updates_the_window_and_a_refusal_keeps_it(tmp_path):
    out = run_script(
        tmp_path,
        """
        import json
        import attn_explorer
        from PySide6.QtWidgets import QApplication

        rng = np.random.default_rng(5)
        q, k = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
        viewer = attn_explorer.view(q, k, block=False)
        q2, k2, v2 = (rng.standard_normal((3, 6, 2)) for _ in range(3))
        viewer.set_inputs(q2, k2, v2, tokens=list("abcdef"), causal=True)
        for _ in range(20):
            QApplication.processEvents()
        weights, _ = reference(q2, k2, v2, causal=True)
        grid = viewer.window.score_grid.model.values
        shown = viewer.result("weights")
        try:
            viewer.set_inputs(q2, k2[:, :5])
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        title, after = viewer.window.windowTitle(), viewer.session.shape
        still = float(np.max(np.abs(viewer.result("weights") - weights)))
        stage, tokens = viewer.session.options.stage, viewer.session.tokens
        viewer.close()
        q3 = rng.standard_normal((2, 3, 2))
        viewer.set_inputs(q3, q3)  # closed: the numbers still change, for the next show()
        closed_weights = viewer.result("weights")
        viewer.show()
        for _ in range(20):
            QApplication.processEvents()
        reopened = {"open": viewer.is_open, "shape": viewer.window.session.shape,
                    "diff": float(np.max(np.abs(closed_weights
                                                - reference(q3, q3, causal=True)[0]))),
                    "grid": float(np.max(np.abs(viewer.window.score_grid.model.values
                                                - closed_weights[0, 0])))}
        viewer.close()
        print(json.dumps({
            "reopened": reopened, "shape": shown.shape, "tokens": tokens,
            "diff": float(np.max(np.abs(shown - weights))),
            "grid": float(np.max(np.abs(grid - weights[0, 0]))),
            "stage": stage, "title": title, "refused": refused, "after": after, "still": still,
        }))
        """,
    )
    assert out["shape"] == [1, 3, 6, 6] and out["tokens"] == list("abcdef")
    assert out["diff"] < 1e-12 and out["stage"] == "weights"
    assert out["grid"] < 1e-12, "the score grid does not show result('weights')"
    assert out["title"].startswith("from Python")
    assert out["refused"].startswith("key: shape (1, 3, 5, 2) has T = 5 tokens")
    assert out["after"] == [1, 3, 6, 2] and out["still"] < 1e-12
    reopened = out["reopened"]
    assert reopened["open"] and reopened["shape"] == [1, 2, 3, 2]
    assert reopened["diff"] < 1e-12 and reopened["grid"] < 1e-12


def test_inputs_over_the_limits_are_refused_by_name_before_allocation(tmp_path):
    out = run_script(
        tmp_path,
        """
        import json, sys
        import attn_explorer

        class Huge:  # each size within its limit, but converting it would allocate 4 GB
            shape = (8, 64, 4096, 512)
            dtype = "float32"
            def __array__(self, dtype=None, copy=None):
                raise AssertionError("converted before the shape was checked")

        messages = {}
        for name, call in {
            "huge query": lambda: attn_explorer.view(Huge(), np.zeros((4, 2))),
            "huge key": lambda: attn_explorer.view(np.zeros((4, 2)), Huge()),
            "huge value": lambda: attn_explorer.view(np.zeros((4, 2)), np.zeros((4, 2)), Huge()),
            "too many heads": lambda: attn_explorer.view(np.zeros((65, 4, 2)),
                                                         np.zeros((65, 4, 2))),
            "GQA 2 of 9": lambda: attn_explorer.view(np.zeros((9, 4, 2)), np.zeros((2, 4, 2))),
            "5 dims": lambda: attn_explorer.view(np.zeros((1, 1, 1, 4, 2)), np.zeros((4, 2))),
            "NaN": lambda: attn_explorer.view([[float("nan"), 0.0]], [[0.0, 0.0]]),
            "tokens": lambda: attn_explorer.view(np.eye(3), np.eye(3), tokens=["a", "b"]),
            "text": lambda: attn_explorer.view("abc", np.eye(3)),
        }.items():
            try:
                call()
                messages[name] = None
            except ValueError as exc:
                messages[name] = str(exc)
        messages["qt imported"] = "PySide6" in sys.modules
        print(json.dumps(messages))
        """,
    )
    assert out["huge query"].startswith(
        "query: shape (8, 64, 4096, 512) holds 1,073,741,824 values, over the limit of 67,108,864"
    ), out["huge query"]
    assert out["huge key"].startswith("key: shape (8, 64, 4096, 512) holds")
    assert out["huge value"].startswith("value: shape (8, 64, 4096, 512) holds")
    assert out["too many heads"].startswith("query: number of heads H = 65 is over the limit")
    assert "(65, 4, 2)" in out["too many heads"]
    assert out["GQA 2 of 9"].startswith("key: shape (1, 2, 4, 2) has 2 heads, which does not")
    assert "(1, 3 or 9)" not in out["GQA 2 of 9"] and "1, 3, 9" in out["GQA 2 of 9"]
    assert out["5 dims"].startswith("query: shape (1, 1, 1, 4, 2) has 5 dimension(s)")
    assert out["NaN"].startswith("query: entry [0, 0] is nan")
    assert out["tokens"] == "tokens: 2 names for T = 3 tokens; give 3."
    assert out["text"].startswith("query: ")
    assert out["qt imported"] is False, "a refused input opened Qt before refusing"


def test_a_bfloat16_tensor_without_numpy_support_is_converted_with_a_note():
    from attn_explorer.state.storage.tensor_inputs import explorer_inputs

    class TorchLikeBF16:  # torch's bfloat16: numpy cannot convert it, .float() can
        shape = (2, 3)
        dtype = "torch.bfloat16"

        def __init__(self, values):
            self.values = values

        def __array__(self, dtype=None, copy=None):
            raise TypeError("Got unsupported ScalarType BFloat16")

        def float(self):
            return self.values.astype(np.float32)

    values = np.array([[1.0, 0.5, -2.0], [0.25, 3.0, 1.0]], dtype=np.float32)
    inputs = explorer_inputs(TorchLikeBF16(values), values)
    assert inputs.options.dtype == "float32"
    assert "query: bfloat16 converted to float32" in inputs.notes
    np.testing.assert_array_equal(inputs.snapshot.query[0, 0], values)


def test_block_none_inside_ipython_with_a_qt_loop_does_not_block(monkeypatch):
    from attn_explorer import api

    class Shell:
        def __init__(self, loop):
            self.active_eventloop = loop
            self.enabled = []

        def enable_gui(self, gui):
            self.enabled.append(gui)
            self.active_eventloop = gui

    fake = types.ModuleType("IPython")
    running = Shell("qt")
    fake.get_ipython = lambda: running
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert api._ipython_qt_loop() is True and running.enabled == []
    off = Shell(None)  # IPython without %gui qt: switched on, as napari does
    fake.get_ipython = lambda: off
    assert api._ipython_qt_loop() is True and off.enabled == ["qt"]
    fake.get_ipython = lambda: None  # IPython imported, but this is a plain script
    assert api._ipython_qt_loop() is False
    monkeypatch.delitem(sys.modules, "IPython")
    assert api._ipython_qt_loop() is False


def test_import_attn_explorer_imports_neither_numpy_nor_qt():
    code = (
        "import sys, attn_explorer; "
        "print(sorted(m for m in ('numpy', 'PySide6', 'typing') if m in sys.modules)); "
        "print(callable(attn_explorer.view), 'numpy' in sys.modules, 'PySide6' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["[]", "True True False"]


@pytest.mark.parametrize("name", ["Viewer", "run", "view"])
def test_the_api_names_are_exported(name):
    import attn_explorer

    assert name in dir(attn_explorer) and name in attn_explorer.__all__


def test_the_guides_first_example_runs_as_written(tmp_path):
    page = (ROOT / "docs" / "guide" / "python-api.md").read_text(encoding="utf-8")
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(example.strip().splitlines()) <= 10
    assert "causal=True)" in example
    body = example.replace("causal=True)", "causal=True, block=False)")  # a test cannot wait
    out = run_script(
        tmp_path,
        body
        + textwrap.dedent(
            """
            import json
            shown = viewer.result("weights")
            weights, _ = reference(q * 2, k, causal=True)
            print(json.dumps({"shape": shown.shape, "tokens": viewer.session.tokens,
                              "diff": float(np.max(np.abs(shown - weights)))}))
            """
        ),
    )
    assert out["shape"] == [2, 9, 6, 6]
    assert out["tokens"] == ["The", "cat", "sat", "on", "the", "mat"]
    assert out["diff"] < 1e-12


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux display detection")
def test_without_any_display_view_does_not_wait_for_a_window_nobody_can_close(tmp_path):
    out = run_script(
        tmp_path,
        """
        import json, os
        import attn_explorer
        viewer = attn_explorer.view(np.eye(2), np.eye(2))  # block=None, on a server
        print(json.dumps({"platform": os.environ.get("QT_QPA_PLATFORM"),
                          "open": viewer.is_open}))
        """,
        timeout=60,
        display=False,
    )
    assert out == {"platform": "offscreen", "open": True}
