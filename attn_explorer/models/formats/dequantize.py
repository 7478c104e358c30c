"""Q4_1 and Q8_0 dequantized over a whole tensor at once, equal bit for bit to gguf's.

``gguf.quants.dequantize`` works in groups of 16 rows (one Python round trip per
group, on a ``np.memmap`` whose every slice runs ``__array_finalize__``): for
SmolLM2's 210 Q4_1 tensors that is ~20 000 small numpy calls. The arithmetic per
block is a handful of elementwise float32 operations, so doing them over many blocks
at once gives the same numbers:

    Q4_1 block (20 bytes):  d (f16), m (f16), 16 bytes of nibbles
                            x[i] = d · (low nibble of byte i) + m,   i < 16
                            x[16 + i] = d · (high nibble of byte i) + m
    Q8_0 block (34 bytes):  d (f16), 32 int8 q;   x[i] = q[i] · d

Other types go to gguf. Rows are done in chunks so a large tensor (an embedding)
needs little more than its float32 output.
"""

from __future__ import annotations

import numpy as np

#: quantization type name -> (values per block, bytes per block)
FAST_TYPES = {"Q4_1": (32, 20), "Q8_0": (32, 34)}

#: Blocks dequantized per numpy pass (bounds the temporaries: ~0.5 MB of float32 each).
CHUNK_BLOCKS = 4096


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


def dequantize_fast(data: np.ndarray, type_name: str) -> np.ndarray | None:
    """``data`` (rows, bytes per row) of a FAST_TYPES tensor as float32 (rows, values);
    None for any other type (let gguf do it)."""
    if type_name not in FAST_TYPES:
        return None
    per_block, block_bytes = FAST_TYPES[type_name]
    raw = np.asarray(data, dtype=np.uint8)  # a plain view of the mapped bytes
    rows = raw.reshape(-1, raw.shape[-1])
    if rows.shape[1] % block_bytes:
        return None
    blocks = rows.reshape(-1, block_bytes)  # (n, block bytes): rows are whole blocks
    out = np.empty((blocks.shape[0], per_block), dtype=np.float32)
    kernel = _q4_1 if type_name == "Q4_1" else _q8_0
    for start in range(0, blocks.shape[0], CHUNK_BLOCKS):
        out[start : start + CHUNK_BLOCKS] = kernel(blocks[start : start + CHUNK_BLOCKS])
    return out.reshape(*raw.shape[:-1], raw.shape[-1] // block_bytes * per_block)
