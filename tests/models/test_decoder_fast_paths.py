"""The decoder's fast paths give the numbers of the plain ones.

A decode step (one new token against the KV cache) skips ``compute.attention``'s
checks and reads each shared KV head by broadcasting instead of copying it per query
head; RoPE is applied without building the rotated copy; Q, K and V of one token are
one matmul; the KV cache grows in place. Each is checked here against the plain
computation *bit for bit*. Only the comparison of incremental decoding with a full
forward pass is approximate, as it always was: one-row and many-row matmuls round
differently (float32 rounding, atol 1e-5).
"""

import numpy as np
import pytest

import attn_explorer.models.decoder.llama as llama
from attn_explorer.compute import attention
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.decoder.ops import (
    KVCache,
    apply_rope,
    attend_one_row,
    rope_tables,
    rotate_halves,
)
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf


@pytest.mark.parametrize(("heads", "kv_heads", "t"), [(9, 3, 1), (9, 3, 37), (4, 2, 5), (4, 4, 8)])
def test_one_row_attention_equals_compute_attention_bit_for_bit(heads, kv_heads, t):
    rng = np.random.default_rng(t)
    d = 16
    q = (rng.standard_normal((heads, 1, d)) * 3).astype(np.float32)
    buffer = rng.standard_normal((2, kv_heads, 64, d)).astype(np.float32)
    k, v = buffer[0, :, :t], buffer[1, :, :t]  # strided views, as the KV cache hands out
    kv_of = np.arange(heads) // (heads // kv_heads)
    full = attention(q, k[kv_of], v[kv_of], causal=True)
    scores, weights, output = attend_one_row(q, k, v, full.scale)
    assert scores.dtype == weights.dtype == output.dtype == np.float32
    np.testing.assert_array_equal(scores, full.scores)
    np.testing.assert_array_equal(weights, full.weights)
    np.testing.assert_array_equal(output, full.output)


def test_apply_rope_equals_rotate_halves_bit_for_bit_on_a_strided_view():
    rng = np.random.default_rng(0)
    t, heads, d = 7, 3, 16
    projected = rng.standard_normal((t, heads * d)).astype(np.float32) * 5
    x = projected.reshape(t, heads, d).transpose(1, 0, 2)  # (H, T, d) view, as in _qkv
    cos, sin = rope_tables(np.arange(100, 100 + t), d, 10000.0)
    rotated = apply_rope(x, cos, sin)
    assert rotated.flags.c_contiguous and rotated.dtype == np.float32
    np.testing.assert_array_equal(rotated, rotate_halves(x, cos, sin))


def test_rope_tables_kept_per_model_equal_fresh_ones(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_gguf(path)
    c = model.config
    for start, end in ((0, 3), (5, 6), (60, 130), (2, 4)):  # grows past the first table
        cos, sin = model._rope(start, end)
        fresh = rope_tables(np.arange(start, end), c.head_dim, c.rope_theta)
        np.testing.assert_array_equal(cos, fresh[0])
        np.testing.assert_array_equal(sin, fresh[1])


def test_fused_qkv_rows_are_views_and_counted_once(tmp_path):
    path = tmp_path / "tiny.gguf"
    written = write_tiny_gguf(path)
    model = load_gguf(path)
    w = model.weights.layer(0)
    for part in (w.query, w.key, w.value):
        assert np.shares_memory(part, w.qkv)
    np.testing.assert_array_equal(w.value, written.tensors["blk.0.attn_v.weight"])
    own = (w.attn_norm, w.qkv, w.attn_output, w.ffn_norm, w.gate, w.up, w.down)
    assert w.nbytes == sum(a.nbytes for a in own)


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_decode_steps_equal_the_plain_attention_bit_for_bit(tmp_path, monkeypatch, architecture):
    """Token by token through the fast path, then again with compute.attention for each
    step: every recorded array and the logits are identical; the cache grows twice."""
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, architecture)
    model = load_gguf(path)
    ids = model.tokenizer.encode(" the cat sat on the mat, said he to the dog")[:12]

    def run() -> list:
        cache = KVCache()
        steps = [model.forward(np.array(ids[:2]), cache)]
        for token in ids[2:]:  # capacity 4 after the 2-token prompt, then 8, then 16
            steps.append(model.forward(np.array([token]), cache))
        assert cache.length == len(ids) and cache.keys[0].shape[1] == 16
        return steps

    fast = run()

    def plain(q, k, v, scale, keep=None, cap=0.0):
        assert keep is None and cap == 0.0  # no sliding window, no soft-capping here
        kv_of = model.kv_heads
        att = attention(q, k[kv_of], v[kv_of], causal=True)
        assert att.scale == scale
        return att.scores, att.weights, att.output

    monkeypatch.setattr(llama, "attend_one_row", plain)
    slow = run()
    for a, b in zip(fast, slow, strict=True):
        for name in ("logits", "query", "key", "value", "scores", "weights", "hidden_states"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)

    # and the incremental pass agrees with one full pass to float32 rounding
    full = model.forward(np.array(ids))
    np.testing.assert_allclose(fast[-1].weights[:, :, 0], full.weights[:, :, -1], atol=1e-5)
    np.testing.assert_allclose(fast[-1].logits[0], full.logits[-1], atol=1e-4, rtol=1e-5)
    cached_keys = np.concatenate([step.key for step in fast], axis=2)  # (L, H_kv, t, d)
    np.testing.assert_allclose(cached_keys, full.key, atol=1e-5)


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_whole_tensor_dequantization_equals_gguf_bit_for_bit(kind, monkeypatch):
    import gguf
    from gguf.quants import dequantize, quantize

    import attn_explorer.models.formats.dequantize as fast

    qtype = gguf.GGMLQuantizationType[kind]
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((70, 96)) * rng.uniform(0.01, 50, (70, 1))).astype(np.float32)
    values[3] = 0  # an all-zero row: d = 0
    packed = quantize(values, qtype)
    monkeypatch.setattr(fast, "CHUNK_VALUES", 7 * 32)  # chunks that do not divide the blocks
    mine = fast.dequantize_fast(packed, kind)
    assert mine is not None and mine.dtype == np.float32 and mine.shape == (70, 96)
    np.testing.assert_array_equal(mine, dequantize(packed, qtype))
    assert fast.dequantize_fast(packed, "IQ2_XXS") is None  # types not listed: gguf's own loop
