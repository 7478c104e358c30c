"""The copy of gguf's type tables in ``formats/ggml_types.py``, and what it buys: opening a
GGUF of F32, F16, Q8_0 or Q4_1 tensors and running a forward never imports ``gguf``.

The tables are checked against the installed ``gguf`` (the independent reference), entry by
entry; a type the copy lacks is still read, through ``gguf`` itself.
"""

import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

from attn_explorer.models.formats import ggml_types  # noqa: E402
from attn_explorer.models.formats.ggml_types import (  # noqa: E402
    FILE_TYPES,
    GGML_TYPES,
    file_type_name,
    ggml_type,
)
from attn_explorer.models.formats.gguf_file import GGUFFile  # noqa: E402


def test_every_tensor_type_in_the_copy_is_gguf_s():
    for type_id, (name, block, block_bytes) in GGML_TYPES.items():
        kind = GGMLQuantizationType(type_id)
        assert kind.name == name
        assert GGML_QUANT_SIZES[kind] == (block, block_bytes), name


def test_every_tensor_type_gguf_knows_is_known():
    for kind in GGMLQuantizationType:
        if kind in GGML_QUANT_SIZES:
            assert ggml_type(int(kind)) == (kind.name, *GGML_QUANT_SIZES[kind])


def test_every_file_type_matches_gguf_s_name():
    for type_id, name in FILE_TYPES.items():
        assert LlamaFileType(type_id).name.removeprefix("MOSTLY_").removeprefix("ALL_") == name
    for kind in LlamaFileType:
        assert file_type_name(int(kind)) == kind.name.removeprefix("MOSTLY_").removeprefix("ALL_")
    assert file_type_name(15) == "Q4_K_M"
    for not_a_type in (999, -1, True, "15", 15.0, None):
        assert file_type_name(not_a_type) == ""


def test_a_type_missing_from_the_copy_is_asked_of_gguf(monkeypatch):
    monkeypatch.delitem(GGML_TYPES, int(GGMLQuantizationType.Q4_K))
    monkeypatch.delitem(FILE_TYPES, 15)
    assert ggml_type(int(GGMLQuantizationType.Q4_K)) == ("Q4_K", 256, 144)
    assert file_type_name(15) == "Q4_K_M"
    assert ggml_type(250) is None and ggml_type(4) is None  # unknown, and the removed Q4_2
    assert ggml_types.GGML_TYPES is GGML_TYPES


def _write(path, tensors):
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, (values, kind) in tensors.items():
        if kind in ("F32", "F16"):
            writer.add_tensor(name, values.astype(np.float32 if kind == "F32" else np.float16))
        else:
            qtype = GGMLQuantizationType[kind]
            packed = gguf.quants.quantize(values, qtype)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("kind", ["F32", "F16", "Q8_0", "Q4_1", "Q5_0"])
def test_dequantize_is_gguf_s_bit_for_bit(tmp_path, kind):
    values = np.random.default_rng(3).standard_normal((6, 256)).astype(np.float32)
    path = tmp_path / "one.gguf"
    _write(path, {"w": (values, kind)})
    ours, theirs = GGUFFile(path), gguf.GGUFReader(path).tensors[0]
    tensor = ours.tensors["w"]
    assert (tensor.type_id, tensor.type_name) == (int(theirs.tensor_type), kind)
    assert tensor.tensor_type == theirs.tensor_type and ours.type_name("w") == kind
    assert ours.can_dequantize("w")
    expected = dequantize(theirs.data, theirs.tensor_type)
    got = ours.dequantize("w")
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    rows = np.array([4, 1, 1])
    np.testing.assert_array_equal(ours.dequantize("w", rows), expected[rows])


def test_an_integer_tensor_is_not_weights(tmp_path):
    path = tmp_path / "ints.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("ids", np.arange(32, dtype=np.int32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = GGUFFile(path)
    assert ours.type_name("ids") == "I32" and not ours.can_dequantize("ids")


def test_opening_and_running_a_q8_0_decoder_does_not_import_gguf(tiny_gguf):
    """The point of the copy: ``gguf/__init__`` (its writer, reader, vocab code and yaml)
    costs 35–85 ms of an open, and the app's own kernels need none of it."""
    script = (
        "import sys\n"
        "from attn_explorer.models import load_model\n"
        f"model = load_model({str(tiny_gguf)!r})\n"
        "out = model.attention(' the cat sat')\n"
        "print(model.notes()[0])\n"
        "print(out.weights.shape, sorted(m for m in sys.modules if m.split('.')[0] == 'gguf'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    notes, last = done.stdout.strip().splitlines()[-2:]
    assert "Q8_0" in notes and "F32" in notes  # the type names came from the copy
    assert last.endswith("[]"), last  # no gguf module imported
    assert last.startswith("(2, 4, ")  # 2 layers, 4 heads: the forward ran
