"""GGML's tensor types and llama.cpp's file types, by id: read without importing ``gguf``.

A GGUF header names each tensor's type by number (ggml.h's ``enum ggml_type``) and the
file's overall quantization by another (llama.h's ``enum llama_ftype``, metadata key
``general.file_type``). llama.cpp's ``gguf`` package has both tables
(``gguf.constants.GGMLQuantizationType`` with ``GGML_QUANT_SIZES``, and
``LlamaFileType``), but importing any part of it runs ``gguf/__init__``, which also
imports its writer, its reader, its vocabulary code, its tensor-name mapping and
``yaml``: 35–85 ms of every open, before a single byte of the model is read. The few
numbers the reader needs are copied here instead, and
``tests/models/test_ggml_types.py`` holds them equal to the installed ``gguf``'s.

An id missing here (a type newer than this table) is looked up in ``gguf`` itself, so
the reader still knows every type the installed ``gguf`` knows; only then is it imported.
``gguf`` stays the dequantizer of every block type not written out in
:mod:`~attn_explorer.models.formats.dequantize`.
"""

from __future__ import annotations

#: ggml type id -> (name, values per block, bytes per block), as gguf 0.19's
#: ``GGML_QUANT_SIZES``. Ids 4, 5 (the removed Q4_2, Q4_3) and 31–33, 36–38 (removed or
#: never shipped) are not types any more.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

#: llama.cpp's ``general.file_type`` id -> its name without gguf's ``MOSTLY_`` or ``ALL_``
#: prefix, as gguf 0.19's ``LlamaFileType``.
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    1024: "GUESSED",
}


def ggml_type(type_id: int) -> tuple[str, int, int] | None:
    """(name, values per block, bytes per block) of tensor type ``type_id``, or None if
    neither this table nor the installed ``gguf`` knows it."""
    known = GGML_TYPES.get(type_id)
    if known is not None:
        return known
    try:  # a type newer than this table: the installed gguf may know it
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:  # pragma: no cover - gguf is a dependency
        return None
    try:
        kind = GGMLQuantizationType(type_id)
    except ValueError:
        return None
    sizes = GGML_QUANT_SIZES.get(kind)
    return None if sizes is None else (kind.name, int(sizes[0]), int(sizes[1]))


def file_type_name(file_type: object) -> str:
    """llama.cpp's name of a GGUF's ``general.file_type`` ("Q4_K_M"), or "" if unknown."""
    if not isinstance(file_type, int) or isinstance(file_type, bool):
        return ""
    known = FILE_TYPES.get(file_type)
    if known is not None:
        return known
    try:  # a file type newer than this table
        from gguf.constants import LlamaFileType
    except ImportError:  # pragma: no cover - gguf is a dependency
        return ""
    try:
        kind = LlamaFileType(file_type)
    except ValueError:
        return ""
    return kind.name.removeprefix("MOSTLY_").removeprefix("ALL_")
