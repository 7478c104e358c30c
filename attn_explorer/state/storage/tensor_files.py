"""Query, key and value from a file: ``.npz``, ``.npy`` or ``.safetensors``, read safely. Qt-free.

* **Headers first.** :func:`open_tensor_file` reads only each array's name, dtype and
  shape (a ``.npy`` header; a zip directory and each member's ``.npy`` header; the
  safetensors JSON header). Every array is checked against the bytes really in the file
  and against the window's limits before a byte of it is read, so a header that claims
  4 GB in a small file is refused at once; :meth:`TensorFile.read` then reads exactly
  what the header promised, never more.
* **Never unpickles.** ``np.load`` is not used at all: an array of Python objects (what
  ``allow_pickle`` would unpickle) is refused from its header.
* **One message.** Anything the app cannot take raises :class:`TensorFileError` (a
  ``ValueError``) saying why, in one sentence, after the file's name.

Which array is the query, the key and the value, and which axis is the batch, the head,
the token and the dimension, is a :class:`TensorMapping`: guessed from the names
(``q``/``k``/``v``, ``query``/``key``/``value``), else chosen by the user
(``ui/window/open_tensors.py``). :func:`load_inputs` turns a file and a mapping into the
session's inputs through :func:`~attn_explorer.state.storage.tensor_inputs.explorer_inputs`.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

from attn_explorer.compute.validation import LIMITS
from attn_explorer.state.storage.safe_files import FileRefused, megabytes, open_regular_file
from attn_explorer.state.storage.tensor_inputs import ExplorerInputs, explorer_inputs

SUFFIXES = (".npz", ".npy", ".safetensors")
ROLES = ("query", "key", "value")
AXES = ("batch", "head", "token", "dim")
#: Names each role is recognised by (case-insensitive).
ROLE_NAMES = {
    "query": ("q", "query", "queries", "xq"),
    "key": ("k", "key", "keys", "xk"),
    "value": ("v", "value", "values", "xv"),
}
#: Files larger than this are refused from their size (three tensors at the limit in
#: float64 are 1.5 GB).
MAX_FILE_BYTES = 2 * 2**30
#: Arrays one file may hold (a zip of a million empty members is not a file of Q, K, V).
MAX_ARRAYS = 64
#: Largest safetensors JSON header (as the model reader's limit).
MAX_HEADER_BYTES = 8 * 2**20
#: Entries of a 1-D array of token names.
MAX_TOKEN_NAMES = LIMITS.max_tokens
SAFETENSORS_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # bfloat16: the top half of a float32
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


class TensorFileError(ValueError):
    """A tensor file the app cannot take; the message names the file and says why."""


@dataclass(frozen=True)
class ArrayInfo:
    """One array as its header describes it (nothing of it read yet)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # as stored: numpy's dtype string ("<f4", ">f8", "<U5"), or "bfloat16"
    #: Where its bytes are: (offset, byte count) in the file, or in the zip member ``member``.
    offset: int = field(repr=False, default=0)
    nbytes: int = field(repr=False, default=0)
    member: str = field(repr=False, default="")
    fortran_order: bool = field(repr=False, default=False)

    @property
    def kind(self) -> str:
        """numpy's kind letter: "f" (bfloat16 too), "i", "u", "U", "S", "b"."""
        return "f" if self.dtype == "bfloat16" else np.dtype(self.dtype).kind

    @property
    def is_numeric(self) -> bool:
        return self.kind in "fiu"

    @property
    def is_text(self) -> bool:
        return self.kind in "US"

    @property
    def label(self) -> str:
        """The dtype as a user reads it: float32, bfloat16, int64, text."""
        if self.dtype == "bfloat16":
            return "bfloat16"
        return "text" if self.is_text else np.dtype(self.dtype).name

    def describe(self) -> str:
        """``q: float32 (2, 4, 8)``: how the open dialog lists it."""
        return f"{self.name}: {self.label} {self.shape}"


@dataclass(frozen=True)
class TensorFile:
    """A tensor file's arrays by name, described from its headers (see the module)."""

    path: Path
    kind: str  # "npz", "npy" or "safetensors"
    arrays: dict[str, ArrayInfo]

    def read(self, name: str) -> np.ndarray:
        """Array ``name``, reading exactly the bytes its header promised (bfloat16 → float32)."""
        info = self.arrays[name]
        try:
            with _open(self.path) as handle:
                if info.member:
                    with zipfile.ZipFile(handle) as archive, archive.open(info.member) as stream:
                        stream.seek(info.offset)
                        data = _read_exactly(stream, info.nbytes)
                else:
                    handle.seek(info.offset)
                    data = _read_exactly(handle, info.nbytes)
        except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, ValueError) as exc:
            raise self._error(f"{name!r} cannot be read ({exc})") from None
        if len(data) != info.nbytes:
            raise self._error(
                f"{name!r} ends after {len(data):,} of its {info.nbytes:,} bytes; the file is "
                "truncated"
            )
        if info.dtype == "bfloat16":
            bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
            return bits.view(np.float32).reshape(info.shape)
        values = np.frombuffer(data, dtype=np.dtype(info.dtype))
        return values.reshape(info.shape, order="F" if info.fortran_order else "C")

    def _error(self, why: str) -> TensorFileError:
        return TensorFileError(f"{self.path.name}: {why}.")


def open_tensor_file(path: str | os.PathLike[str]) -> TensorFile:
    """Describe the arrays of a ``.npz``, ``.npy`` or ``.safetensors`` file from its headers.

    Raises :class:`TensorFileError` for anything the app cannot take (see the module).
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise TensorFileError(
            f"{target.name}: is not a tensor file the app reads; choose a .npz, .npy or "
            ".safetensors file of the query, key and value."
        )
    kind = suffix[1:]
    try:
        with _open(target) as handle:
            size = os.fstat(handle.fileno()).st_size
            if kind == "npy":
                arrays = [_npy_info(handle, "array", size, "")]
            elif kind == "npz":
                arrays = _npz_infos(handle)
            else:
                arrays = _safetensors_infos(handle, size)
    except TensorFileError as exc:
        raise TensorFileError(f"{target.name}: {exc}.") from None
    except FileRefused as exc:
        raise TensorFileError(f"{target.name}: {exc}.") from None
    except (OSError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
        raise TensorFileError(f"{target.name}: is not a readable .{kind} file ({exc}).") from None
    numeric = [info for info in arrays if info.is_numeric]
    if not numeric:
        raise TensorFileError(f"{target.name}: holds no array of numbers.")
    return TensorFile(target, kind, {info.name: info for info in arrays})


@contextmanager
def _open(path: Path) -> Iterator[BinaryIO]:
    with open_regular_file(path, MAX_FILE_BYTES, "tensor file") as handle:
        yield handle


def _read_exactly(stream: IO[bytes], count: int) -> bytes:
    """Up to ``count`` bytes in 16 MB pieces (a short file never costs ``count`` bytes)."""
    pieces, left = [], count
    while left > 0:
        piece = stream.read(min(left, 16 * 2**20))
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def _check_array(info: ArrayInfo, room: int) -> None:
    """Refuse an array whose header claims more bytes than follow it, or more than the limits."""
    if info.nbytes > room:
        raise TensorFileError(
            f"the header of {info.name!r} says {info.label} {info.shape}, "
            f"{megabytes(info.nbytes)} of data, but only {megabytes(max(room, 0))} follow it; "
            "the file is truncated or its header is wrong (nothing was read)"
        )
    elements = math.prod(info.shape)
    limit = MAX_TOKEN_NAMES if info.is_text else LIMITS.max_matrix_elements
    if elements > limit:
        raise TensorFileError(
            f"{info.name!r} is {info.label} {info.shape}, {elements:,} values, over the limit "
            f"of {limit:,} for one tensor; save a smaller slice (fewer heads, tokens or batch "
            "entries)"
        )


def _npy_info(stream: IO[bytes], name: str, size: int, member: str) -> ArrayInfo:
    """The header of one ``.npy`` stream (a file, or a zip member of ``size`` bytes)."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise TensorFileError(f"{name!r} is in .npy format version {version}, not 1.0 or 2.0")
    except TensorFileError:
        raise
    except (ValueError, SyntaxError, EOFError, OverflowError) as exc:
        raise TensorFileError(f"{name!r} has no valid .npy header ({exc})") from None
    if dtype.hasobject:
        raise TensorFileError(
            f"{name!r} holds Python objects, which only unpickling could read, and the app "
            "never unpickles; save plain numbers (np.save with allow_pickle=False)"
        )
    if dtype.kind not in "fiuUSb":
        raise TensorFileError(f"{name!r} has dtype {dtype}, not numbers")
    offset = stream.tell()
    nbytes = math.prod(shape) * dtype.itemsize
    info = ArrayInfo(name, tuple(shape), dtype.str, offset, nbytes, member, bool(fortran))
    _check_array(info, size - offset)
    return info


def _npz_infos(handle: BinaryIO) -> list[ArrayInfo]:
    archive = zipfile.ZipFile(handle)
    members = [m for m in archive.infolist() if not m.is_dir()]
    if len(members) > MAX_ARRAYS:
        raise TensorFileError(f"holds {len(members):,} members, over the limit of {MAX_ARRAYS}")
    infos = []
    for member in members:
        if not member.filename.endswith(".npy"):
            raise TensorFileError(
                f"holds {member.filename!r}, which is not a .npy array (save with np.savez)"
            )
        name = member.filename[: -len(".npy")]
        with archive.open(member) as stream:
            infos.append(_npy_info(stream, name, member.file_size, member.filename))
    return infos


def _safetensors_infos(handle: BinaryIO, size: int) -> list[ArrayInfo]:
    if size < 8:
        raise TensorFileError(f"is {size} bytes, too short for a safetensors header")
    header_len = int.from_bytes(handle.read(8), "little")
    if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
        raise TensorFileError(
            f"says its header is {header_len:,} bytes, but the file has {size - 8:,} after the "
            "length field (and headers over 8 MB are refused); it is not a safetensors file"
        )
    try:
        header = json.loads(handle.read(header_len).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise TensorFileError(
            "has a header that is not JSON; it is not a safetensors file"
        ) from None
    if not isinstance(header, dict):
        raise TensorFileError("has a header that is not a JSON object of tensors")
    header.pop("__metadata__", None)
    if len(header) > MAX_ARRAYS:
        raise TensorFileError(f"holds {len(header):,} tensors, over the limit of {MAX_ARRAYS}")
    data_start, infos = 8 + header_len, []
    for name, entry in header.items():
        if not isinstance(entry, dict) or entry.get("dtype") not in SAFETENSORS_DTYPES:
            got = entry.get("dtype") if isinstance(entry, dict) else entry
            raise TensorFileError(
                f"tensor {name!r} has dtype {str(got)[:40]!r}; supported: "
                + ", ".join(SAFETENSORS_DTYPES)
            )
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not (
            isinstance(shape, list)
            and all(type(n) is int and 0 <= n <= 2**48 for n in shape)
            and isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(n) is int for n in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise TensorFileError(f"tensor {name!r} has a malformed shape or data_offsets")
        stored = SAFETENSORS_DTYPES[entry["dtype"]]
        dtype = "bfloat16" if entry["dtype"] == "BF16" else stored.str
        nbytes = math.prod(shape) * stored.itemsize
        if offsets[1] - offsets[0] != nbytes:
            raise TensorFileError(
                f"tensor {name!r} is {entry['dtype']} {tuple(shape)}, {nbytes:,} bytes, but its "
                f"data_offsets span {offsets[1] - offsets[0]:,}"
            )
        info = ArrayInfo(name, tuple(shape), dtype, data_start + offsets[0], nbytes)
        _check_array(info, size - info.offset)
        infos.append(info)
    return infos


# -- which array is what ---------------------------------------------------------------------
@dataclass(frozen=True)
class TensorMapping:
    """Which array plays each role, and what each of its axes is (batch/head/token/dim)."""

    arrays: dict[str, str]  # role -> array name ("value" may be missing: V = K)
    axes: dict[str, tuple[str, ...]]  # role -> one AXES name per axis of its array

    def to_json(self) -> str:
        return json.dumps(
            {"arrays": self.arrays, "axes": {r: list(a) for r, a in self.axes.items()}}
        )

    @classmethod
    def from_json(cls, text: str) -> TensorMapping | None:
        """A remembered mapping, or None if ``text`` is not one."""
        try:
            data = json.loads(text)
            arrays = {str(r): str(n) for r, n in data["arrays"].items() if r in ROLES}
            axes = {str(r): tuple(str(a) for a in v) for r, v in data["axes"].items() if r in ROLES}
        except (TypeError, ValueError, KeyError, AttributeError):
            return None
        return cls(arrays, axes)


def default_axes(ndim: int) -> tuple[str, ...]:
    """(T, d), (H, T, d) or (B, H, T, d): the last ``ndim`` of batch, head, token, dim."""
    return AXES[max(0, 4 - ndim) :] if ndim <= 4 else ("batch",) * (ndim - 3) + AXES[1:]


def guess_mapping(tensors: TensorFile) -> tuple[TensorMapping, bool]:
    """The likeliest mapping, and whether it is certain (each role found by its name, once).

    Otherwise the guess takes the arrays of numbers in file order (one array: Q = K = V).
    """
    numeric = [info for info in tensors.arrays.values() if info.is_numeric]
    by_role: dict[str, str] = {}
    certain = True
    for role, names in ROLE_NAMES.items():
        found = [info.name for info in numeric if info.name.lower() in names]
        if len(found) == 1:
            by_role[role] = found[0]
        elif found or role != "value":
            certain = False
    if not certain:
        order = [info.name for info in numeric]
        picks = (order * 3)[:3] if len(order) == 1 else order[:3]
        by_role = dict(zip(ROLES, picks, strict=False))
    axes = {role: default_axes(len(tensors.arrays[name].shape)) for role, name in by_role.items()}
    mapping = TensorMapping(by_role, axes)
    return mapping, certain and not mapping_problem(tensors, mapping)


def mapping_problem(tensors: TensorFile, mapping: TensorMapping) -> str:
    """What is wrong with ``mapping`` for this file, in one sentence; '' if nothing."""
    for role in ROLES:
        name = mapping.arrays.get(role)
        if name is None:
            if role == "value":
                continue
            return f"choose the {role} array"
        info = tensors.arrays.get(name)
        if info is None:
            return f"{role}: the file has no array {name!r}"
        if not info.is_numeric:
            return f"{role}: {info.describe()} is not numbers"
        axes = mapping.axes.get(role, ())
        if len(axes) != len(info.shape) or not set(axes) <= set(AXES):
            return f"{role}: name each of the {len(info.shape)} axes of {info.describe()}"
        for axis in AXES:
            count = axes.count(axis)
            if axis in ("token", "dim") and count != 1:
                return f"{role}: exactly one axis of {name!r} must be the {axis} axis"
            if count > 1:
                return f"{role}: only one axis of {name!r} can be the {axis} axis"
    return _shapes_problem(tensors, mapping)


def _shapes_problem(tensors: TensorFile, mapping: TensorMapping) -> str:
    """Whether the mapped (B, H, T, d) shapes fit together, from the headers alone."""
    shapes = {
        role: mapped_shape(tensors.arrays[name], mapping.axes[role])
        for role, name in mapping.arrays.items()
    }
    b, h, t, d = shapes["query"]
    for role in ("key", "value"):
        if role not in shapes:
            continue
        rb, rh, rt, rd = shapes[role]
        for label, size, wanted in (("B", rb, b), ("T", rt, t), ("d", rd, d)):
            if size != wanted:
                return f"{role} has {label} = {size} but the query has {label} = {wanted}"
        if h % rh:
            return f"{role} has H = {rh} heads, which does not divide the query's H = {h}"
    if "value" in shapes and shapes["value"][1] != shapes["key"][1]:
        return f"value has H = {shapes['value'][1]} heads but the key has {shapes['key'][1]}"
    return ""


def mapped_shape(info: ArrayInfo, axes: tuple[str, ...]) -> tuple[int, int, int, int]:
    """(B, H, T, d) of ``info`` read with ``axes`` (a missing batch or head axis is 1)."""
    sizes = dict(zip(axes, info.shape, strict=True))
    b, h, t, d = (sizes.get(axis, 1) for axis in AXES)
    return b, h, t, d


def _as_bhtd(array: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
    """``array`` with its axes named ``axes`` as (B, H, T, d)."""
    order = [axes.index(axis) for axis in AXES if axis in axes]
    moved = np.transpose(array, order)  # the named axes, in batch, head, token, dim order
    missing = [n for n, axis in enumerate(AXES) if axis not in axes]
    return np.expand_dims(moved, missing) if missing else moved  # (B, H, T, d)


def load_inputs(
    tensors: TensorFile, mapping: TensorMapping, causal: bool = False
) -> ExplorerInputs:
    """Read the mapped arrays and check them as the Python API does (ValueError says why)."""
    problem = mapping_problem(tensors, mapping)
    if problem:
        raise TensorFileError(f"{tensors.path.name}: {problem}.")
    arrays: dict[str, np.ndarray] = {}
    notes = []
    for role, name in mapping.arrays.items():
        info = tensors.arrays[name]
        arrays[role] = _as_bhtd(tensors.read(name), mapping.axes[role])
        if info.dtype == "bfloat16":
            notes.append(f"{role}: bfloat16 converted to float32")
    t = arrays["query"].shape[2]
    tokens = None
    text = tensors.arrays.get("tokens")
    if text is not None and text.is_text and text.shape == (t,):
        tokens = [str(token) for token in tensors.read("tokens")]
    try:
        inputs = explorer_inputs(
            arrays["query"], arrays["key"], arrays.get("value"), tokens=tokens, causal=causal
        )
    except ValueError as exc:
        raise TensorFileError(f"{tensors.path.name}: {exc}") from None
    if not notes:
        return inputs
    return ExplorerInputs(inputs.snapshot, inputs.options, inputs.kv_heads, (*notes, *inputs.notes))
