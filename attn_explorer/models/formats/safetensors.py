"""A short, dependency-free reader (and writer) of the safetensors format.

The format is three parts, back to back::

    8 bytes    N, the header length, unsigned little-endian
    N bytes    a JSON object: name -> {"dtype", "shape", "data_offsets": [begin, end]}
               (plus an optional "__metadata__" of strings)
    the rest   raw little-endian tensor bytes; offsets count from here

The file is memory-mapped, so opening a 90 MB model costs a few milliseconds and
a float32 tensor is a view into the page cache. Every header field is checked
before it is used: a truncated or malformed file raises :class:`ModelError` (a
``ValueError``) naming the file and what is wrong, never an ``IndexError``,
``OverflowError`` or ``RecursionError`` from deep inside numpy or json.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

from attn_explorer.models.errors import ModelError
from attn_explorer.state.storage.safe_files import FileRefused, open_regular_file, write_atomic_with

#: Raw little-endian dtype of each safetensors dtype name.
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # bfloat16: the top half of a float32, widened on read
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")

#: Headers larger than this are refused. The reference implementation allows 100 MB, but a
#: header is parsed into Python objects first (~10× its size) and a BERT's is 20-40 KB.
MAX_HEADER_BYTES = 8 * 1024 * 1024
#: Largest extent of one tensor dimension: a product of such extents is computed exactly
#: (Python ints) and compared with the bytes really present, so no int64 ever wraps.
MAX_EXTENT = 2**48


def _bf16_to_float32(raw: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32: shift them into the top half."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype(np.uint16)


class SafetensorsFile:
    """One memory-mapped ``.safetensors`` file, validated on opening.

    ``names()`` lists the tensors, ``shape(name)`` and ``dtype(name)`` describe
    one without reading it, and ``get(name)`` returns it: floating-point tensors
    (F16, BF16, F32, F64) as float32, integer and bool tensors in their own dtype.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        where = f"{self.path}"
        try:  # a folder, FIFO or device is refused before anything blocks or is mapped
            handle = open_regular_file(self.path, sys.maxsize, "weights file")
        except FileRefused as exc:
            if str(exc) == "no such file":
                raise ModelError(f"{where}: cannot read the weights file (no such file).") from None
            raise ModelError(f"{where}: {exc}.") from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 8:
                raise ModelError(
                    f"{where}: the file is {size} bytes, too short for a safetensors header "
                    "(8-byte length + JSON); it is truncated or not a safetensors file."
                )
            header_len = int.from_bytes(handle.read(8), "little")
            if header_len > MAX_HEADER_BYTES:
                raise ModelError(
                    f"{where}: header length {header_len:,} bytes is implausible "
                    f"(limit {MAX_HEADER_BYTES:,}); this is not a safetensors file."
                )
            if 8 + header_len > size:
                raise ModelError(
                    f"{where}: the header says it is {header_len:,} bytes but the file has only "
                    f"{size - 8:,} after the length field; the file is truncated."
                )
            raw_header = handle.read(header_len)
        try:
            header = json.loads(raw_header.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"{where}: the header is not valid UTF-8 JSON ({exc}).") from None
        except RecursionError:
            raise ModelError(f"{where}: the header is nested too deeply to be JSON.") from None
        if not isinstance(header, dict):
            raise ModelError(f"{where}: the header is JSON but not an object of tensors.")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict):
            raise ModelError(f"{where}: '__metadata__' must be an object of strings.")
        self.metadata: dict[str, str] = {str(k): str(v) for k, v in metadata.items()}
        self._data_start = 8 + header_len
        data_len = size - self._data_start
        self._entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
        for name, entry in header.items():
            self._entries[name] = _check_entry(where, name, entry, data_len)
        spans = sorted((begin, end, name) for name, (_, _, begin, end) in self._entries.items())
        for (_, end_a, name_a), (begin_b, _, name_b) in itertools.pairwise(spans):
            if begin_b < end_a:
                raise ModelError(f"{where}: tensors {name_a!r} and {name_b!r} overlap.")
        # A plain ndarray view of the read-only map: results of arithmetic on the
        # weights are ordinary arrays, not np.memmap subclasses. Mapped through a
        # checked handle again, so a file swapped for a FIFO meanwhile cannot block.
        self._buffer = np.zeros(0, dtype=np.uint8)
        if data_len > 0:
            try:
                with open_regular_file(self.path, sys.maxsize, "weights file") as again:
                    mapped = np.memmap(again, dtype=np.uint8, mode="r", offset=self._data_start)
            except (FileRefused, OSError, ValueError) as exc:
                raise ModelError(f"{where}: cannot map the weights ({exc}).") from None
            if len(mapped) != data_len:
                raise ModelError(f"{where}: the file changed while it was being opened.")
            self._buffer = np.asarray(mapped)

    @property
    def data_bytes(self) -> int:
        """Bytes of tensor data after the header (what every tensor's offsets lie within)."""
        return len(self._buffer)

    def names(self) -> list[str]:
        """Tensor names, in header order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of tensor ``name`` as stored."""
        return self._entries[name][1]

    def dtype(self, name: str) -> str:
        """Stored dtype name of tensor ``name`` (``"F32"``, ``"BF16"``, …)."""
        return self._entries[name][0]

    def get(self, name: str) -> np.ndarray:
        """Tensor ``name``; floating point comes back as float32 (a view when stored so)."""
        if name not in self._entries:
            raise KeyError(f"{self.path}: no tensor named {name!r}.")
        dtype_name, shape, begin, end = self._entries[name]
        raw = self._buffer[begin:end].view(DTYPES[dtype_name]).reshape(shape)
        if dtype_name not in FLOAT_DTYPES:
            return raw
        if dtype_name == "BF16":
            values = _bf16_to_float32(raw)
        else:
            values = raw if dtype_name == "F32" else raw.astype(np.float32)
        finite = np.isfinite(values)
        if not finite.all():  # a damaged model, refused at load by name, not NaN downstream
            bad = np.argwhere(~finite)
            at = tuple(int(i) for i in bad[0])
            raise ModelError(
                f"{self.path}: tensor {name!r} holds {len(bad):,} non-finite weights "
                f"({values[at]} at {list(at)}); the file is damaged, download it again."
            )
        return values


def _check_entry(
    where: str, name: str, entry: object, data_len: int
) -> tuple[str, tuple[int, ...], int, int]:
    """Validate one header entry; return (dtype, shape, begin, end)."""
    if not isinstance(entry, dict):
        raise ModelError(f"{where}: header entry {name!r} is not an object.")
    dtype_name = entry.get("dtype")
    if dtype_name not in DTYPES:
        raise ModelError(
            f"{where}: tensor {name!r} has dtype {dtype_name!r}; supported: {', '.join(DTYPES)}."
        )
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_EXTENT for n in shape
    ):
        raise ModelError(
            f"{where}: tensor {name!r} has shape {_short(shape)}; expected a list of sizes "
            f"from 0 to 2**48."
        )
    offsets = entry.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
    ):
        raise ModelError(
            f"{where}: tensor {name!r} has data_offsets {_short(offsets)}; expected [begin, end]."
        )
    begin, end = offsets
    if not 0 <= begin <= end:
        raise ModelError(f"{where}: tensor {name!r} has bad data_offsets [{begin}, {end}].")
    if end > data_len:
        raise ModelError(
            f"{where}: tensor {name!r} ends at byte {end:,} of the data but the file holds only "
            f"{data_len:,} bytes of data; the file is truncated."
        )
    # Exact integers: [2**32, 2**32] must not wrap to 0 bytes as an int64 product would.
    expected = math.prod(shape) * DTYPES[dtype_name].itemsize
    if end - begin != expected:
        raise ModelError(
            f"{where}: tensor {name!r} is {dtype_name} {tuple(shape)}, which needs {expected:,} "
            f"bytes, but its data_offsets span {end - begin:,}."
        )
    return dtype_name, tuple(shape), begin, end


def _short(value: object) -> str:
    """``repr`` of a header value, cut to 60 characters for a one-line message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def save_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    *,
    metadata: Mapping[str, str] | None = None,
    bf16: Iterable[str] = (),
) -> Path:
    """Write ``tensors`` as a safetensors file (dtype kept; names in ``bf16`` stored as BF16).

    Used by the tests to build tiny models; the header is padded with spaces to a
    multiple of 8 bytes so that every tensor starts aligned, as the reference
    writer does.
    """
    as_bf16 = set(bf16)
    names = {np.dtype(d): n for n, d in DTYPES.items() if n != "BF16"}
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    blobs: list[bytes] = []
    offset = 0
    for name, value in tensors.items():
        array = np.asarray(value)
        if name in as_bf16:
            dtype_name, raw = "BF16", _float32_to_bf16(array)
        else:
            little = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
            if little not in names:
                raise ValueError(f"save_safetensors: {name!r} has unsupported dtype {array.dtype}.")
            dtype_name, raw = names[little], np.ascontiguousarray(array, dtype=little)
        blob = raw.tobytes()
        header[name] = {
            "dtype": dtype_name,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)

    def write(handle: BinaryIO) -> None:
        handle.write(len(encoded).to_bytes(8, "little"))
        handle.write(encoded)
        for blob in blobs:
            handle.write(blob)

    return write_atomic_with(Path(path), write)
