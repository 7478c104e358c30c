"""Issue 28 item 2: File ▸ Open tensors… through the user's hands.

A .npz with q, k, v opens at once; ambiguous names go through the mapping dialog (and the
choice is offered again next time); a .safetensors file with grouped keys; a pickled .npy and
a header claiming 4 GB are refused with one message, the session as it was.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QDialogButtonBox, QLabel, QMessageBox

from attn_explorer.models.formats.safetensors import save_safetensors
from attn_explorer.ui.window.open_tensors import NO_VALUE, MappingDialog

pytestmark = pytest.mark.journey

CTRL = Qt.KeyboardModifier.ControlModifier
WORKED_S = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]
rng = np.random.default_rng(28)


def reference_weights(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """softmax(q kᵀ / √d) row by row, for one (T, d) head, from the formula."""
    scores = query @ key.T / np.sqrt(query.shape[-1])
    exp = np.exp(scores - scores.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def assert_grid_shows(user, weights: np.ndarray) -> None:
    values = user.window.score_grid.model.values
    np.testing.assert_allclose(values, weights, rtol=1e-5, atol=1e-6)
    assert len(user.grid()) == weights.shape[0]


def open_tensors(user, path, kind=None, handler=None) -> None:
    """File ▸ Open tensors…, the file picked, then ``handler`` answers a ``kind`` dialog."""
    user.pick_file(path)
    if handler is not None:
        user.answer(kind, handler)
    user.choose("File", "Open tensors…")


def test_an_npz_with_q_k_v_opens_at_once_and_is_undoable(user, tmp_path):
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    path = tmp_path / "qkv.npz"
    np.savez(path, q=q, k=k, v=v)
    open_tensors(user, path)
    assert user.dialogs_seen == ["Open tensors"]  # the file dialog only: the names say it all
    assert user.window.session.shape == (1, 2, 4, 3)
    assert user.status().startswith(
        "Opened tensors from qkv.npz (query = q, key = k, value = v): B=1, H=2, T=4, d=3."
    )
    assert user.title() == "qkv"
    assert user.window.session.options.stage == "weights"
    assert_grid_shows(user, reference_weights(q[0], k[0]))
    user.window.session.set_option("head", 1)
    user.settle()
    assert_grid_shows(user, reference_weights(q[1], k[1]))
    user.press(Qt.Key.Key_Z, CTRL, widget=user.window)
    assert user.window.session.shape == (1, 1, 3, 2)  # back to the worked example
    user.window.session.set_option("stage", "scores")
    user.settle()
    assert user.grid_numbers() == WORKED_S


def test_ambiguous_names_go_through_the_mapping_dialog_which_remembers(user, tmp_path):
    layer = rng.standard_normal((5, 2, 3))  # stored (T, H, d)
    other = rng.standard_normal((5, 2, 3))
    path = tmp_path / "layer3.npz"
    np.savez(path, x_in=layer, w1=other, w2=other * 2)
    seen: dict[str, str] = {}

    def choose(dialog) -> bool:
        assert isinstance(dialog, MappingDialog)
        seen["listing"] = dialog.findChild(QLabel, "arrays").text()
        dialog.findChild(QComboBox, "query_array").setCurrentText("x_in")
        dialog.findChild(QComboBox, "key_array").setCurrentText("w1")
        ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
        for role in ("query", "key"):
            dialog.findChild(QComboBox, f"{role}_axis0").setCurrentText("token")
            seen[f"{role} half-done"] = dialog.summary.text()
            seen[f"{role} ok half-done"] = str(ok.isEnabled())
            dialog.findChild(QComboBox, f"{role}_axis1").setCurrentText("head")
        dialog.findChild(QComboBox, "value_array").setCurrentText("w2")  # (T, H, d) read as
        seen["mismatch"] = dialog.summary.text()  # (H, T, d): T = 2 against the query's 5
        seen["ok on mismatch"] = str(ok.isEnabled())
        dialog.findChild(QComboBox, "value_array").setCurrentText(NO_VALUE)
        seen["summary"] = dialog.summary.text()
        user.click(ok)
        return True

    open_tensors(user, path, MappingDialog, choose)
    assert user.dialogs_seen == ["Open tensors", "Open tensors: layer3.npz"]
    listing = seen["listing"].splitlines()
    assert listing[1:] == [
        "  x_in: float64 (5, 2, 3)",
        "  w1: float64 (5, 2, 3)",
        "  w2: float64 (5, 2, 3)",
    ]
    assert (
        seen["query half-done"]
        == "Not yet: query: exactly one axis of 'x_in' must be the token axis."
    )
    assert seen["query ok half-done"] == "False"
    assert seen["mismatch"] == "Not yet: value has T = 2 but the query has T = 5."
    assert seen["ok on mismatch"] == "False"
    assert seen["summary"] == (
        "query x_in as (B=1, H=2, T=5, d=3); key w1 as (B=1, H=2, T=5, d=3); value = key."
    )
    session = user.window.session
    assert session.shape == (1, 2, 5, 3)
    np.testing.assert_array_equal(session.matrix("query")[0], layer.transpose(1, 0, 2))
    np.testing.assert_array_equal(session.matrix("value"), session.matrix("key"))
    assert_grid_shows(user, reference_weights(layer[:, 0], other[:, 0]))
    assert "value: not given, so V = K" in user.status()

    offered: dict[str, str] = {}

    def confirm(dialog) -> bool:  # the next time: the same choice, already made
        for name in ("query_array", "key_array", "value_array", "query_axis0", "key_axis1"):
            offered[name] = dialog.findChild(QComboBox, name).currentText()
        user.click(dialog.buttons.button(QDialogButtonBox.StandardButton.Ok))
        return True

    open_tensors(user, path, MappingDialog, confirm)
    assert offered == {"query_array": "x_in", "key_array": "w1", "value_array": NO_VALUE,
                       "query_axis0": "token", "key_axis1": "head"}  # fmt: skip
    assert session.shape == (1, 2, 5, 3)


def test_a_safetensors_file_with_grouped_keys(user, tmp_path):
    q = rng.standard_normal((4, 6, 8)).astype(np.float32)
    k = rng.standard_normal((2, 6, 8)).astype(np.float32)
    path = tmp_path / "llama-layer0.safetensors"
    save_safetensors(path, {"query": q, "key": k, "value": k * 0.5})
    open_tensors(user, path)
    session = user.window.session
    assert session.shape == (1, 4, 6, 8) and session.options.dtype == "float32"
    assert "4 query heads share 2 key/value heads (2 read each one)." in user.status()
    np.testing.assert_array_equal(session.matrix("key")[0, 1], k[0])
    np.testing.assert_array_equal(session.matrix("key")[0, 2], k[1])
    user.window.session.set_option("head", 3)
    user.settle()
    assert_grid_shows(user, reference_weights(q[3].astype(np.float64), k[1].astype(np.float64)))


def refused(user, path) -> str:
    """Open ``path`` expecting the one message; return its text after pressing OK."""
    text: list[str] = []

    def read_and_close(dialog) -> bool:
        assert isinstance(dialog, QMessageBox)
        text.append(dialog.text())
        dialog.button(QMessageBox.StandardButton.Ok).click()
        return True

    open_tensors(user, path, QMessageBox, read_and_close)
    assert user.dialogs_seen[-2:] == ["Open tensors", "Could not open the tensors"]
    assert user.status() == text[0]  # the status bar says the same, once
    assert user.window.session.shape == (1, 1, 3, 2) and user.grid_numbers() == WORKED_S
    assert user.title() != path.stem
    return text[0]


def test_a_pickled_npy_is_refused_with_a_message(user, tmp_path):
    path = tmp_path / "pickled.npy"
    np.save(path, np.array([{"query": [1.0]}], dtype=object), allow_pickle=True)
    message = refused(user, path)
    assert message.startswith("Could not open pickled.npy: 'array' holds Python objects")
    assert "the app never unpickles" in message


def test_a_4_gb_lying_header_is_refused_before_reading(user, tmp_path):
    header = json.dumps(
        {
            "query": {"dtype": "F32", "shape": [2**30], "data_offsets": [0, 2**32]},
            "key": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
        }
    )
    path = tmp_path / "liar.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header.encode() + bytes(32))
    message = refused(user, path)
    assert message == (
        "Could not open liar.safetensors: the header of 'query' says float32 (1073741824,), "
        "4,096 MB of data, but only 0.0 MB follow it; the file is truncated or its header is "
        "wrong (nothing was read)."
    )
