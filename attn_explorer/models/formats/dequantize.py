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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

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


def _q4_1_into(blocks: np.ndarray, out: np.ndarray) -> None:
    """``_q4_1`` written into ``out`` (n, 32) float32: the same operations on the same
    values (a nibble is cast to float32 exactly whether as a uint8 array or as the ufunc's
    output), with no temporary (n, 32) arrays: 2.6× faster, the same bits."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (n, 1)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)  # (n, 1)
    qs = blocks[:, 4:]  # (n, 16)
    halves = out.reshape(-1, 2, 16)  # (n, low / high nibbles, 16): a view
    np.bitwise_and(qs, np.uint8(0x0F), out=halves[:, 0], casting="unsafe")  # x[i]
    np.right_shift(qs, np.uint8(4), out=halves[:, 1], casting="unsafe")  # x[16 + i]
    np.multiply(out, d, out=out)  # d · q
    np.add(out, m, out=out)  # (d · q) + m


def _q8_0_into(blocks: np.ndarray, out: np.ndarray) -> None:
    """``_q8_0`` written into ``out`` (n, 32) float32: int8 · float32 casts q exactly."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # (n, 1)
    np.multiply(blocks[:, 2:].view(np.int8), d, out=out)  # q · d


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


def dequantize_fast(data: np.ndarray, type_name: str) -> np.ndarray | None:
    """``data`` (rows, bytes per row) of a quantized tensor as float32 (rows, values);
    None for a type this module does not take (let gguf do it)."""
    raw = np.asarray(data)  # a plain view of the mapped bytes: no memmap finalizers
    if type_name == "F32":
        return np.ascontiguousarray(raw.view(np.float32))
    if type_name == "F16":
        return raw.view(np.float16).astype(np.float32)
    found = kernel_for(type_name)
    if found is None:
        return None
    kernel, per_block, block_bytes = found
    raw = raw.view(np.uint8)
    rows = raw.reshape(-1, raw.shape[-1])
    if rows.shape[1] % block_bytes:
        return None
    blocks = rows.reshape(-1, block_bytes)  # (n, block bytes): rows are whole blocks
    out = np.empty((blocks.shape[0], per_block), dtype=np.float32)
    into = _INTO.get(type_name)
    chunk = max(1, CHUNK_VALUES // per_block)

    def run(starts: Iterator[int]) -> None:
        # A file's NaN or ∞ scale gives NaN values, as in gguf; the weights' finiteness is
        # checked where they are loaded, by tensor name, not warned about here.
        with np.errstate(invalid="ignore", over="ignore"):
            for start in starts:  # next() on a range iterator is atomic under the GIL
                part = blocks[start : start + chunk]
                if into is not None:
                    into(part, out[start : start + chunk])
                else:
                    out[start : start + chunk] = kernel(part)

    _on_cores(run, range(0, blocks.shape[0], chunk))
    return out.reshape(*raw.shape[:-1], raw.shape[-1] // block_bytes * per_block)


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


def file_type_name(file_type: object) -> str:
    """llama.cpp's name of a GGUF's ``general.file_type`` ("Q4_K_M"), or "" if unknown."""
    try:
        from gguf.constants import LlamaFileType
    except ImportError:  # pragma: no cover - gguf is a dependency
        return ""
    if not isinstance(file_type, int) or isinstance(file_type, bool):
        return ""
    try:
        return LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        return ""
