"""A GGUF file (llama.cpp's format), memory-mapped and checked before anything is trusted.

``GGUFFile(path)`` first walks the header itself with bounded reads: every count
and length is checked against the bytes that remain, every tensor's quantization
type against the ones llama.cpp's ``gguf`` package knows, and every tensor's data
against the end of the file. Only then does ``gguf.GGUFReader`` (llama.cpp's own
reader) parse it, so a truncated file or a lying header costs nothing and ends in
one :class:`ModelError` sentence, never a traceback or a huge allocation.

Tensors stay in the memory map; :meth:`GGUFFile.dequantize` turns one (or some of
its rows) into float32 with ``gguf.quants.dequantize``, in PyTorch's (out, in) layout.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attn_explorer.models.errors import ModelError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
#: Bounds no real file comes near: a header beyond them is lying or damaged.
MAX_TENSORS = 100_000
MAX_METADATA = 100_000
MAX_KEY_BYTES = 65_535
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 40
MAX_ARRAY_ITEMS = 1 << 24  # a metadata array (a vocabulary has ~50 000–250 000 entries)

# GGUF metadata value types: 0-7 and 10-12 are scalars of these sizes, 8 a string, 9 an array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it: GGUF's dims are innermost first."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int


class _Header:
    """A bounded cursor over the file's bytes; every read checks what remains first."""

    def __init__(self, buffer: memoryview, path: Path) -> None:
        self.buffer = buffer
        self.size = len(buffer)
        self.pos = 0
        self.path = path

    def fail(self, what: str) -> ModelError:
        return ModelError(
            f"{self.path}: {what} at byte {self.pos:,}; the file is truncated or not a valid GGUF."
        )

    def need(self, count: int, what: str) -> None:
        if count < 0 or self.pos + count > self.size:
            raise self.fail(f"{what} needs {count:,} bytes but the file ends")

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        value = struct.unpack_from(fmt, self.buffer, self.pos)[0]
        self.pos += size
        return value

    def string(self, what: str, limit: int | None = None) -> str:
        length = self.unpack("<Q", what)
        if limit is not None and length > limit:
            raise self.fail(f"{what} claims {length:,} bytes")
        self.need(length, what)
        raw = bytes(self.buffer[self.pos : self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def skip_value(self, value_type: int, what: str, depth: int = 0) -> Any:
        """Step over one metadata value; return it if it is a scalar or a string."""
        if value_type in _SCALAR_SIZES:
            size = _SCALAR_SIZES[value_type]
            self.need(size, what)
            fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
            fmt |= {10: "<Q", 11: "<q", 12: "<d"}
            value = struct.unpack_from(fmt[value_type], self.buffer, self.pos)[0]
            self.pos += size
            return value
        if value_type == _STRING:
            return self.string(what)
        if value_type == _ARRAY and depth == 0:
            item_type = self.unpack("<I", what)
            count = self.unpack("<Q", what)
            if count > MAX_ARRAY_ITEMS:  # a lying count would loop for minutes below
                raise self.fail(f"{what} claims {count:,} items (at most {MAX_ARRAY_ITEMS:,})")
            if item_type in _SCALAR_SIZES:
                self.need(count * _SCALAR_SIZES[item_type], f"{what} ({count:,} items)")
                self.pos += count * _SCALAR_SIZES[item_type]
            elif item_type == _STRING:
                self.need(count * 8, f"{what} ({count:,} strings)")  # each has an 8-byte length
                for _ in range(count):
                    length = self.unpack("<Q", what)
                    self.need(length, what)
                    self.pos += length
            else:
                raise self.fail(f"{what} is an array of unsupported type {item_type}")
            return None
        raise self.fail(f"{what} has unknown value type {value_type}")


def _quant_types() -> dict[int, tuple[str, int, int]]:
    """type id -> (name, block size, bytes per block), for every type ``gguf`` knows."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return {
        int(kind): (kind.name, *GGML_QUANT_SIZES[kind])
        for kind in GGMLQuantizationType
        if kind in GGML_QUANT_SIZES
    }


def scan_header(buffer: memoryview, path: Path) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """Walk the header with bounded reads: (scalar metadata, tensors, start of tensor data).

    Raises :class:`ModelError` naming the first thing that does not fit the file.
    """
    header = _Header(buffer, path)
    if header.size < 24 or bytes(buffer[:4]) != MAGIC:
        raise ModelError(f"{path}: not a GGUF file (it does not start with 'GGUF').")
    header.pos = 4
    version = header.unpack("<I", "version")
    if version not in VERSIONS:
        raise ModelError(f"{path}: GGUF version {version}; only versions 2 and 3 are read.")
    n_tensors = header.unpack("<Q", "tensor count")
    n_metadata = header.unpack("<Q", "metadata count")
    if n_tensors > MAX_TENSORS or n_metadata > MAX_METADATA:
        raise header.fail(f"{n_tensors:,} tensors and {n_metadata:,} metadata entries")
    metadata: dict[str, Any] = {}
    for _ in range(n_metadata):
        key = header.string("a metadata key", MAX_KEY_BYTES)
        value_type = header.unpack("<I", f"metadata {key!r}")
        metadata[key] = header.skip_value(value_type, f"metadata {key!r}")
    quant = _quant_types()
    tensors = []
    for _ in range(n_tensors):
        name = header.string("a tensor name", MAX_KEY_BYTES)
        n_dims = header.unpack("<I", f"tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise header.fail(f"tensor {name!r} has {n_dims} dimensions")
        dims = tuple(header.unpack("<Q", f"tensor {name!r}") for _ in range(n_dims))
        if min(dims) < 1 or int(np.prod(dims, dtype=object)) > MAX_ELEMENTS:
            raise header.fail(f"tensor {name!r} has shape {dims}")
        type_id = header.unpack("<I", f"tensor {name!r}")
        if type_id not in quant:
            raise ModelError(
                f"{path}: tensor {name!r} has quantization type {type_id}, which this reader "
                "does not know; convert the model with a current llama.cpp."
            )
        offset = header.unpack("<Q", f"tensor {name!r}")
        tensors.append(TensorInfo(name, dims, type_id, offset))
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise header.fail(f"general.alignment {alignment!r}")
    data_start = -(-header.pos // alignment) * alignment
    for info in tensors:
        kind, block, block_bytes = quant[info.type_id]
        if info.dims[0] % block:
            raise header.fail(
                f"tensor {info.name!r} has rows of {info.dims[0]} ({kind} packs {block})"
            )
        n_bytes = int(np.prod(info.dims, dtype=object)) // block * block_bytes
        end = data_start + info.offset + n_bytes
        if end > header.size:
            raise ModelError(
                f"{path}: tensor {info.name!r} ends at byte {end:,} but the file has "
                f"{header.size:,}; the file is truncated (download it again)."
            )
    return metadata, tensors, data_start


class GGUFFile:
    """A checked, memory-mapped GGUF: its metadata and its tensors, dequantized on demand."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as stream:
                header_map = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
            raise ModelError(f"{self.path}: cannot be read ({exc}).") from None
        view = memoryview(header_map)
        try:
            self.scalars, infos, _ = scan_header(view, self.path)
        finally:
            view.release()
            header_map.close()  # the reader maps the file itself; one map, not two
        self.infos = {info.name: info for info in infos}
        import gguf  # llama.cpp's reader: now that the header is known to be sound

        try:
            self.reader = gguf.GGUFReader(self.path)
        except (ValueError, KeyError, IndexError, OverflowError) as exc:
            raise ModelError(f"{self.path}: not a valid GGUF ({exc}).") from None
        self.tensors = {tensor.name: tensor for tensor in self.reader.tensors}

    def get(self, key: str, default: Any = None) -> Any:
        """A metadata value: scalars and strings as Python values, arrays as lists."""
        if key in self.scalars and self.scalars[key] is not None:
            return self.scalars[key]
        field = self.reader.get_field(key)
        return default if field is None else field.contents()

    def has(self, name: str) -> bool:
        return name in self.tensors

    def shape(self, name: str) -> tuple[int, ...]:
        """PyTorch layout: outermost first, so a Linear's weight is (out, in)."""
        return tuple(reversed(self.infos[name].dims))

    def type_name(self, name: str) -> str:
        return self.tensors[name].tensor_type.name

    def stored_bytes(self, name: str) -> int:
        return int(self.tensors[name].n_bytes)

    def dequantize(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` (or its ``rows`` along the outermost axis) as float32, (out, in)."""
        from gguf.quants import dequantize

        tensor = self.tensors[name]
        data = tensor.data if rows is None else tensor.data[rows]
        try:
            values = dequantize(data, tensor.tensor_type)
        except NotImplementedError:
            raise ModelError(
                f"{self.path}: tensor {name!r} is {tensor.tensor_type.name}, which the gguf "
                "package cannot dequantize; choose a file with another quantization."
            ) from None
        return np.ascontiguousarray(values, dtype=np.float32)
