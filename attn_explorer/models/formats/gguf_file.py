"""A GGUF file (llama.cpp's format), memory-mapped and checked before anything is trusted.

``GGUFFile(path)`` walks the header itself with bounded reads: every count and length is
checked against the bytes that remain, every tensor's quantization type against the ones
llama.cpp's ``gguf`` package knows (from the copy of its table in
:mod:`~attn_explorer.models.formats.ggml_types`, so an open does not import ``gguf``), and
every tensor's data against the end of the file, so a truncated file or a lying header
costs nothing and ends in one :class:`ModelError` sentence, never a traceback or a huge
allocation. The same walk reads the metadata (arrays when asked for, as lists) and places
each tensor's bytes in the memory map exactly as ``gguf.GGUFReader`` would; the reader
itself is not used, as it makes one numpy view per metadata item (SmolLM2: ~494 000
views, 160 MB of Python objects and most of the load time).

Tensors stay in the memory map; :meth:`GGUFFile.dequantize` turns one (or some of its
rows) into float32 (F32 and F16 here; the block types with ``gguf.quants.dequantize``,
imported then), in PyTorch's (out, in) layout, and :meth:`GGUFFile.release` drops a
dequantized tensor's pages from resident memory.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attn_explorer.models.errors import ModelError
from attn_explorer.models.formats.dequantize import FAST_TYPES
from attn_explorer.models.formats.ggml_types import ggml_type

MAGIC = b"GGUF"
VERSIONS = (2, 3)
#: Bounds no real file comes near: a header beyond them is lying or damaged.
MAX_TENSORS = 100_000
MAX_METADATA = 100_000
MAX_KEY_BYTES = 65_535
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 40
MAX_FILE_BYTES = 1 << 44  # 16 TiB: only a device or a sparse lie is larger
MAX_ARRAY_ITEMS = 1 << 24  # a metadata array (a vocabulary has ~50 000–250 000 entries)

# GGUF metadata value types: 0-7 and 10-12 are scalars of these sizes, 8 a string, 9 an array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_ARRAY_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?"}
_ARRAY_DTYPES |= {10: "<u8", 11: "<i8", 12: "<f8"}
#: What a metadata array's items are, in a reader's words (see GGUFFile.array_header).
_ITEM_KINDS = {t: "integer" for t in (0, 1, 2, 3, 4, 5, 10, 11)}
_ITEM_KINDS |= {6: "float", 12: "float", 7: "bool", _STRING: "string", _ARRAY: "array"}
#: Unquantized types gguf's reader hands out typed (every other type is bytes per row).
_TYPED = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8}
_TYPED |= {"I16": np.int16, "I32": np.int32, "I64": np.int64}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it: GGUF's dims are innermost first."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int


class ArrayAt(NamedTuple):
    """A metadata array, checked but not read: where its item type starts in the file."""

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

    def _strings(self, count: int, what: str) -> list[str]:
        """``count`` strings as :meth:`string` reads them, with the same checks and messages,
        in one loop: a vocabulary's 100 000 method calls were ~0.1 s of opening SmolLM2."""
        out: list[str] = []
        buffer, end, length_at, pos = self.buffer, self.size, _U64.unpack_from, self.pos
        for _ in range(count):
            if pos + 8 > end:
                self.pos = pos
                raise self.fail(f"{what} needs 8 bytes but the file ends")
            length = length_at(buffer, pos)[0]
            pos += 8
            if pos + length > end:
                self.pos = pos
                raise self.fail(f"{what} needs {length:,} bytes but the file ends")
            try:
                out.append(str(buffer[pos : pos + length], "utf-8"))
            except UnicodeDecodeError:
                self.pos = pos + length
                raise self.fail(f"{what} is not UTF-8") from None
            pos += length
        self.pos = pos
        return out

    def skip_value(self, value_type: int, what: str, depth: int = 0, read: bool = False) -> Any:
        """Read one metadata value: a scalar or a string. An array is stepped over and
        given as an :class:`ArrayAt` (read by :meth:`read_array`), or with ``read`` as
        a list: a vocabulary's 100 000 strings need not stay in memory once used."""
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
            at = ArrayAt(self.pos)
            item_type = self.unpack("<I", what)
            count = self.unpack("<Q", what)
            if count > MAX_ARRAY_ITEMS:  # a lying count would loop for minutes below
                raise self.fail(f"{what} claims {count:,} items (at most {MAX_ARRAY_ITEMS:,})")
            if item_type in _SCALAR_SIZES:
                size = count * _SCALAR_SIZES[item_type]
                self.need(size, f"{what} ({count:,} items)")
                items = np.frombuffer(self.buffer, _ARRAY_DTYPES[item_type], count, self.pos)
                self.pos += size
                return items.tolist() if read else at
            if item_type == _STRING:
                self.need(count * 8, f"{what} ({count:,} strings)")  # each has an 8-byte length
                if read:
                    return self._strings(count, what)
                pos, end, length_at = self.pos, self.size, _U64.unpack_from
                for _ in range(count):  # the hot loop of a load: kept to the bare steps
                    if pos + 8 > end:
                        break
                    pos += 8 + length_at(self.buffer, pos)[0]
                    if pos > end:
                        break
                else:
                    self.pos = pos
                    return at
                self.pos = min(pos, end)
                raise self.fail(f"{what} ({count:,} strings) needs more bytes but the file ends")
            raise self.fail(f"{what} is an array of unsupported type {item_type}")
        raise self.fail(f"{what} has unknown value type {value_type}")


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
    quant: dict[int, tuple[str, int, int]] = {}  # the types this file uses, looked up once
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
        if type_id not in quant and (known := ggml_type(type_id)) is not None:
            quant[type_id] = known
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


class Tensor(NamedTuple):
    """One tensor's bytes in the map, as ``gguf.GGUFReader`` hands them out: typed
    (outermost first) for F16/F32/…, else uint8 (rows…, bytes per row)."""

    name: str
    type_id: int  # ggml's type number, as the header has it
    type_name: str  # its name: "Q4_1", "F32", …
    n_bytes: int
    offset: int  # of its first byte in the file
    data: np.ndarray

    @property
    def tensor_type(self) -> Any:
        """The type as ``gguf.GGMLQuantizationType`` (what ``gguf``'s own functions take);
        imports ``gguf``, so the app's paths use ``type_id`` and ``type_name``."""
        from gguf.constants import GGMLQuantizationType

        return GGMLQuantizationType(self.type_id)


class GGUFFile:
    """A checked, memory-mapped GGUF: its metadata and its tensors, dequantized on demand.

    The file is read by :func:`scan_header` alone (``gguf.GGUFReader`` would make one
    numpy view per metadata item: ~494 000 for SmolLM2's vocabulary and merges,
    160 MB of Python objects and most of the load time); ``gguf`` still dequantizes.
    """

    def __init__(self, path: str | Path) -> None:
        from attn_explorer.state.storage.safe_files import FileRefused, open_regular_file

        self.path = Path(path)
        try:  # a folder, FIFO or device named .gguf is said to be one, never opened blocking
            with open_regular_file(self.path, MAX_FILE_BYTES, "GGUF model file") as stream:
                self._map = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except FileRefused as exc:
            raise ModelError(f"{self.path}: {exc}.") from None
        except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
            raise ModelError(f"{self.path}: cannot be read ({exc}).") from None
        view = memoryview(self._map)
        try:
            self.scalars, infos, data_start = scan_header(view, self.path)
        finally:
            view.release()
        self.infos = {info.name: info for info in infos}

        raw = np.frombuffer(self._map, dtype=np.uint8)  # read-only, shares the map
        self.tensors: dict[str, Tensor] = {}
        for info in infos:
            known = ggml_type(info.type_id)
            assert known is not None  # scan_header refused any type it does not know
            kind, block, block_bytes = known
            shape = tuple(reversed(info.dims))  # outermost first
            n_bytes = int(np.prod(info.dims)) // block * block_bytes
            start = data_start + info.offset
            data = raw[start : start + n_bytes]
            if kind in _TYPED:
                data = data.view(_TYPED[kind]).reshape(shape)
            else:
                data = data.reshape(*shape[:-1], shape[-1] // block * block_bytes)
            self.tensors[info.name] = Tensor(info.name, info.type_id, kind, n_bytes, start, data)

    def release(self, name: str) -> None:
        """Drop tensor ``name``'s pages from this process's resident memory (they stay
        in the page cache and are read again on the next use): once a tensor is
        dequantized, its quantized bytes need not count twice."""
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is None:
            return
        tensor = self.tensors[name]
        first = tensor.offset // mmap.PAGESIZE * mmap.PAGESIZE
        end = tensor.offset + tensor.n_bytes
        last = min(-(-end // mmap.PAGESIZE) * mmap.PAGESIZE, len(self._map))
        if last > first:
            self._map.madvise(advice, first, last - first)

    def array_header(self, key: str) -> tuple[str, int] | None:
        """(item type, item count) of metadata array ``key`` without reading its items,
        or None when ``key`` is not an array: the type is ``"string"``, ``"bool"``,
        ``"integer"`` or ``"float"``. Lets a caller compare a count before paying for it."""
        value = self.scalars.get(key)
        if not isinstance(value, ArrayAt):
            return None
        item_type, count = struct.unpack_from("<IQ", self._map, value.offset)
        return _ITEM_KINDS.get(item_type, f"type {item_type}"), count

    def get(self, key: str, default: Any = None) -> Any:
        """A metadata value: scalars and strings as Python values, arrays as lists."""
        value = self.scalars.get(key)
        if isinstance(value, ArrayAt):  # read now, from the map: not kept
            header = _Header(memoryview(self._map), self.path)
            header.pos = value.offset
            try:
                value = header.skip_value(_ARRAY, f"metadata {key!r}", read=True)
            finally:
                header.buffer.release()
        return default if value is None else value

    def has(self, name: str) -> bool:
        return name in self.tensors

    def shape(self, name: str) -> tuple[int, ...]:
        """PyTorch layout: outermost first, so a Linear's weight is (out, in)."""
        return tuple(reversed(self.infos[name].dims))

    def can_dequantize(self, name: str) -> bool:
        """True if tensor ``name``'s type is one ``gguf`` turns into float32 (F32, F16 and
        the quantized types it implements); an integer or F64 tensor is not weights.
        ``gguf`` is asked (and imported) only for a type not written out here."""
        tensor = self.tensors[name]
        if tensor.type_name in ("F32", "F16") or tensor.type_name in FAST_TYPES:
            return True
        from gguf.quants import _type_traits

        return tensor.tensor_type in _type_traits

    def type_name(self, name: str) -> str:
        """Tensor ``name``'s ggml type: "Q4_1", "F32", …"""
        return self.tensors[name].type_name

    def refuse_non_finite(self, name: str, values: np.ndarray) -> np.ndarray:
        """``values`` (tensor ``name``, or rows of it) if every one is finite, else a
        :class:`ModelError` naming the file and the tensor: a model with NaN or ±inf
        weights is damaged, and would only show NaN everywhere."""
        with np.errstate(over="ignore", invalid="ignore"):
            total = values.sum()  # one pass, no tensor-sized temporary: NaN or ±inf if any is
        if np.isfinite(total):  # (finite values that overflow the sum go on to the exact check)
            return values
        finite = np.isfinite(values)
        if not finite.all():
            bad = np.argwhere(~finite)
            where = tuple(int(i) for i in bad[0])
            raise ModelError(
                f"{self.path}: tensor {name!r} holds {len(bad):,} non-finite weights "
                f"({values[where]} at {list(where)}); the file is damaged, download it again."
            )
        return values

    def check_unquantized(self) -> None:
        """Refuse (by name) any unquantized tensor holding NaN or ±inf: read from the map,
        in chunks, no copy kept. Quantized tensors are checked as they are dequantized."""
        for name, tensor in self.tensors.items():
            if tensor.type_name not in ("F16", "F32", "F64"):
                continue
            flat = tensor.data.reshape(-1)
            for start in range(0, flat.size, 1 << 22):
                chunk = flat[start : start + (1 << 22)]
                if not np.isfinite(chunk).all():
                    self.refuse_non_finite(name, tensor.data)

    def dequantize(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Tensor ``name`` (or its ``rows`` along the outermost axis) as float32, (out, in).

        F32 and F16 are the map's values (cast), as ``gguf.quants.dequantize`` gives them;
        every other type is ``gguf``'s, imported on the first such call."""
        tensor = self.tensors[name]
        data = tensor.data if rows is None else tensor.data[rows]
        if tensor.type_name in ("F32", "F16"):  # typed by __init__: gguf's view or cast
            return self.refuse_non_finite(name, np.ascontiguousarray(data, dtype=np.float32))
        from gguf.quants import dequantize

        try:
            values = dequantize(data, tensor.tensor_type)
        except NotImplementedError:
            raise ModelError(
                f"{self.path}: tensor {name!r} is {tensor.type_name}, which the gguf "
                "package cannot dequantize; choose a file with another quantization."
            ) from None
        return self.refuse_non_finite(name, np.ascontiguousarray(values, dtype=np.float32))
