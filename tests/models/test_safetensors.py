"""The safetensors reader: round trips, dtype conversion, and every way a file can be broken."""

import json

import numpy as np
import pytest

from attn_explorer.models import SafetensorsFile, save_safetensors


def write_raw(path, header: dict, data: bytes = b"", header_len: int | None = None):
    encoded = json.dumps(header).encode()
    length = len(encoded) if header_len is None else header_len
    path.write_bytes(length.to_bytes(8, "little") + encoded + data)
    return path


def test_round_trip_keeps_values_shapes_and_dtypes(tmp_path):
    rng = np.random.default_rng(1)
    tensors = {
        "a": rng.standard_normal((3, 4)).astype(np.float32),
        "b": rng.standard_normal(5).astype(np.float16),
        "c": rng.standard_normal((2, 2)),
        "ids": np.arange(6, dtype=np.int64).reshape(1, 6),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    path = save_safetensors(tmp_path / "t.safetensors", tensors, metadata={"format": "pt"})
    file = SafetensorsFile(path)
    assert file.names() == list(tensors)
    assert file.metadata == {"format": "pt"}
    np.testing.assert_array_equal(file.get("a"), tensors["a"])
    assert file.get("b").dtype == np.float32
    np.testing.assert_array_equal(file.get("b"), tensors["b"].astype(np.float32))
    assert file.get("c").dtype == np.float32  # F64 comes back as float32 too
    np.testing.assert_allclose(file.get("c"), tensors["c"], rtol=1e-7)
    assert file.get("ids").dtype == np.int64
    np.testing.assert_array_equal(file.get("ids"), tensors["ids"])
    assert file.get("empty").shape == (0, 3)
    assert file.shape("a") == (3, 4) and file.dtype("b") == "F16"


def test_bf16_is_widened_to_float32(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 0.0], dtype=np.float32)
    path = save_safetensors(tmp_path / "t.safetensors", {"w": values}, bf16=["w"])
    file = SafetensorsFile(path)
    assert file.dtype("w") == "BF16"
    out = file.get("w")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, values, rtol=2**-8)  # bfloat16 keeps 8 significant bits
    np.testing.assert_array_equal(out[:3], values[:3])  # exactly representable ones are exact


def test_float32_tensor_is_a_view_of_the_mapped_file(tmp_path):
    path = save_safetensors(tmp_path / "t.safetensors", {"w": np.ones((4, 4), np.float32)})
    array = SafetensorsFile(path).get("w")
    assert not array.flags.owndata and not array.flags.writeable
    assert type(array) is np.ndarray


def test_truncated_data_is_a_clear_error(tmp_path):
    path = save_safetensors(tmp_path / "t.safetensors", {"w": np.ones(100, np.float32)})
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ValueError, match="truncated"):
        SafetensorsFile(path)


def test_truncated_header_is_a_clear_error(tmp_path):
    path = save_safetensors(tmp_path / "t.safetensors", {"w": np.ones(100, np.float32)})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ValueError, match="truncated"):
        SafetensorsFile(path)


@pytest.mark.parametrize("size", [0, 5])
def test_file_shorter_than_the_length_field(tmp_path, size):
    path = tmp_path / "t.safetensors"
    path.write_bytes(b"\x00" * size)
    with pytest.raises(ValueError, match="too short"):
        SafetensorsFile(path)


def test_implausible_header_length(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes((2**62).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="not a safetensors file"):
        SafetensorsFile(path)


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        SafetensorsFile(tmp_path / "nope.safetensors")


@pytest.mark.parametrize(
    ("header", "data", "message"),
    [
        ([1, 2], b"", "not an object"),
        ({"w": 3}, b"", "not an object"),
        ({"w": {"dtype": "Q8", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "dtype"),
        ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "shape"),
        ({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, b"\0" * 8, "shape"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, b"\0" * 8, "data_offsets"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, "data_offsets"),
        ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12"),
        ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, "truncated"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            b"\0" * 12,
            "overlap",
        ),
        ({"__metadata__": [1], "w": {}}, b"", "__metadata__"),
    ],
)
def test_malformed_header(tmp_path, header, data, message):
    path = write_raw(tmp_path / "t.safetensors", header, data)
    with pytest.raises(ValueError, match=message):
        SafetensorsFile(path)


def test_header_that_is_not_json(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes((4).to_bytes(8, "little") + b"\xff{[x")
    with pytest.raises(ValueError, match="JSON"):
        SafetensorsFile(path)


def test_unknown_tensor_name(tmp_path):
    path = save_safetensors(tmp_path / "t.safetensors", {"w": np.ones(2, np.float32)})
    with pytest.raises(KeyError, match="no tensor named"):
        SafetensorsFile(path).get("v")
