"""The Compare page's parts without the window: typed head sets, the heads high in both
maps, a bad pair's line, and a chart's CSV on disk."""

import numpy as np
import pytest

from attn_explorer.analysis.compare import PairError
from attn_explorer.state.storage.export import read_csv
from attn_explorer.ui.model.compare.panel import pair_line
from attn_explorer.ui.model.compare.state import circuit_heads, head_text, parse_heads


def test_typed_heads_count_from_1_and_come_back_as_typed():
    heads = parse_heads("10.3, 9.6 10.3", 30, 9)
    assert heads == ((9, 2), (8, 5))
    assert head_text(heads) == "10.3, 9.6"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no heads typed"),
        ("10", "'10' is not a head: write layer.head"),
        ("0.1", "'0.1' is not a head of this model: layers 1 … 30, heads 1 … 9"),
        ("3.10", "'3.10' is not a head of this model"),
        ("a.b", "'a.b' is not a head"),
    ],
)
def test_a_typed_head_that_is_not_one_says_which(text, message):
    with pytest.raises(ValueError, match=message):
        parse_heads(text, 30, 9)


def test_the_heads_high_in_both_maps_come_first():
    patched = np.array([[0.9, 0.1, -0.5], [0.2, 0.6, 0.0]])
    attributed = np.array([[0.2, 3.0, 1.0], [1.5, 2.0, 0.0]])
    # shares: patched / 0.9, attributed / 3.0; min of the two per head
    # (0,0): min(1, .067) = .067; (0,1): min(.111, 1) = .111; (1,0): min(.222, .5) = .222
    # (1,1): min(.667, .667) = .667; (0,2) and (1,2) are not above 0 in both
    assert circuit_heads(patched, attributed, 3) == [(1, 1), (1, 0), (0, 1)]
    assert circuit_heads(patched, attributed, 10) == [(1, 1), (1, 0), (0, 1), (0, 0)]
    assert circuit_heads(np.zeros((2, 3)), attributed, 3) == []


def test_a_bad_pair_is_one_line_in_the_window_s_words():
    line = pair_line(PairError("answer", "' the cat' is 2 tokens (' the', ' cat'); give one token"))
    assert line == (
        "Answer: ' the cat' is 2 tokens (' the', ' cat'); give one token, or click one in the bars."
    )
    assert pair_line(PairError("equal", "both differences are 1.0")) == (
        "Nothing to compare: both differences are 1.0."
    )


def test_a_chart_s_csv_holds_its_labels_and_numbers(qtbot, tmp_path):
    from attn_explorer.ui.model.compare.charts import Heatmap, write_chart

    heatmap = Heatmap("layer", "head")
    qtbot.addWidget(heatmap.widget)
    values = np.array([[0.5, -0.25], [1e-7, 2.0]])
    heatmap.show(values, ["1", "2"], ["1", "2"], "recovered")
    written = write_chart(
        tmp_path / "map.csv", heatmap.widget, (["layer 1", "=2"], ["a", "b"], values)
    )
    rows, columns, read = read_csv(written)
    assert rows == ["layer 1", "=2"] and columns == ["a", "b"]
    np.testing.assert_array_equal(read, values)
    assert b"'=2" in written.read_bytes()  # a formula-looking label is quoted for spreadsheets
    low, high = heatmap.bar.levels()
    assert (low, high) == (-2.0, 2.0)  # diverging, centred on 0
    with pytest.raises(ValueError, match=r"choose a \.png, \.svg or \.csv"):
        write_chart(tmp_path / "map.txt", heatmap.widget, (["1"], ["1"], values[:1, :1]))
