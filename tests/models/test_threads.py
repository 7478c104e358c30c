"""Calls on one model from several threads (issue 36): each gets exactly its own answer, the
calls on one model never overlap (so the shared RoPE tables, layer cache, BLAS limit and
memory check are never raced), none hangs, and a call queued behind another still hears
its stop request. The time these threads cost is measured in bench/threads.py.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from attn_explorer.compute import Cancelled
from attn_explorer.models import load_model
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

#: Longest any thread may take (a hang fails the test instead of stalling the suite).
JOIN_SECONDS = 60.0

PROMPTS = ("the cat sat", "on the mat", "a cat", "the hat", "sat on", "cat at the", "on", "he")


def run_in_threads(calls):
    """Run each zero-argument call in its own thread, all released at once; their results in
    order. Fails (never hangs) if a thread is still running after JOIN_SECONDS."""
    start = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index, call):
        try:
            start.wait(JOIN_SECONDS)
            results[index] = call()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_SECONDS
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"still running after {JOIN_SECONDS} s: {alive}"
    assert not errors, errors
    return results


class Overlap:
    """Wraps a model's layer reader: counts how many calls are inside it at once, and
    sleeps there so that any thread that could run meanwhile does."""

    def __init__(self, read):
        self.read, self.inside, self.most = read, 0, 0
        self.count = threading.Lock()

    def __call__(self, index):
        with self.count:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.0005)  # hands the GIL over: an unserialized call would run here
            return self.read(index)
        finally:
            with self.count:
                self.inside -= 1


@pytest.fixture
def tiny_decoder(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    return path


@pytest.mark.parametrize("threads", [4, 16])
def test_generate_from_many_threads_returns_each_call_its_own_text(
    tiny_decoder, threads, monkeypatch
):
    sequential_model = load_gguf(tiny_decoder)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(threads)]
    expected = [sequential_model.generate(p, max_new_tokens=6) for p in prompts]

    model = load_gguf(tiny_decoder)  # fresh: its layers and RoPE tables are built by the threads
    overlap = Overlap(model.weights.layer)
    monkeypatch.setattr(model.weights, "layer", overlap)
    got = run_in_threads([lambda p=p: model.generate(p, max_new_tokens=6) for p in prompts])

    for prompt, mine, reference in zip(prompts, got, expected, strict=True):
        assert mine.prompt_ids == reference.prompt_ids, prompt
        assert mine.token_ids == reference.token_ids, prompt
        assert mine.text == reference.text, prompt
        for step, want in zip(mine.steps, reference.steps, strict=True):
            np.testing.assert_array_equal(step, want)
    assert overlap.most == 1  # never two forward passes of one model at once
    # each layer dequantized once and counted once against the budget, however many threads
    assert model.weights.dequantized == model.config.num_layers
    assert model.weights.kept_bytes == sequential_model.weights.kept_bytes


@pytest.mark.parametrize("threads", [4, 16])
def test_decoder_attention_from_many_threads_equals_the_sequential_runs(tiny_decoder, threads):
    model = load_gguf(tiny_decoder)
    texts = [PROMPTS[i % len(PROMPTS)] for i in range(threads)]
    expected = [model.attention(text) for text in texts]
    got = run_in_threads([lambda t=t: model.attention(t) for t in texts])
    for text, mine, reference in zip(texts, got, expected, strict=True):
        assert mine.tokens == reference.tokens, text
        np.testing.assert_array_equal(mine.weights, reference.weights)
        np.testing.assert_array_equal(mine.logits, reference.logits)


@pytest.mark.parametrize("threads", [4, 16])
def test_bert_attention_from_many_threads_equals_the_sequential_runs(tmp_path, threads):
    model = load_model(write_tiny_bert(tmp_path / "tiny-bert"))
    texts = [PROMPTS[i % len(PROMPTS)] for i in range(threads)]
    expected = [model.attention(text) for text in texts]
    got = run_in_threads([lambda t=t: model.attention(t) for t in texts])
    for text, mine, reference in zip(texts, got, expected, strict=True):
        assert mine.tokens == reference.tokens, text
        np.testing.assert_array_equal(mine.weights, reference.weights)
        np.testing.assert_array_equal(mine.hidden_states, reference.hidden_states)


def test_a_call_queued_behind_another_hears_its_stop_request(tiny_decoder):
    model = load_gguf(tiny_decoder)
    with model.call_lock:  # another call is running on this model
        outcome = run_in_threads(
            [lambda: _raised(lambda: model.attention("the cat", should_stop=lambda: True))]
        )
    assert isinstance(outcome[0], Cancelled)
    assert model.attention("the cat").tokens  # the lock was left free


def _raised(call):
    try:
        call()
    except Exception as exc:
        return exc
    return None
