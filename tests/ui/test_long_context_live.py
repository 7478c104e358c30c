"""The Model dock stays live on a long text (the long pass forced on a tiny decoder).

Enlarging a head shows the pass's block preview at once and the full head when a
background job brings it (never computed on the GUI thread); the grid shows each
finished layer's previews while the pass still runs (held mid-way on an Event here).
"""

import itertools
import threading

import numpy as np
import pytest

from attn_explorer.compute import Cancelled
from attn_explorer.models import discovery, session
from attn_explorer.models.decoder import llama, long_pass, long_stats
from attn_explorer.models.decoder.long_pass import HeadStack
from attn_explorer.models.session import DETAIL_PIXELS
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.head_detail import COMPUTING
from attn_explorer.ui.model.long_context import PassProgress
from attn_explorer.ui.model.model_grid import COMPUTING as LAYER_COMPUTING
from attn_explorer.ui.model.model_view import ModelView

TEXT = " the cat sat on the mat," * 50
OTHER = " a dog ran to the sea." * 50


class Hold:
    """Holds the long pass before layer ``at`` (from 0) until :meth:`release` (when armed)."""

    def __init__(self, monkeypatch):
        self.armed, self.at, self.calls = False, 1, 0
        self.reached, self.gate = threading.Event(), threading.Event()
        real = llama.long_attention

        def held(*args, **kwargs):
            if self.armed:
                self.calls += 1
                if self.calls == self.at + 1:
                    self.reached.set()
                    self.gate.wait(30)
            return real(*args, **kwargs)

        monkeypatch.setattr(llama, "long_attention", held)

    def arm(self, at=1):
        self.armed, self.at, self.calls = True, at, 0
        self.reached.clear()
        self.gate.clear()

    def release(self):
        self.armed = False
        self.gate.set()


@pytest.fixture
def hold(monkeypatch):
    holding = Hold(monkeypatch)
    yield holding
    holding.release()  # never leave a worker waiting


@pytest.fixture
def model_path(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)  # every text runs as a long pass
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, context_length=1024, num_layers=3)
    return path


def open_view(qtbot, path, text=TEXT):
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(760, 900)
    widget.show()
    widget.set_model_folder(path)
    if text:
        widget.set_sentence(text)
        qtbot.waitUntil(lambda: widget.result is not None and not widget.busy, timeout=20_000)
    return widget


@pytest.fixture
def view(qtbot, model_path, hold):
    widget = open_view(qtbot, model_path)
    yield widget
    hold.release()
    widget.shutdown()


def thumbnail(view, layer, head):
    return view.grid.thumbnails[(layer, head)][1].image


# -- enlarging a head ------------------------------------------------------------------


def test_enlarging_shows_the_block_preview_at_once_then_the_full_head(qtbot, view):
    result = view.result
    view.select_head(1, 3)
    detail = view.detail  # no event has run yet: what shows is what the click drew
    assert detail.showing == "preview" and detail.busy
    np.testing.assert_array_equal(detail.image.image, result.long.weights_preview[1, 3])
    assert detail.title == f"layer 2 · head 4 · {COMPUTING}"
    assert "block preview" in detail.toolTip() and "2 × 2 tokens" in detail.toolTip()
    qtbot.waitUntil(lambda: detail.showing == "full", timeout=10_000)
    np.testing.assert_array_equal(detail.image.image, result.weights.reduced(1, 3, DETAIL_PIXELS))
    np.testing.assert_array_equal(detail.image.image, result.weights[1, 3])  # T ≤ 1024: whole
    assert detail.title == "layer 2 · head 4" and detail.toolTip() == ""
    assert not view.busy


def test_the_full_head_is_never_computed_on_the_gui_thread(qtbot, view, monkeypatch):
    threads = []
    real = HeadStack.reduced

    def recorded(self, *args, **kwargs):
        threads.append(threading.current_thread())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(HeadStack, "reduced", recorded)
    view.select_head(0, 2)
    qtbot.waitUntil(lambda: view.detail.showing == "full", timeout=10_000)
    assert threads and threading.main_thread() not in threads


def test_raw_scores_preview_first_then_the_full_head_in_blocks(qtbot, view, monkeypatch):
    monkeypatch.setattr(session, "DETAIL_PIXELS", 100)  # in blocks of a few tokens a side
    result = view.result
    tokens = len(result.tokens)
    size = -(-tokens // 100)
    assert size > 2  # not the preview's 2 × 2
    view.set_show_scores(True)
    detail = view.detail
    preview = np.where(
        np.isneginf(result.long.scores_preview[0, 0]), np.nan, result.long.scores_preview[0, 0]
    )
    assert detail.showing == "preview"
    np.testing.assert_array_equal(detail.image.image, preview)  # NaN where no key is visible
    qtbot.waitUntil(lambda: detail.showing == "full", timeout=10_000)
    np.testing.assert_array_equal(detail.image.image, result.scores.reduced(0, 0, 100))
    assert detail.image.image.shape == (-(-tokens // size),) * 2
    assert detail.title == f"layer 1 · head 1 · {size} × {size} tokens a pixel"


def test_the_newest_head_wins_and_the_older_job_stops(qtbot, view, monkeypatch):
    monkeypatch.setattr(session, "DETAIL_PIXELS", 100)  # in blocks: the job checks its stop
    gate, started, outcomes = threading.Event(), threading.Event(), {}
    real = HeadStack.reduced

    def held(self, layer, head, pixels, should_stop=None):
        if (layer, head) == (1, 3):
            started.set()
            gate.wait(10)
        try:
            outcomes[(layer, head)] = real(self, layer, head, pixels, should_stop)
        except Cancelled:
            outcomes[(layer, head)] = "stopped"
            raise
        return outcomes[(layer, head)]

    monkeypatch.setattr(HeadStack, "reduced", held)
    view.select_head(1, 3)
    assert view.detail.busy  # its job starts START_DELAY_MS after the preview is drawn
    qtbot.waitUntil(started.is_set, timeout=10_000)  # the first job runs, held
    view.select_head(0, 1)
    qtbot.waitUntil(lambda: view.detail.showing == "full", timeout=10_000)
    np.testing.assert_array_equal(view.detail.image.image, view.result.weights.reduced(0, 1, 100))
    gate.set()
    qtbot.waitUntil(lambda: (1, 3) in outcomes and not view.busy, timeout=10_000)
    assert outcomes[(1, 3)] == "stopped"
    assert view.detail.title.startswith("layer 1 · head 2")
    np.testing.assert_array_equal(view.detail.image.image, outcomes[(0, 1)])


def test_a_zoomed_view_gets_its_exact_cells_from_a_worker(qtbot, view, monkeypatch):
    threads = []
    real = HeadStack.rows

    def recorded(self, layer, head, start, stop):
        if stop - start > 1:  # a hover reads one row, on the GUI thread
            threads.append(threading.current_thread())
        return real(self, layer, head, start, stop)

    monkeypatch.setattr(HeadStack, "rows", recorded)
    view.select_head(1, 2)
    qtbot.waitUntil(lambda: view.detail.showing == "full", timeout=10_000)
    threads.clear()
    box = view.detail.getPlotItem().getViewBox()
    box.setRange(xRange=(5, 41), yRange=(10, 60), padding=0)
    qtbot.waitUntil(lambda: view.detail.zoomed.isVisible() and not view.busy, timeout=10_000)
    on = list(threads)  # before the references below read rows here
    (x0, x1), (y0, y1) = box.viewRange()
    i0, i1, j0, j1 = int(y0), int(np.ceil(y1)), int(x0), int(np.ceil(x1))
    cells = view.detail.zoomed.image
    np.testing.assert_array_equal(cells, view.result.weights[1, 2, i0:i1][:, j0:j1])
    head = view.result.weights[1, 2]  # its blocks of rows start elsewhere: float rounding
    np.testing.assert_allclose(cells, head[i0:i1, j0:j1], rtol=1e-5, atol=1e-7)
    assert on and threading.main_thread() not in on


def test_a_short_text_keeps_the_synchronous_head(qtbot, view, monkeypatch):
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 1 << 30)  # one full pass again
    view.set_sentence(" the cat sat on the mat.")
    qtbot.waitUntil(lambda: view.result.long is None and not view.busy, timeout=20_000)
    view.select_head(1, 1)
    assert view.detail.showing == "values" and not view.detail.busy
    np.testing.assert_array_equal(view.detail.image.image, view.result.weights[1, 1])


def test_closing_stops_the_background_head(qtbot, view):
    view.select_head(2, 0)
    assert view.detail.busy
    view.shutdown()
    assert not view.detail.busy


# -- previews layer by layer -----------------------------------------------------------


def test_the_grid_shows_finished_layers_while_the_pass_runs(qtbot, view, hold):
    hold.arm(at=1)  # layer 2 waits until released
    view.set_sentence(OTHER)
    view.compute_now()  # the pause after typing would wait for the events this test holds
    assert hold.reached.wait(20)
    qtbot.waitUntil(lambda: view.passes.layers_drawn == 1, timeout=10_000)
    stats = view.passes._stats
    assert stats is not None and view.result.long is not stats  # the new pass, not the result
    for head in range(4):
        np.testing.assert_array_equal(thumbnail(view, 0, head), stats.weights_preview[0, head])
        assert thumbnail(view, 1, head) is None and thumbnail(view, 2, head) is None
    assert view.grid._layer_header.texts()[1] == f"layer 2\n{LAYER_COMPUTING}"
    assert view.grid._layer_header.texts()[2] == "layer 3"
    hold.release()
    qtbot.waitUntil(lambda: view.result.long is stats and not view.busy, timeout=20_000)
    for head in range(4):
        np.testing.assert_array_equal(thumbnail(view, 2, head), stats.weights_preview[2, head])
    assert view.grid._layer_header.texts()[1] == "layer 2"
    assert not view.passes.active


def test_a_redraw_holds_the_pass_while_the_grid_is_painted(qtbot, view, hold, monkeypatch):
    """Each mid-pass redraw holds the pass's cores (LongStats.hold), paints the grid at once
    and lets the cores go: the grid is set and painted without queueing for the GIL."""
    from attn_explorer.ui.model.model_grid import ThumbnailGrid

    seen, quiet = [], []  # quiet: no core computed the pass (it rested at the layer's end)
    real_paint = ThumbnailGrid.repaint_now

    def paint(grid, layers=None):
        stats = view.passes._stats
        seen.append(("paint", stats is not None and not stats._gate.is_set()))
        quiet.append(stats is not None and stats.quiet)
        real_paint(grid, layers)

    monkeypatch.setattr(ThumbnailGrid, "repaint_now", paint)
    # a real layer takes seconds; the tiny model's first ends before the view has even
    # shown the pass's start: the pass rests for the view's draw as long as it needs here
    monkeypatch.setattr(long_stats, "HOLD_S", 10.0)
    hold.arm(at=1)
    view.set_sentence(OTHER)
    view.compute_now()
    qtbot.waitUntil(hold.reached.is_set, timeout=20_000)  # the event loop runs meanwhile
    qtbot.waitUntil(lambda: view.passes.layers_drawn == 1, timeout=10_000)
    stats = view.passes._stats
    # the result's key/value bands from the pass's first draw: no new layout when it arrives
    np.testing.assert_array_equal(view.grid.kv_heads, [0, 0, 1, 1])
    top = view.grid.viewportMargins().top()
    from PySide6.QtGui import QFontMetrics

    from attn_explorer.ui.model.model_grid import ROW_LABEL_PX

    rows = view.grid._layer_header  # "layer 2" over "computing": both fit the labels' column
    words = [word for text in rows.texts() for word in text.split("\n")]
    assert LAYER_COMPUTING in words
    metrics = QFontMetrics(rows.label_font())
    assert max(map(metrics.horizontalAdvance, words)) <= ROW_LABEL_PX - 6
    assert seen == [("paint", True)] and quiet == [True]  # painted while held, cores idle
    qtbot.waitUntil(stats._gate.is_set, timeout=2_000)  # and released after (RELEASE_MS)
    hold.release()
    qtbot.waitUntil(lambda: view.result.long is stats and not view.busy, timeout=20_000)
    assert stats._gate.is_set() and all(held for _, held in seen)
    assert view.grid.viewportMargins().top() == top


def test_the_grid_fills_from_the_start_page_on_a_first_long_pass(qtbot, model_path, hold):
    hold.arm(at=2)  # layer 3 waits
    widget = open_view(qtbot, model_path, text="")
    try:
        widget.set_sentence(TEXT)
        widget.compute_now()
        assert hold.reached.wait(20)
        qtbot.waitUntil(lambda: widget.passes.layers_drawn == 2, timeout=10_000)
        assert widget.result is None and widget._pages.currentIndex() == 1
        stats = widget.passes._stats
        np.testing.assert_array_equal(thumbnail(widget, 1, 3), stats.weights_preview[1, 3])
        widget.findChild(PassProgress).stop()  # nothing before it: the start page again
        qtbot.waitUntil(lambda: not widget.passes.active, timeout=10_000)
        assert widget._pages.currentIndex() == 0 and widget.result is None
    finally:
        hold.release()
        widget.shutdown()


def test_scores_mid_pass_share_one_scale_over_the_layers_drawn(qtbot, view, hold):
    view.set_show_scores(True)
    qtbot.waitUntil(lambda: not view.busy, timeout=10_000)
    hold.arm(at=2)
    view.set_sentence(OTHER)
    view.compute_now()  # the pause after typing would wait for the events this test holds
    assert hold.reached.wait(20)
    qtbot.waitUntil(lambda: view.passes.layers_drawn == 2, timeout=10_000)
    stats = view.passes._stats
    drawn = stats.scores_preview[:2]
    bound = float(np.abs(drawn[np.isfinite(drawn)]).max())
    for layer in range(2):
        _, item = view.grid.thumbnails[(layer, 1)]
        assert item.levels == pytest.approx((-bound, bound))
        expected = np.where(np.isneginf(drawn[layer, 1]), np.nan, drawn[layer, 1])
        np.testing.assert_array_equal(item.image, expected)


def test_stop_mid_pass_puts_the_previous_result_back(qtbot, view, hold):
    before = view.result
    hold.arm(at=1)
    view.set_sentence(OTHER)
    view.compute_now()  # the pause after typing would wait for the events this test holds
    assert hold.reached.wait(20)
    qtbot.waitUntil(lambda: view.passes.layers_drawn == 1, timeout=10_000)
    new = view.passes._stats.weights_preview[0, 0]
    assert not np.array_equal(new, before.long.weights_preview[0, 0])
    np.testing.assert_array_equal(thumbnail(view, 0, 0), new)
    view.findChild(PassProgress).stop()
    qtbot.waitUntil(lambda: not view.passes.active, timeout=10_000)
    assert view.result is before
    assert view.status_label.text() == "Stopped; the previous result stays."
    for layer in range(3):
        np.testing.assert_array_equal(
            thumbnail(view, layer, 0), before.long.weights_preview[layer, 0]
        )
    assert view.grid._layer_header.texts()[1] == "layer 2"
    hold.release()
    qtbot.waitUntil(lambda: not view.busy, timeout=20_000)
    assert view.result is before  # the stopped pass's late answer is dropped


def test_token_axes_of_8192_tokens_measure_only_the_labels_that_can_show(qtbot):
    from PySide6.QtGui import QPainter, QPicture

    from attn_explorer.ui.model.head_detail import HeadDetail

    detail = HeadDetail(lambda *_: None, lambda *_: None)
    qtbot.addWidget(detail)
    detail.resize(600, 500)
    detail.show()
    tokens = [f"t{i}" for i in range(8192)]
    detail.set_tokens(tokens)
    detail.getPlotItem().getViewBox().setRange(xRange=(0, 8192), yRange=(0, 8192), padding=0)
    for name in ("left", "bottom"):
        axis = detail.getPlotItem().getAxis(name)
        assert [label for _, label in axis._tickLevels[0]] == tokens  # every token ticked
        picture = QPicture()
        painter = QPainter(picture)
        _, ticks, texts = axis.generateDrawSpecs(painter)
        painter.end()
        assert len(ticks) < 100  # a few hundred pixels: a few dozen labels, not 8 192
        drawn = [text for _, _, text in texts]
        assert drawn[0] == "t0" and len(drawn) > 5
        step = int(drawn[1][1:])
        assert [int(text[1:]) % step for text in drawn] == [0] * len(drawn)  # every k-th
        rects = [rect for rect, _, _ in texts]
        assert not any(a.intersects(b) for a, b in itertools.pairwise(rects))
        assert axis._tickLevels[0][-1] == (8191.5, "t8191")  # the full list is kept


def test_one_thumbnail_is_framed_however_often_the_selection_moves(view):
    from PySide6.QtCore import Qt

    for head in [(1, 3), (0, 1), (0, 1), (2, 2)]:
        view.select_head(*head)
    framed = [
        where
        for where, (box, _) in view.grid.thumbnails.items()
        if box.border.style() != Qt.PenStyle.NoPen
    ]
    assert framed == [(2, 2)]
