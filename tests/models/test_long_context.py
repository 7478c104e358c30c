"""The long pass (a decoder at its full context, heads on demand) against the full-grid path.

A tiny random decoder is run both ways on the same text; the long pass is forced by
setting the recording budget to 0. Per layer, the long pass's attention on the full
path's own query, key and value gives that path's weights within 1e-6 and its block
previews (``state.results.preview.make_preview``) within 1e-6; over a whole pass
(where float32 rounding of the two attention orders compounds over layers) within
1e-5. Summaries and head scores streamed over the blocks equal the definitions'
dense forms.
"""

import numpy as np
import pytest

from attn_explorer.analysis.head_scores import head_scores, result_head_scores
from attn_explorer.compute import Cancelled
from attn_explorer.models.decoder import long_pass, long_stats
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.decoder.long_pass import HeadStack, long_attention
from attn_explorer.models.decoder.long_stats import LongStats
from attn_explorer.models.errors import TextError
from attn_explorer.models.session import shown_values
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.state.results.preview import make_preview

#: 300 tokens: over PREVIEW_PIXELS, so each preview pixel is a 2 × 2 block of cells.
TOKENS = 300


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    write_tiny_gguf(path, context_length=1024)
    return load_gguf(path)


@pytest.fixture(scope="module")
def ids(model):
    rng = np.random.default_rng(3)
    words = [" the", " cat", " sat", " on", " mat", ",", " a", " dog"]
    text = "".join(rng.choice(words, size=400))
    found = model.tokenizer.encode(text)[:TOKENS]
    assert len(found) == TOKENS
    return found


@pytest.fixture(scope="module")
def full(model, ids):
    return model.attention(model.tokenizer.decode(ids))


@pytest.fixture
def long(model, ids, monkeypatch):
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    return model.attention(model.tokenizer.decode(ids))


def test_the_limit_is_the_context_and_a_long_text_runs_as_a_long_pass(model, full, long):
    assert model.max_tokens == model.config.context_length == 1024
    assert isinstance(full.weights, np.ndarray) and full.long is None
    assert isinstance(long.weights, HeadStack) and long.long is not None
    assert long.weights.shape == full.weights.shape
    assert long.logits.shape == (1, model.config.vocab_size)  # the next token's only
    np.testing.assert_array_equal(long.input_ids, full.input_ids)
    with pytest.raises(ValueError, match="never held"):
        np.asarray(long.weights)


def per_layer_long(model, full):
    """The long pass's attention on the full path's own Q, K, V, layer by layer."""
    c = model.config
    stats = LongStats(c.num_layers, c.num_heads, TOKENS, full.input_ids, (np.zeros(0, int),) * 2)
    outputs = []
    for layer in range(c.num_layers):
        keys = model.layer_keys(layer)

        def fold(i0, raw, w, layer=layer, keys=keys):
            stats.fold(layer, i0, raw, w, keys)

        outputs.append(
            long_attention(full.query[layer], full.key[layer], full.value[layer], keys, fold)
        )
    stack = HeadStack("weights", full.query, full.key, model.kv_heads,
                      [model.layer_keys(i) for i in range(c.num_layers)], stats.weights_preview,
                      stats.block)  # fmt: skip
    return stats, outputs, stack


def test_per_layer_weights_and_previews_equal_the_full_grid(model, full):
    stats, outputs, stack = per_layer_long(model, full)
    assert stats.block == 2
    heads = full.weights.reshape(-1, TOKENS, TOKENS)
    worst = max(
        float(np.abs(stack[layer, head] - full.weights[layer, head]).max())
        for layer in range(model.config.num_layers)
        for head in range(model.config.num_heads)
    )
    assert worst <= 1e-6
    expected = make_preview(heads)  # the explorer's thumbnails of the full grid
    mine = stats.weights_preview.reshape(-1, *stats.weights_preview.shape[2:])
    assert mine.dtype == np.float16  # pictures only: half the memory of float32
    for theirs, ours in zip(expected.highest, mine, strict=True):
        assert theirs.shape == ours.shape == (150, 150)
        # float16 rounds to 2⁻¹¹ of the value; the two attention orders agree within 1e-6
        np.testing.assert_allclose(ours, theirs, rtol=2**-11, atol=1e-6)
    visible = np.where(np.tri(TOKENS, dtype=bool), full.scores, -np.inf)  # causal keys only
    expected = make_preview(visible.reshape(-1, TOKENS, TOKENS))
    mine = stats.scores_preview.reshape(-1, 150, 150)
    for theirs, ours in zip(expected.farthest, mine, strict=True):
        np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=2**-11, atol=1e-5)
    # the output is softmax(weights) @ V of the full path's weights
    for layer, output in enumerate(outputs):
        expected_output = full.weights[layer] @ full.value[layer][model.kv_heads]
        np.testing.assert_allclose(output, expected_output, rtol=0, atol=1e-5)


def test_a_whole_long_pass_matches_the_full_path(model, full, long):
    worst = max(
        float(np.abs(long.weights[layer, head] - full.weights[layer, head]).max())
        for layer in range(model.config.num_layers)
        for head in range(model.config.num_heads)
    )
    assert worst <= 1e-5
    np.testing.assert_allclose(long.logits[-1], full.logits[-1], rtol=0, atol=1e-4)
    np.testing.assert_allclose(long.hidden_states, full.hidden_states, rtol=0, atol=1e-4)
    # one row, one cell and a slice of rows read the same head (a one-row matmul may round
    # its last bit differently)
    row = long.weights[1, 2, 100]
    np.testing.assert_allclose(row, long.weights[1, 2][100], rtol=0, atol=1e-6)
    assert long.weights[1, 2, 100, 7] == row[7]
    np.testing.assert_allclose(long.weights[1, 2, 10:20], long.weights[1, 2][10:20], atol=1e-6)
    np.testing.assert_allclose(long.scores[0, 3], full.scores[0, 3], rtol=1e-5, atol=1e-5)
    assert np.all(long.weights[0, 0][np.triu_indices(TOKENS, 1)] == 0)


def test_streamed_summaries_and_head_scores_equal_their_definitions(full, long):
    dense, streamed = full.summaries(), long.summaries()
    for name in ("entropy", "cls", "sep", "previous"):
        np.testing.assert_allclose(streamed.get(name), dense.get(name), rtol=0, atol=2e-5)
    theirs = head_scores(full.weights, full.input_ids)
    ours = result_head_scores(long)
    assert set(ours) == set(theirs)
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=2e-5)
        assert np.isfinite(ours[name]).all()  # the random words repeat: every score defined


def test_the_dense_pattern_fallback_gives_the_same_scores(model, ids, full, monkeypatch):
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    monkeypatch.setattr(long_stats, "MAX_PAIRS", 0)  # too many pairs: masks per block instead
    ours = result_head_scores(model.attention(model.tokenizer.decode(ids)))
    theirs = head_scores(full.weights, full.input_ids)
    for name in ("duplicate_token", "induction"):
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=2e-5)


def test_thumbnails_are_the_previews_and_the_enlarged_head_is_whole(full, long):
    shown = shown_values(long, scores=False)
    assert shown.grid.shape == (*long.weights.shape[:2], 150, 150)
    np.testing.assert_array_equal(shown.head(1, 1), long.weights[1, 1])  # 300 ≤ 1024 a side
    scores = shown_values(long, scores=True)
    assert scores.colormap == "diverging" and -scores.levels[0] == scores.levels[1] > 0
    assert np.isnan(scores.grid[0, 0, 0, -1])  # a block of hidden keys only: not coloured
    assert shown_values(full, scores=False).grid is full.weights  # short texts: unchanged


def test_progress_per_layer_and_stop(model, ids, monkeypatch):
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    heard = []
    text = model.tokenizer.decode(ids)
    model.attention(text, progress=lambda f, t: heard.append((f, t)))
    assert heard == [(1 / 2, "layer 1 of 2"), (1.0, "layer 2 of 2")]
    with pytest.raises(Cancelled):
        model.attention(text, should_stop=lambda: True)


def test_a_text_that_would_not_fit_is_refused_in_one_sentence(model, ids, monkeypatch):
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    monkeypatch.setattr(long_pass, "available_bytes", lambda: 1_000_000)
    with pytest.raises(TextError, match=r"300 tokens need about .* GB .* only 0.0 GB"):
        model.attention(model.tokenizer.decode(ids))
    with pytest.raises(TextError, match="only"):
        model.generate(model.tokenizer.decode(ids), max_new_tokens=1)
    assert long_pass.available_bytes.__name__ == "<lambda>"


def test_a_long_prompt_generates_as_a_short_one_does(model, ids, monkeypatch):
    text = model.tokenizer.decode(ids)
    short = model.generate(text, max_new_tokens=3)
    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    long_run = model.generate(text, max_new_tokens=3)
    assert long_run.token_ids == short.token_ids
    np.testing.assert_allclose(long_run.steps[0], short.steps[0], rtol=0, atol=1e-5)
    assert long_run.steps[0].shape == (2, 4, 1, TOKENS)


def test_pass_bytes_grow_with_the_text_not_its_square():
    small = long_pass.pass_bytes(30, 9, 3, 64, 576, 1536, 4096)
    big = long_pass.pass_bytes(30, 9, 3, 64, 576, 1536, 8192)
    assert 1.7 < big / small < 2.1  # kept arrays ∝ T; previews stay 256 × 256 a head
    assert big < 3e9  # SmolLM2 at its context, besides the weights


def test_a_held_pass_waits_at_its_next_fold_until_released(monkeypatch):
    """The view's hold (a grid redraw): a core folding a block waits until release, and at
    most HOLD_S when nobody releases it."""
    import threading
    import time

    from attn_explorer.models.decoder.long_pass import LayerKeys

    tokens = 8
    stats = LongStats(1, 2, tokens, np.arange(tokens), (np.zeros(0, int),) * 2)
    raw = np.random.default_rng(0).standard_normal((2, 4, tokens), dtype=np.float32)
    weights = np.full_like(raw, 1 / tokens)
    folded = threading.Event()

    def fold():
        stats.fold(0, 4, raw.copy(), weights, LayerKeys(scale=1.0))
        folded.set()

    stats.hold()
    worker = threading.Thread(target=fold)
    worker.start()
    assert not folded.wait(0.1)  # held: the block is not folded
    assert stats.weights_preview[0].max() == 0
    stats.release()
    assert folded.wait(5)
    worker.join()
    assert stats.weights_preview[0].max() == np.float16(1 / tokens)

    monkeypatch.setattr(long_stats, "HOLD_S", 0.05)
    stats.hold()  # never released: the fold goes on after HOLD_S
    start = time.monotonic()
    stats.fold(0, 4, raw.copy(), weights, LayerKeys(scale=1.0))
    assert 0.04 <= time.monotonic() - start < 2


def test_a_paced_pass_rests_at_each_layer_end_until_its_view_has_drawn(model, ids, monkeypatch):
    """A view that draws each layer (PassWatch(paced=True)) gets every layer's progress
    while the pass is held, and the pass goes on only once the view releases it; an
    unwatched pass never rests."""
    import threading
    import time

    from attn_explorer.models.long_context import PASS_WATCH
    from attn_explorer.models.session import PassWatch

    monkeypatch.setattr(long_pass, "MAX_RECORD_BYTES", 0)
    text = model.tokenizer.decode(ids)
    watch, heard, quiet = PassWatch(paced=True), [], []

    def progress(fraction, _text):  # the worker's side: what the view is told, and when
        stats = watch.stats
        heard.append((fraction, stats.paced, stats._gate.is_set()))

        def drawn():  # the view draws while the pass rests, then lets it go
            quiet.append(stats.quiet)
            stats.release()

        threading.Timer(0.15, drawn).start()

    token = PASS_WATCH.set(watch.see)
    try:
        start = time.monotonic()
        model.attention(text, progress=progress)
        took = time.monotonic() - start
    finally:
        PASS_WATCH.reset(token)
    assert heard == [(0.5, True, False), (1.0, True, False)]  # held while it is told
    assert quiet == [True, True] and took >= 0.3  # each layer rested until its release

    monkeypatch.setattr(long_stats, "HOLD_S", 0.05)
    stats = LongStats(1, 2, 8, np.arange(8), (np.zeros(0, int),) * 2)
    stats.pause()  # not paced: neither holds
    assert stats._gate.is_set() and (stats.rest() is None)
    stats.paced = True
    stats.pause()
    assert not stats._gate.is_set() and not stats.quiet
    start = time.monotonic()
    stats.rest()  # nobody releases: on after HOLD_S, and the next folds do not wait
    assert 0.04 <= time.monotonic() - start < 2 and stats._gate.is_set()
