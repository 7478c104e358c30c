"""loop_trace: the stepper's view of the loop, in the loop's own order and arithmetic."""

import numpy as np
import pytest
from compute_reference import qkv
from hypothesis import given, settings

from attn_explorer.compute import GRANULARITIES, LoopStep, attention_scores, loop_trace
from attn_explorer.compute.strategies import strategy_source

WORKED = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)


class Entry:
    """A matrix entry that records which (b, h, row, d) it is when multiplied."""

    def __init__(self, log, b, h, row, d, value):
        self.log, self.where, self.value = log, (b, h, row, d), value

    def __mul__(self, other):
        (b, h, i, d), (_, _, j, _) = self.where, other.where
        self.log.append((b, h, i, j, d, self.value, other.value))
        return self.value * other.value


def instrumented_loop_order(query4, key4):
    """Run the loop strategy's displayed source on recording entries: its true order."""
    B, H, T_q, d_head = query4.shape
    T_k = key4.shape[2]
    log = []

    def wrap(array):
        return [
            [
                [
                    [Entry(log, b, h, r, d, float(array[b, h, r, d])) for d in range(d_head)]
                    for r in range(array.shape[2])
                ]
                for h in range(H)
            ]
            for b in range(B)
        ]

    scores = [[[[0.0] * T_k for _ in range(T_q)] for _ in range(H)] for _ in range(B)]
    names = {"B": B, "H": H, "T_q": T_q, "T_k": T_k, "d_head": d_head}
    exec(
        strategy_source("loop"),
        {**names, "Q_all": wrap(query4), "K_all": wrap(key4), "S_all": scores},
    )
    return log, np.array(scores)


def as4d(array):
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


@settings(max_examples=60, deadline=None)
@given(qkv(max_t=4, max_d=3))
def test_trace_follows_the_loop(inputs):
    query, key, _ = inputs
    trace = loop_trace(query, key)
    log, loop_scores = instrumented_loop_order(as4d(query), as4d(key))
    steps = list(trace)
    assert len(steps) == len(trace) == len(log)
    scores = attention_scores(query, key, "loop")
    flat_scores = scores.reshape(-1)
    cell = 0
    for n, (step, recorded) in enumerate(zip(steps, log, strict=True)):
        b, h, i, j, d, q_value, k_value = recorded
        assert (step.index, step.batch, step.head, step.i, step.j, step.d) == (n, b, h, i, j, d)
        assert (step.q_value, step.k_value) == (q_value, k_value)
        assert step.product == q_value * k_value
        assert step.cell_complete == (d == trace.d - 1)
        if step.cell_complete:
            # the final partial sum is exactly what the loop stored in S
            assert step.partial_sum == loop_scores[b, h, i, j]
            assert scores.dtype.type(step.partial_sum) == flat_scores[cell]
            cell += 1
    assert cell == flat_scores.size


@settings(max_examples=40, deadline=None)
@given(qkv(max_t=4, max_d=3))
def test_seek_equals_replay(inputs):
    query, key, _ = inputs
    trace = loop_trace(query, key)
    replay = list(trace)
    for n in range(len(trace)):
        assert trace[n] == replay[n]
        assert trace[n - len(trace)] == replay[n]
    assert trace[-1] == replay[-1]
    assert trace[1:-1:2] == replay[1:-1:2]


def test_worked_example_first_cell_and_working():
    trace = loop_trace(WORKED, WORKED)
    assert len(trace) == 3 * 3 * 2
    first = trace[0]
    assert isinstance(first, LoopStep)
    assert (first.i, first.j, first.d, first.product, first.partial_sum) == (0, 0, 0, 1.0, 1.0)
    assert not first.cell_complete
    assert trace.working(1) == "1·1 + 0·0 = 1"
    assert trace[1].cell_complete
    assert trace.working(0) == "1·1 = 1"
    # q3 · k3 = 1·1 + 1·1 = 2, the last cell
    assert trace.working(-1) == "1·1 + 1·1 = 2"
    assert trace.working(trace.index_of_cell(0, 0, 1, 0, 1)) == "0·1 + 1·0 = 0"


def test_working_shows_decimals():
    trace = loop_trace([[0.5, -1.25]], [[2.0, 0.1]])
    assert trace.working(1) == f"0.5·2 + -1.25·0.1 = {0.5 * 2 + -1.25 * 0.1:.6g}"


def test_index_errors_and_types():
    trace = loop_trace(WORKED, WORKED)
    with pytest.raises(IndexError):
        trace[len(trace)]
    with pytest.raises(IndexError):
        trace[-len(trace) - 1]
    assert trace[np.int64(3)] == trace[3]
    assert trace[5:2] == []
    assert [s.index for s in trace[::5]] == [0, 5, 10, 15]


def test_units_and_index_of_cell():
    rng = np.random.default_rng(5)
    query = rng.standard_normal((2, 3, 4, 5))  # (B, H, T_q, d)
    key = rng.standard_normal((2, 3, 6, 5))  # T_k = 6
    trace = loop_trace(query, key)
    assert trace.shape == (2, 3, 4, 6, 5)
    assert len(trace) == 2 * 3 * 4 * 6 * 5
    assert trace.unit_count("multiply-add") == len(trace)
    assert trace.unit_count("cell") == 2 * 3 * 4 * 6
    assert trace.unit_count("row") == 2 * 3 * 4
    assert trace.unit_count("head") == 2 * 3
    assert tuple(GRANULARITIES) == ("multiply-add", "cell", "row", "head")
    for granularity in GRANULARITIES:
        count = trace.unit_count(granularity)
        assert trace.unit_end(granularity, count - 1) == len(trace) - 1
        for unit in (0, count // 2, count - 1):
            end = trace.unit_end(granularity, unit)
            assert trace.unit_of(granularity, end) == unit
            assert trace.unit_of(granularity, end + 1) == unit + 1
    # the last step of a cell unit completes that cell
    assert trace[trace.unit_end("cell", 7)].cell_complete
    assert not trace[trace.unit_end("cell", 7) - 1].cell_complete
    # the end of a row unit is the last key of that query row
    step = trace[trace.unit_end("row", 5)]
    assert (step.batch, step.head, step.i, step.j, step.d) == (0, 1, 1, 5, 4)
    # index_of_cell decodes back to the same (b, h, i, j, d)
    for where in [(0, 0, 0, 0, 0), (1, 2, 3, 5, 4), (1, 0, 2, 3, 1)]:
        step = trace[trace.index_of_cell(*where)]
        assert (step.batch, step.head, step.i, step.j, step.d) == where
    with pytest.raises(ValueError, match="granularity"):
        trace.unit_size("token")


def test_filled_mask_grows_cell_by_cell():
    trace = loop_trace(WORKED, WORKED)
    assert not trace.filled_mask(-1).any()
    assert trace.filled_mask(-1).shape == (1, 1, 3, 3)
    assert not trace.filled_mask(0).any()  # first multiply-add: cell (0, 0) not finished
    assert trace.filled_mask(1)[0, 0].tolist() == [
        [True, False, False],
        [False, False, False],
        [False, False, False],
    ]
    assert trace.filled_mask(len(trace) - 1).all()
    previous = 0
    for n in range(len(trace)):
        filled = int(trace.filled_mask(n).sum())
        assert filled == previous + (1 if trace[n].cell_complete else 0)
        previous = filled


@pytest.mark.parametrize("template", [True, False])
def test_filled_mask_is_the_cells_done_in_loop_order(monkeypatch, template):
    """Both ways of making the mask (a window on the kept template, or a new array past
    PREFIX_TEMPLATE_CELLS) equal the cells whose last multiply-add has run, by walking the
    trace; a mask handed out earlier never changes, and no mask can be written to."""
    from attn_explorer.compute import trace as trace_module

    if not template:
        monkeypatch.setattr(trace_module, "PREFIX_TEMPLATE_CELLS", 0)
    rng = np.random.default_rng(1)
    trace = loop_trace(rng.standard_normal((2, 3, 4, 3)), rng.standard_normal((2, 3, 5, 3)))
    expected = np.zeros((2, 3, 4, 5), dtype=bool)
    masks = []
    for n, step in enumerate(trace):
        if step.cell_complete:
            expected[step.batch, step.head, step.i, step.j] = True
        mask = trace.filled_mask(n)
        np.testing.assert_array_equal(mask, expected)
        masks.append((mask, expected.copy()))
    for mask, then in masks:  # every earlier frame's mask still shows its own step
        np.testing.assert_array_equal(mask, then)
    assert not trace.filled_mask(-1).any() and trace.filled_mask(len(trace) - 1).all()
    if template:
        with pytest.raises(ValueError, match="read-only"):
            trace.filled_mask(5)[0, 0, 0, 0] = False


def test_trace_keeps_no_history():
    """The trace holds the inputs and nothing that grows with the number of steps."""
    query = np.ones((8, 64, 32))
    trace = loop_trace(query, query)
    assert len(trace) == 8 * 64 * 64 * 32
    middle = trace[trace.index_of_cell(0, 4, 10, 20, 15)]
    assert middle.partial_sum == 16.0  # 16 of the cell's 32 terms, summed in O(d)
    sizes = {name: np.asarray(v).nbytes for name, v in vars(trace).items()}
    assert sum(sizes.values()) <= 2 * query.nbytes + 1024
