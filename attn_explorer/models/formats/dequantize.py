"""GGUF tensors dequantized a whole tensor at a time, equal bit for bit to gguf's.

``gguf.quants.dequantize`` works in groups of 16 rows (one Python round trip per
group, on a ``np.memmap`` whose every slice runs ``__array_finalize__``): for
SmolLM2's 210 Q4_1 tensors that is ~20 000 small numpy calls, and a Q4_K_M file's
embedding alone is thousands. The arithmetic per block is a handful of elementwise
operations, so doing them over many blocks at once gives the same numbers.

Two block kernels are written out here, the types of the files the app ships with:

    Q4_1 block (20 bytes):  d (f16), m (f16), 16 bytes of nibbles
                            x[i] = d · (low nibble of byte i) + m,   i < 16
                            x[16 + i] = d · (high nibble of byte i) + m
    Q8_0 block (34 bytes):  d (f16), 32 int8 q;   x[i] = q[i] · d

Every other block type (Q4_0, Q5_0, Q5_1, Q2_K … Q6_K, BF16, the IQ types) runs gguf's
own per-block kernel (``gguf.quants.<TYPE>.dequantize_blocks``), the very function its
16-row loop calls, on chunks of many blocks of a plain array instead of 16 rows of the
memory map: the same operations in the same order, so the same bits. F16 and F32 are a
view and a cast. Rows are done in chunks so a large tensor (an embedding) needs little
more than its float32 output.

A tensor can be written into a given array (a layer's Q, K and V rows of one matrix) and,
for llama.cpp's permuted query and key weights, straight into Hugging Face's row order
(:func:`~attn_explorer.models.formats.qk_permutation.stored_order`): chunks are then whole
heads, and the values are the same bits, only placed differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from attn_explorer.models.formats.qk_permutation import stored_order

#: Block types written out here: name -> (values per block, bytes per block).
FAST_TYPES = {"Q4_1": (32, 20), "Q8_0": (32, 34)}

#: Block types that go through gguf's own block kernel in big chunks (issue 27's list and
#: the rest of what gguf-py dequantizes): the same bits as gguf, without its 16-row loop.
GGUF_BLOCK_TYPES = (
    "Q4_0",
    "Q5_0",
    "Q5_1",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "BF16",
    "IQ4_NL",
    "IQ4_XS",
)

#: Blocks dequantized per numpy pass (bounds the temporaries: ~0.5 MB of float32 each at
#: 32 values a block; K-quant blocks hold 256 values, so they go 8× fewer at a time).
CHUNK_VALUES = 4096 * 32


def _q4_1(blocks: np.ndarray) -> np.ndarray:
    """(n, 20) uint8 -> (n, 32) float32, as gguf.quants.Q4_1.dequantize_blocks."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (n, 1)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)  # (n, 1)
    qs = blocks[:, 4:]  # (n, 16)
    nibbles = np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=1)  # (n, 32)
    return (d * nibbles.astype(np.float32)) + m


def _q8_0(blocks: np.ndarray) -> np.ndarray:
    """(n, 34) uint8 -> (n, 32) float32, as gguf.quants.Q8_0.dequantize_blocks."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (n, 1)
    x = blocks[:, 2:].view(np.int8).astype(np.float32)  # (n, 32)
    return x * d


#: A word's four low nibbles: ``word & LOW_NIBBLES`` keeps bits 0-3 of each of its bytes, in
#: either byte order (the mask is the same in every byte).
LOW_NIBBLES = np.uint32(0x0F0F0F0F)


def _q4_1_into(blocks: np.ndarray, out: np.ndarray) -> None:
    """``_q4_1`` written into ``out``: ``blocks`` (…, 20) uint8, C-contiguous (a run of the
    file's blocks); ``out`` (…, 32) float32 with any strides on the leading axes (a Q/K
    weight's un-permuted rows, see :func:`dequantize_fast`).

    The same float32 operations on the same values as gguf (a nibble cast to float32 is exact,
    then d · q, then + m), so the same bits. Only the finding of the nibbles differs: the
    chunk's bytes are masked and shifted as one flat run of 32-bit words, four bytes an
    operation (a per-block (n, 16) operation has an inner loop of 16 bytes), scale bytes
    included and skipped after; the scales are read through a float16 view of the blocks,
    not copied out block by block.
    """
    scales = blocks.view(np.float16)  # (…, 10) halves: d, m, then the nibbles' bytes
    d = scales[..., 0:1].astype(np.float32)  # (…, 1)
    m = scales[..., 1:2].astype(np.float32)  # (…, 1)
    words = blocks.reshape(-1).view(np.uint32)  # (5·blocks,): the chunk's bytes, flat
    nibbles = np.empty((2, words.size), dtype=np.uint32)  # low, high: one per byte's bits 0-3
    np.bitwise_and(words, LOW_NIBBLES, out=nibbles[0])
    np.right_shift(words, np.uint32(4), out=nibbles[1])  # a byte's high nibble to bits 0-3
    np.bitwise_and(nibbles[1], LOW_NIBBLES, out=nibbles[1])  # (the next byte's bits dropped)
    per_block = nibbles.view(np.uint8).reshape(2, *blocks.shape)  # (low / high, …, 20)
    np.copyto(out[..., :16], per_block[0, ..., 4:], casting="unsafe")  # x[i] = q_i
    np.copyto(out[..., 16:], per_block[1, ..., 4:], casting="unsafe")  # x[16 + i] = q_16+i
    np.multiply(out, d, out=out)  # d · q
    np.add(out, m, out=out)  # (d · q) + m


def _q8_0_into(blocks: np.ndarray, out: np.ndarray) -> None:
    """``_q8_0`` written into ``out`` (…, 32) float32: int8 · float32 casts q exactly; the
    scale is read through a float16 view of the blocks, not copied out."""
    d = blocks.view(np.float16)[..., 0:1].astype(np.float32)  # (…, 1)
    np.multiply(blocks[..., 2:].view(np.int8), d, out=out)  # q · d


#: Kernels that write into a given output: no temporaries, no copy (the same bits).
_INTO = {"Q4_1": _q4_1_into, "Q8_0": _q8_0_into}

#: Chunks of a tensor from which the cores share its dequantization (numpy releases the
#: GIL in each of a chunk's operations, so two threads run two chunks at once).
THREADED_CHUNKS = 4


def _gguf_kernel(type_name: str) -> tuple[Callable[[np.ndarray], np.ndarray], int, int] | None:
    """gguf's block kernel for ``type_name`` with its (values, bytes) per block, or None."""
    try:
        from gguf import quants
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:  # pragma: no cover - gguf is a dependency
        return None
    traits: Any = getattr(quants, type_name, None)
    kind = getattr(GGMLQuantizationType, type_name, None)
    if traits is None or kind is None or not hasattr(traits, "dequantize_blocks"):
        return None
    traits.init_grid()  # the IQ types' lookup grid; a no-op for the others
    per_block, block_bytes = GGML_QUANT_SIZES[kind]
    return traits.dequantize_blocks, int(per_block), int(block_bytes)


def kernel_for(type_name: str) -> tuple[Callable[[np.ndarray], np.ndarray], int, int] | None:
    """The block kernel that dequantizes ``type_name`` here, with (values, bytes) per block."""
    if type_name == "Q4_1":
        return _q4_1, *FAST_TYPES["Q4_1"]
    if type_name == "Q8_0":
        return _q8_0, *FAST_TYPES["Q8_0"]
    if type_name in GGUF_BLOCK_TYPES:
        return _gguf_kernel(type_name)
    return None


def dequantize_fast(
    data: np.ndarray, type_name: str, out: np.ndarray | None = None, heads: int = 0
) -> np.ndarray | None:
    """``data`` (rows, bytes per row) of a quantized tensor as float32 (rows, values);
    None for a type this module does not take (let gguf do it).

    ``out`` (rows, values) float32, C-contiguous: the values are written there, and it is
    returned, instead of a new array (a layer's query rows inside its joined Q/K/V matrix).
    ``heads`` > 0: the rows come out with llama.cpp's Q/K permutation undone
    (:func:`~attn_explorer.models.formats.qk_permutation.unpermute_rows`), each written
    straight to its place through :func:`stored_order`, so a permuted weight costs no second
    copy. The values are the same bits either way: only where they are written changes.
    """
    raw = np.asarray(data)  # a plain view of the mapped bytes: no memmap finalizers
    if out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous):
        raise ValueError("dequantize_fast writes into a C-contiguous float32 array only")
    if type_name in ("F32", "F16"):
        values = raw.view(np.float32 if type_name == "F32" else np.float16)
        if out is None and not heads:  # F32: the map itself when contiguous; F16: a cast
            return np.ascontiguousarray(values, dtype=np.float32)
        target = np.empty(values.shape, dtype=np.float32) if out is None else out
        places = stored_order(target, heads)  # (rows, …) or (heads, d/2, pair, …)
        np.copyto(places, values.reshape(places.shape))  # the stored rows, in stored order
        return target
    found = kernel_for(type_name)
    if found is None:
        return None
    kernel, per_block, block_bytes = found
    raw = raw.view(np.uint8)
    if raw.shape[-1] % block_bytes or (heads and raw.ndim != 2):
        return None  # not whole blocks, or rows that are not a weight's (out, in)
    shape = (*raw.shape[:-1], raw.shape[-1] // block_bytes * per_block)
    target = np.empty(shape, dtype=np.float32) if out is None else out
    if target.shape != shape:
        raise ValueError(f"dequantize_fast: {shape} values do not fit an output of {target.shape}")
    # The stored rows' blocks, and where each block's values go: (blocks, …) and
    # (blocks, values) for a plain tensor; (heads, d/2, pair, blocks per row, …) for a
    # permuted one, whose places are un-permuted rows (splitting the contiguous last axis
    # of a view is a view, so the writes land in ``target``).
    order = stored_order(target, heads)
    stored = raw.reshape(*order.shape[:-1], -1, block_bytes)
    places = order.reshape(*order.shape[:-1], -1, per_block)
    if not heads:  # one run of blocks, cut anywhere
        stored, places = stored.reshape(-1, block_bytes), places.reshape(-1, per_block)
    blocks_per_item = int(np.prod(stored.shape[1:-1], dtype=np.int64))  # 1, or a head's
    step = max(1, CHUNK_VALUES // per_block // blocks_per_item)
    into = _INTO.get(type_name)

    def run(starts: Iterator[int]) -> None:
        # A file's NaN or ∞ scale gives NaN values, as in gguf; the weights' finiteness is
        # checked where they are loaded, by tensor name, not warned about here.
        with np.errstate(invalid="ignore", over="ignore"):
            for start in starts:  # next() on a range iterator is atomic under the GIL
                part, place = stored[start : start + step], places[start : start + step]
                if into is not None:
                    into(part, place)
                else:  # gguf's kernels take (blocks, bytes): a run of whole blocks
                    place[...] = kernel(part.reshape(-1, block_bytes)).reshape(place.shape)

    _on_cores(run, range(0, stored.shape[0], step))
    return target


def finite_by_scales(data: np.ndarray, type_name: str) -> bool:
    """True when every value :func:`dequantize_fast` gives for ``data`` is sure to be finite
    because every block's float16 scales are: a look at one or two numbers in 32 instead of
    a pass over the values. False means "check the values" (any other type, or a scale that
    is NaN or ±∞).

    For Q4_1 (x = d·q + m, 0 ≤ q ≤ 15) and Q8_0 (x = q·d, |q| ≤ 128), finite scales are at
    most 65 504, so |x| stays below 2²⁴, far inside float32; and a non-finite scale makes
    every value of its block NaN or ±∞ (0·∞ is NaN), so the answer is exact both ways.
    """
    if type_name not in FAST_TYPES:
        return False
    raw = np.asarray(data).view(np.uint8)
    halves = raw.reshape(-1, FAST_TYPES[type_name][1]).view(np.float16)  # (blocks, bytes/2)
    scales = halves[:, :2] if type_name == "Q4_1" else halves[:, :1]  # (d, m) or (d,)
    return bool(np.isfinite(scales).all())


def _on_cores(run: Callable[[Iterator[int]], None], starts: range) -> None:
    """``run`` over ``starts`` here and, for a big tensor, in the shared pool's threads too.

    Each chunk is written by whichever thread takes it, with the same kernel, so the
    bits do not depend on the threads. A helper not started by the time this thread has
    taken every chunk is cancelled, not waited for: a caller that is itself a task of the
    pool never waits on a task that cannot start.
    """
    from attn_explorer.compute.softmax import WORKERS, executor

    shared = iter(starts)
    if WORKERS == 1 or len(starts) < THREADED_CHUNKS:
        run(shared)
        return
    helpers = [executor().submit(run, shared) for _ in range(WORKERS - 1)]
    run(shared)
    for helper in helpers:
        if not helper.cancel():
            helper.result()


def quantization_mix(type_names: list[str]) -> str:
    """A file's tensors by type, most common first: ``"168 × Q4_K, 30 × Q6_K, 61 × F32"``."""
    counts: dict[str, int] = {}
    for name in type_names:
        counts[name] = counts.get(name, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} × {name}" for name, count in ordered)
