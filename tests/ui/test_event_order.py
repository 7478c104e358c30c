"""The order in which an edit's subscribers hear of it, as docs/architecture.md states it.

The order matters: the stepper rebuilds its frame before any view paints, and a quick
recompute has replaced the result before the tables repaint the edited cell, so no view
ever paints new numbers beside an old result.
"""

from __future__ import annotations

import numpy as np

from attn_explorer.state.views.stepper import Stepper


def _owners(event) -> list[str]:
    """Who each callback of ``event`` belongs to: its module's last name."""
    return [
        getattr(callback, "__module__", "?").rsplit(".", 1)[-1] for callback in event._callbacks
    ]


def test_the_stepper_hears_of_an_edit_first_and_recompute_before_the_tables(window):
    owners = _owners(window.session.events.values)
    assert owners[:2] == ["stepper", "vectors"]
    assert "recompute" in owners and "matrix_table" in owners
    assert owners.index("recompute") < owners.index("matrix_table")


def test_tables_repaint_after_the_result_is_already_new(window):
    """What the order buys: when Q's table hears of the edit, the scores already include it."""
    callbacks = window.session.events.values._callbacks
    seen: list[float] = []
    for n, callback in enumerate(callbacks):
        if callback.__module__.endswith("matrix_table"):

            def wrapped(matrix, original=callback):
                seen.append(float(window.state.results.result.scores[0, 0, 0, 0]))
                original(matrix)

            callbacks[n] = wrapped
    assert window.session.set_cell_text("query", 0, 0, "2")
    assert seen == [2.0, 2.0, 2.0]  # each of Q, K, V's tables: S[0, 0] = q1 · k1 = 2 · 1 + 0 · 0
    assert isinstance(window.state.stepper, Stepper)
    np.testing.assert_array_equal(window.state.results.result.scores[0, 0, 0], [2.0, 0.0, 2.0])
