"""Numbers, token headers and axis labels of real heads read well (issue 23, defect 7)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

from attn_explorer.state import Snapshot
from attn_explorer.ui.explorer.heatmap_items import tick_step
from attn_explorer.ui.explorer.matrix_table import elide_label, fit_number, shown_cell_text


def metrics() -> QFontMetrics:
    return QFontMetrics(QFont())


def test_a_number_keeps_the_digits_that_fit_and_never_an_ellipsis(qapp):
    m = metrics()
    assert fit_number("-0.130812", 1000, m) == "-0.130812"
    narrow = m.horizontalAdvance("-0.13") + 1
    assert fit_number("-0.130812", narrow, m) == "-0.13"
    assert fit_number("0.411427", m.horizontalAdvance("0.411") + 1, m) == "0.411"
    assert fit_number("-0.000412", m.horizontalAdvance("-0.0004") + 1, m) == "-0.0004"
    assert fit_number("123456", m.horizontalAdvance("1e+05") + 1, m) == "1e+05"
    assert fit_number("−∞", 1, m) == "−∞"  # not a number: unchanged
    assert fit_number("-0.0001", m.horizontalAdvance("0") + 1, m) in ("0", "-1e-04")


def test_a_token_label_keeps_its_index_and_both_ends(qapp):
    m = metrics()
    room = m.horizontalAdvance("q3: ca…al") + 2
    label = elide_label("q3: ", "capital", room, m)
    assert label.startswith("q3: ca") and label.endswith("l") and "…" in label
    assert elide_label("k3\n", "capital", m.horizontalAdvance("capital") + 1, m) == "k3\ncapital"


def test_the_step_is_the_fewest_cells_a_label_needs(qapp):
    m = metrics()
    labels = ["[CLS]", "paris", "capital"]
    width = m.horizontalAdvance("capital") + 6
    assert tick_step(labels, 3 * width, False, m) == 1
    assert tick_step(labels, 3 * width / 2, False, m) == 2
    assert tick_step(labels, 3 * (m.height() + 2), True, m) == 1


def test_grid_and_table_cells_shown_at_the_column_precision(window):
    rng = np.random.default_rng(3)
    shape = (1, 1, 12, 32)
    q, k, v = (rng.standard_normal(shape) * 0.3 for _ in range(3))
    tokens = tuple(f"token{n}word" for n in range(12))
    assert window.session.load(Snapshot(tokens, q, k, v), None, "load")
    window.resize(1000, 650)
    table = window.tables["query"]
    for r, c in ((0, 0), (1, 3), (2, 5)):
        text = shown_cell_text(table, r, c)
        width = table.visualRect(table.model().index(r, c)).width()
        assert table.fontMetrics().horizontalAdvance(text) <= width
        assert abs(float(text) - q[0, 0, r, c]) < 0.01
    grid = window.score_grid
    labels = grid.header_labels(Qt.Orientation.Horizontal)
    assert labels[0].startswith("k1\n") and labels[11].startswith("k12\n")
    assert all(label.split("\n")[1][:1] == "t" for label in labels)
