"""Hostile GGUF files for tests: a real (or tiny) GGUF rewritten with ``gguf.GGUFWriter``.

``rewrite_gguf(source, target, metadata={...}, tensors={...})`` copies every metadata
value and tensor of ``source`` into ``target``, except that each key in ``metadata``
is replaced by its value (``DELETE`` removes it; a :class:`Typed` value sets the
GGUF type exactly, such as a float in an integer key or a u32 array of tokens)
and each tensor in ``tensors`` by the given float32 array (stored as F32).
``retype_tensor`` edits one tensor's type in the header, byte by byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DELETE = object()


@dataclass(frozen=True)
class Typed:
    """A metadata value with its GGUF type named (``"F32"``, ``"U32"``, ``"STRING"``, …);
    ``item`` is an array's item type."""

    value: Any
    kind: str
    item: str | None = None


def _guess(value: Any) -> Typed:
    if isinstance(value, bool):
        return Typed(value, "BOOL")
    if isinstance(value, int):
        return Typed(value, "UINT32" if 0 <= value < 2**32 else "INT64")
    if isinstance(value, float):
        return Typed(value, "FLOAT32")
    if isinstance(value, str):
        return Typed(value, "STRING")
    if isinstance(value, (list, tuple)):
        first = value[0] if value else ""
        item = (
            _guess(first).kind if not isinstance(first, int) or isinstance(first, bool) else "INT32"
        )
        return Typed(list(value), "ARRAY", item)
    raise TypeError(f"no GGUF type for {type(value).__name__}")


def rewrite_gguf(
    source: str | Path,
    target: str | Path,
    metadata: dict[str, Any] | None = None,
    tensors: dict[str, np.ndarray] | None = None,
) -> Path:
    """Copy ``source`` to ``target`` with ``metadata`` keys and ``tensors`` replaced (see
    module doc)."""
    import gguf

    from attn_explorer.models.formats.gguf_file import GGUFFile

    metadata, tensors = metadata or {}, tensors or {}
    file = GGUFFile(source)
    arch = str(file.get("general.architecture", "llama"))
    writer = gguf.GGUFWriter(str(target), arch)
    writer.kv_data[0].clear()  # the writer's own general.architecture: copied below instead
    keys = [k for k in file.scalars if k != "general.alignment"]
    keys += [k for k in metadata if k not in file.scalars]
    for key in keys:
        value = metadata[key] if key in metadata else file.get(key)
        if value is DELETE:
            continue
        typed = value if isinstance(value, Typed) else _guess(value)
        kind = gguf.GGUFValueType[typed.kind]
        item = gguf.GGUFValueType[typed.item] if typed.item else None
        writer.add_key_value(key, typed.value, kind, sub_type=item)
    for name, tensor in file.tensors.items():
        if name in tensors:
            writer.add_tensor(name, np.ascontiguousarray(tensors[name], dtype=np.float32))
        elif tensor.tensor_type.name in ("F32", "F16"):
            writer.add_tensor(name, np.ascontiguousarray(tensor.data))
        else:
            raw = np.ascontiguousarray(tensor.data)
            writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(target)


def retype_tensor(source: str | Path, target: str | Path, name: str, type_name: str) -> Path:
    """Copy ``source`` to ``target`` with tensor ``name``'s quantization type in the header
    set to ``type_name`` (``"I32"``, ``"F64"``, …), a byte-level edit: its bytes stay as
    they were, so they are read as another type's."""
    import struct

    import gguf

    data = bytearray(Path(source).read_bytes())
    encoded = name.encode("utf-8")
    at = data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded)
    (n_dims,) = struct.unpack_from("<I", data, at)
    type_at = at + 4 + 8 * n_dims
    struct.pack_into("<I", data, type_at, int(gguf.GGMLQuantizationType[type_name]))
    Path(target).write_bytes(bytes(data))
    return Path(target)
