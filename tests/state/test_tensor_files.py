"""Issue 28 item 2 without Qt: Q/K/V from .npz, .npy and .safetensors, headers first, never
unpickling, and one message for a file the app cannot take."""

from __future__ import annotations

import json
import pickle
import zipfile

import numpy as np
import pytest

from attn_explorer.models.formats.safetensors import save_safetensors
from attn_explorer.state.storage.tensor_files import (
    TensorFileError,
    TensorMapping,
    guess_mapping,
    load_inputs,
    mapping_problem,
    open_tensor_file,
)

rng = np.random.default_rng(28)
AXES_BHTD = ("batch", "head", "token", "dim")


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A version 1.0 .npy header claiming ``shape`` (the data is whatever follows)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


def test_an_npz_with_q_k_v_is_mapped_by_name_and_loads_exactly(tmp_path):
    q, k, v = (rng.standard_normal((2, 5, 3)).astype(np.float32) for _ in range(3))
    path = tmp_path / "qkv.npz"
    np.savez(path, v=v, q=q, k=k, tokens=np.array(["a", "b", "c", "d", "e"]))
    tensors = open_tensor_file(path)
    assert sorted(tensors.arrays) == ["k", "q", "tokens", "v"]
    assert tensors.arrays["q"].describe() == "q: float32 (2, 5, 3)"
    mapping, certain = guess_mapping(tensors)
    assert certain and mapping.arrays == {"query": "q", "key": "k", "value": "v"}
    assert mapping.axes["query"] == ("head", "token", "dim")
    inputs = load_inputs(tensors, mapping)
    assert inputs.snapshot.tokens == ("a", "b", "c", "d", "e")
    assert inputs.options.dtype == "float32"
    for name, array in (("query", q), ("key", k), ("value", v)):
        np.testing.assert_array_equal(getattr(inputs.snapshot, name)[0], array)


def test_compressed_npz_long_names_and_grouped_keys(tmp_path):
    q, k = rng.standard_normal((1, 6, 4, 2)), rng.standard_normal((1, 2, 4, 2))
    path = tmp_path / "gqa.npz"
    np.savez_compressed(path, Query=q, KEY=k)
    tensors = open_tensor_file(path)
    mapping, certain = guess_mapping(tensors)
    assert certain and mapping.arrays == {"query": "Query", "key": "KEY"}
    inputs = load_inputs(tensors, mapping)
    assert inputs.kv_heads.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_array_equal(inputs.snapshot.key[0, 4], k[0, 1])
    np.testing.assert_array_equal(inputs.snapshot.value, inputs.snapshot.key)  # V = K


def test_ambiguous_names_are_guessed_in_file_order_but_not_certain(tmp_path):
    path = tmp_path / "layer3.npz"
    arrays = {name: rng.standard_normal((4, 2)) for name in ("a", "b", "c")}
    np.savez(path, **arrays)
    mapping, certain = guess_mapping(open_tensor_file(path))
    assert not certain
    assert mapping.arrays == {"query": "a", "key": "b", "value": "c"}
    path2 = tmp_path / "two_q.npz"
    np.savez(path2, q=arrays["a"], Q=arrays["b"], k=arrays["c"])  # two arrays say "query"
    assert guess_mapping(open_tensor_file(path2))[1] is False


def test_axes_mapping_reads_a_batch_token_head_dim_array(tmp_path):
    stored = rng.standard_normal((2, 5, 3, 4))  # (B, T, H, d): transformers before .transpose
    path = tmp_path / "bthd.npz"
    np.savez(path, x=stored, y=stored[::-1].copy())
    tensors = open_tensor_file(path)
    axes = ("batch", "token", "head", "dim")
    mapping = TensorMapping({"query": "x", "key": "y"}, {"query": axes, "key": axes})
    assert mapping_problem(tensors, mapping) == ""
    inputs = load_inputs(tensors, mapping)
    np.testing.assert_array_equal(inputs.snapshot.query, stored.transpose(0, 2, 1, 3))
    assert inputs.snapshot.shape == (2, 3, 5, 4)
    wrong = TensorMapping({"query": "x", "key": "y"},
                          {"query": ("batch", "token", "token", "dim"), "key": axes})  # fmt: skip
    assert mapping_problem(tensors, wrong) == (
        "query: exactly one axis of 'x' must be the token axis"
    )
    short = TensorMapping({"query": "x", "key": "y"}, {"query": axes, "key": AXES_BHTD})
    assert mapping_problem(tensors, short) == "key has T = 3 but the query has T = 5"
    assert TensorMapping.from_json(mapping.to_json()) == mapping
    assert TensorMapping.from_json("not json") is None


def test_a_safetensors_file_with_bf16_and_f16(tmp_path):
    q = rng.standard_normal((2, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 4, 8)).astype(np.float16)
    path = tmp_path / "attn.safetensors"
    save_safetensors(path, {"query": q, "key": k, "value": q}, bf16=["query"])
    tensors = open_tensor_file(path)
    assert tensors.arrays["query"].describe() == "query: bfloat16 (2, 4, 8)"
    mapping, certain = guess_mapping(tensors)
    assert certain
    inputs = load_inputs(tensors, mapping)
    assert "query: bfloat16 converted to float32" in inputs.notes
    assert "key: float16 converted to float32" in inputs.notes
    # bfloat16 keeps 8 bits of mantissa: within 2**-8 relative of the float32 written
    np.testing.assert_allclose(inputs.snapshot.query[0], q, rtol=2**-8)
    np.testing.assert_array_equal(inputs.snapshot.key[0], k.astype(np.float64))


def test_fortran_order_and_big_endian_npy_read_as_written(tmp_path):
    values = np.asfortranarray(rng.standard_normal((3, 5, 2)))
    path = tmp_path / "f.npy"
    np.save(path, values)
    tensors = open_tensor_file(path)
    np.testing.assert_array_equal(tensors.read("array"), values)
    big = tmp_path / "big.npy"
    np.save(big, values.astype(">f8"))
    np.testing.assert_array_equal(open_tensor_file(big).read("array"), values)
    mapping, certain = guess_mapping(open_tensor_file(big))
    assert not certain and mapping.arrays == {"query": "array", "key": "array", "value": "array"}


def refusal(path) -> str:
    with pytest.raises(TensorFileError) as caught:
        open_tensor_file(path)
    return str(caught.value)


def test_a_pickled_npy_is_refused_without_unpickling(tmp_path, monkeypatch):
    path = tmp_path / "pickled.npy"
    np.save(path, np.array([{"q": 1}, None], dtype=object), allow_pickle=True)
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    message = refusal(path)
    assert message.startswith("pickled.npy: 'array' holds Python objects")
    assert "never unpickles" in message
    npz = tmp_path / "mixed.npz"
    np.savez(npz, q=np.eye(2), k=np.array([object()], dtype=object))
    assert refusal(npz).startswith("mixed.npz: 'k' holds Python objects")


def test_a_4_gb_lying_header_is_refused_before_reading(tmp_path):
    npy = tmp_path / "liar.npy"
    npy.write_bytes(npy_header((2**30,)) + b"\0" * 64)  # claims 4 GB, holds 64 bytes
    assert refusal(npy) == (
        "liar.npy: the header of 'array' says float32 (1073741824,), 4,096 MB of data, but "
        "only 0.0 MB follow it; the file is truncated or its header is wrong (nothing was read)."
    )
    st = tmp_path / "liar.safetensors"
    header = json.dumps({"q": {"dtype": "F32", "shape": [2**30], "data_offsets": [0, 2**32]}})
    st.write_bytes(len(header).to_bytes(8, "little") + header.encode() + b"\0" * 16)
    assert refusal(st).startswith("liar.safetensors: the header of 'q' says float32 (1073741824,)")
    npz = tmp_path / "liar.npz"
    with zipfile.ZipFile(npz, "w") as archive:
        archive.writestr("q.npy", npy_header((2**30,)) + b"\0" * 8)
    assert "the header of 'q' says float32 (1073741824,), 4,096 MB" in refusal(npz)


def test_an_honest_header_over_the_limits_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.npy"
    header = npy_header((65, 1024, 1024))  # 65 Mi float32 values, 260 MB, all present
    with path.open("wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + 65 * 2**22)  # sparse: no disk is written
    assert refusal(path) == (
        "huge.npy: 'array' is float32 (65, 1024, 1024), 68,157,440 values, over the limit of "
        "67,108,864 for one tensor; save a smaller slice (fewer heads, tokens or batch entries)."
    )


@pytest.mark.parametrize(
    ("name", "content", "start"),
    [
        ("notes.txt", b"q k v", "notes.txt: is not a tensor file the app reads"),
        ("broken.npz", b"PK not a zip", "broken.npz: is not a readable .npz file"),
        ("broken.npy", b"\x93NUMPY\x01\x00\xff", "broken.npy: 'array' has no valid .npy header"),
        ("short.safetensors", b"\x01\x02", "short.safetensors: is 2 bytes, too short"),
        ("bad.safetensors", (50).to_bytes(8, "little") + b"{}",
         "bad.safetensors: says its header is 50 bytes"),
    ],
)  # fmt: skip
def test_every_unreadable_file_gets_one_message(tmp_path, name, content, start):
    path = tmp_path / name
    path.write_bytes(content)
    assert refusal(path).startswith(start)
    assert "\n" not in refusal(path)


def test_mismatched_arrays_are_refused_when_loading_with_one_message(tmp_path):
    path = tmp_path / "mismatch.npz"
    np.savez(path, q=np.zeros((4, 2)), k=np.zeros((5, 2)))
    tensors = open_tensor_file(path)
    mapping, _ = guess_mapping(tensors)
    with pytest.raises(TensorFileError) as caught:
        load_inputs(tensors, mapping)
    assert str(caught.value) == "mismatch.npz: key has T = 5 but the query has T = 4."  # headers
    bad = tmp_path / "nan.npz"
    np.savez(bad, q=np.array([[np.nan, 0.0]]), k=np.zeros((1, 2)))
    tensors = open_tensor_file(bad)
    with pytest.raises(TensorFileError) as caught:
        load_inputs(tensors, guess_mapping(tensors)[0])
    assert str(caught.value).startswith("nan.npz: query: entry [0, 0, 0, 0] is nan")  # (B, H, T, d)
    assert refusal(tmp_path / "missing.npz") == "missing.npz: no such file."
