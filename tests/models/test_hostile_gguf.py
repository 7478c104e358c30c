"""Issue 24, classes 1–7: hostile GGUF files and decoder arguments, generated.

Every case rewrites the tiny GGUF with ``gguf.GGUFWriter`` (through
``models.testing.hostile_gguf``) and asserts one ModelError / TextError / ValueError
line naming the file and the key or tensor, in bounded time, never tokenizers'
or numpy's own exceptions and never the table-cell advice "replace NaN and ±inf".
"""

from __future__ import annotations

import math
import os
import re
import socket
import threading
import time
import tracemalloc

import numpy as np
import pytest

from attn_explorer.models import ModelError, TextError, load_model
from attn_explorer.models.decoder.text.chat_template import chatml_prompt, default_system
from attn_explorer.models.formats.gguf_metadata import MAX_TEMPLATE_CHARS, SPECS
from attn_explorer.models.testing.hostile_gguf import DELETE, Typed, retype_tensor, rewrite_gguf
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import TINY_MERGES, write_tiny_gguf

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN written on purpose


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    write_tiny_gguf(folder / "tiny.gguf")
    return folder / "tiny.gguf"


@pytest.fixture(scope="module")
def model(source):
    return load_model(source)


def refused(path, *, words: str, kind=ModelError, seconds: float = 5.0) -> str:
    """load_model(path) raises ``kind`` in < ``seconds``: one line naming the file and ``words``."""
    start = time.perf_counter()
    with pytest.raises(kind) as caught:
        load_model(path)
    assert time.perf_counter() - start < seconds
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message, message
    assert re.search(words, message), message
    assert "replace NaN" not in message
    return message


def nonfinite_or_fraction():
    return [
        Typed(math.nan, "FLOAT32"),
        Typed(math.inf, "FLOAT32"),
        Typed(-math.inf, "FLOAT64"),
        Typed(29.5, "FLOAT32"),
        Typed(30.0, "FLOAT64"),
        Typed(-1, "INT32"),
        Typed(0, "UINT32"),
        Typed(2**40, "UINT64"),
        Typed("12", "STRING"),
        Typed(True, "BOOL"),
        Typed([2, 2, 2], "ARRAY", "UINT32"),  # one per layer is read, but there are 2 layers
    ]


INTEGER_KEYS = [
    "block_count",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
]


# -- class 1: metadata of the wrong type or value -------------------------------------------------
@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_integer_keys_of_the_wrong_type_or_range(source, tmp_path, key):
    for n, value in enumerate(nonfinite_or_fraction()):
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {f"llama.{key}": value})
        message = refused(path, words=rf"metadata llama\.{re.escape(key)} holds ")
        assert "expected a whole number from 1 to" in message


@pytest.mark.parametrize("key", ["rope.freq_base", "attention.layer_norm_rms_epsilon"])
def test_real_keys_must_be_finite_and_positive(source, tmp_path, key):
    values = [math.nan, math.inf, -math.inf, -1e-5, 0.0, 1e30]
    for n, value in enumerate([Typed(v, "FLOAT32") for v in values] + [Typed("x", "STRING")]):
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {f"llama.{key}": value})
        refused(path, words=rf"metadata llama\.{re.escape(key)} holds .*; expected a finite")


TOKEN_ARRAYS = [
    ("tokenizer.ggml.tokens", Typed(list(range(269)), "ARRAY", "UINT32"), "integer items"),
    ("tokenizer.ggml.tokens", Typed([1.5] * 269, "ARRAY", "FLOAT32"), "float items"),
    ("tokenizer.ggml.tokens", Typed("abc", "STRING"), "the text"),
    ("tokenizer.ggml.tokens", DELETE, "missing"),
    ("tokenizer.ggml.merges", Typed([1, 2, 3], "ARRAY", "UINT32"), "integer items"),
    ("tokenizer.ggml.merges", Typed(7, "UINT32"), "the integer 7"),
    ("tokenizer.ggml.merges", DELETE, "missing"),
    ("tokenizer.ggml.token_type", Typed(["1"] * 269, "ARRAY", "STRING"), "string items"),
    ("tokenizer.ggml.token_type", Typed([1] * 270, "ARRAY", "INT32"), "270 entries"),
    ("tokenizer.ggml.token_type", Typed([99] * 269, "ARRAY", "INT32"), "99 at index 0"),
    ("tokenizer.ggml.eos_token_id", Typed("2", "STRING"), "the text '2'"),
    ("tokenizer.ggml.eos_token_id", Typed(2.0, "FLOAT32"), "the float 2.0"),
    # (an id past the tokens is read as none, as llama.cpp does: test_converter_metadata.py)
    ("tokenizer.ggml.bos_token_id", Typed(-1, "INT32"), "the integer -1"),
    ("tokenizer.ggml.add_bos_token", Typed("yes", "STRING"), "expected true or false"),
    ("tokenizer.ggml.model", Typed(3, "UINT32"), "expected text"),
    ("tokenizer.ggml.pre", Typed([1], "ARRAY", "UINT8"), "expected text"),
    ("general.architecture", Typed(1.0, "FLOAT32"), "expected text"),
    ("tokenizer.chat_template", Typed(5, "UINT32"), "expected text"),
]


@pytest.mark.parametrize(("key", "value", "words"), TOKEN_ARRAYS)
def test_tokenizer_keys_of_the_wrong_type_or_range(source, tmp_path, key, value, words):
    path = rewrite_gguf(source, tmp_path / "h.gguf", {key: value})
    refused(path, words=rf"metadata {re.escape(key)} holds .*{re.escape(words)}|"
            rf"{re.escape(key)}.*{re.escape(words)}")  # fmt: skip


def test_merges_that_tokenizers_would_reject(source, tmp_path):
    tokens_count = 269
    broken = [
        ("Ġ t", "Ġ tz"),  # names an unknown token
        ("h e", "he"),  # no space
        ("a t", "a "),  # an empty right part
        ("o n", " on"),  # an empty left part
        ("Ġ on", "Ġ o"),  # makes 'Ġo', which is not a token
        ("Ġc at", "Ġc a t"),  # three parts
    ]
    for n, (old, new) in enumerate(broken):
        merges = [new if m == old else m for m in TINY_MERGES]
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {"tokenizer.ggml.merges": merges})
        refused(path, words=r"tokenizer\.ggml\.merges entry \d+ .*; the tokenizer is damaged")
    assert tokens_count == len(load_model(source).tokenizer.id_to_token)


def test_a_token_list_that_does_not_match_the_vocabulary(source, model, tmp_path):
    tokens = model.tokenizer.id_to_token
    cases = {
        "one short": tokens[:-1],
        "one merge's token missing": [t for t in tokens if t != "Ġcat"],
        "one long": [*tokens, "extra"],
        "many long": [*tokens, *(f"x{i}" for i in range(5000))],
    }
    for n, changed in enumerate(cases.values()):
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {"tokenizer.ggml.tokens": changed})
        refused(path, words=rf"tokenizer\.ggml\.tokens holds {len(changed):,} tokens; "
                r"expected 269, the model's vocabulary size")  # fmt: skip


# -- class 4: declared sizes compared before the vocabulary is built -------------------------------
def test_a_huge_token_list_is_refused_before_it_is_read(source, model, tmp_path):
    tokens = [*model.tokenizer.id_to_token, *(f"t{i}" for i in range(300_000))]
    path = rewrite_gguf(source, tmp_path / "huge.gguf", {"tokenizer.ggml.tokens": tokens})
    refused(path, words=r"holds 300,269 tokens; expected 269", seconds=2.0)
    tracemalloc.start()  # (slows the walk over 300 000 strings: timed above, without it)
    try:
        refused(path, words=r"holds 300,269 tokens; expected 269", seconds=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20  # the 300 000 strings were never made (they take ~20 MB)


def test_a_vocab_size_beyond_the_embedding_is_refused_before_reading(source, tmp_path):
    for n, size in enumerate([270, 5_000_000]):
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {"llama.vocab_size": size})
        refused(path, words=r"llama\.vocab_size|tokenizer\.ggml\.tokens holds 269 tokens")


# -- class 2: non-finite weights are refused at load, by name --------------------------------------
@pytest.mark.parametrize(
    "name", ["output_norm.weight", "blk.0.attn_norm.weight", "blk.1.ffn_down.weight",
             "blk.0.attn_q.weight", "token_embd.weight"],
)  # fmt: skip
def test_non_finite_weights_are_refused_by_name(source, model, tmp_path, name):
    clean = model.weights.dequantize(name) if name != "token_embd.weight" else None
    if clean is None:
        clean = model.file.dequantize(name)
    for n, bad in enumerate([np.nan, np.inf, -np.inf]):
        values = clean.copy()
        values.flat[n * 7] = bad
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", tensors={name: values})
        message = refused(path, words=rf"tensor {re.escape(repr(name))} holds 1 non-finite")
        assert "download it again" in message


def test_a_quantized_tensor_with_a_nan_scale_is_refused_by_name(source, tmp_path):
    # token_embd is Q8_0: 34-byte blocks, a float16 scale then 32 int8 values
    from attn_explorer.models.formats.gguf_file import GGUFFile

    raw = np.array(GGUFFile(source).tensors["token_embd.weight"].data)
    raw[5, 0:2] = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)
    path = tmp_path / "q.gguf"
    data = bytearray(source.read_bytes())
    offset = GGUFFile(source).tensors["token_embd.weight"].offset
    data[offset : offset + raw.nbytes] = raw.tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"q\.gguf: tensor 'token_embd\.weight' holds"):
        load_model(path).attention("the cat")


@pytest.mark.parametrize(
    ("name", "kind"),
    [("blk.0.attn_norm.weight", "I32"), ("output_norm.weight", "I32"),
     ("blk.1.ffn_norm.weight", "F64"), ("blk.0.attn_q.weight", "I16"),
     ("blk.0.attn_v.weight", "I8")],
)  # fmt: skip
def test_a_tensor_retyped_to_one_that_is_not_weights_is_refused_at_load(
    source, tmp_path, name, kind
):
    path = retype_tensor(source, tmp_path / "r.gguf", name, kind)
    refused(path, words=rf"tensor {re.escape(repr(name))} is stored as {kind}, which cannot")


def test_a_tensor_retyped_to_f16_is_read_or_refused_by_name(source, tmp_path):
    """float32 bytes read as float16: where a half is NaN or ±inf the load names the tensor;
    where none is, the model runs and every number it shows is finite."""
    outcomes = []
    names = ["blk.0.attn_norm.weight", "blk.1.attn_k.weight", "output_norm.weight",
             "blk.0.ffn_up.weight", "blk.1.attn_output.weight"]  # fmt: skip
    for n, name in enumerate(names):
        path = retype_tensor(source, tmp_path / f"{n}.gguf", name, "F16")
        try:
            result = load_model(path).attention("the cat sat")
        except ModelError as exc:
            assert re.search(
                rf"{re.escape(str(path))}: tensor {re.escape(repr(name))} holds", str(exc)
            )
            outcomes.append("refused")
        else:
            assert np.isfinite(result.weights).all() and np.isfinite(result.logits).all()
            outcomes.append("ran")
    assert "refused" in outcomes  # the large ones surely hold a NaN / inf pattern


def test_bert_layer_norm_of_nan_is_refused_by_name(tmp_path):
    from attn_explorer.models import SafetensorsFile, save_safetensors

    folder = write_tiny_bert(tmp_path / "bert")
    weights = folder / "model.safetensors"
    file = SafetensorsFile(weights)
    tensors = {name: np.array(file.get(name)) for name in file.names()}
    del file
    name = next(n for n in tensors if n.endswith("LayerNorm.weight"))
    for bad in (np.nan, np.inf):
        changed = dict(tensors)
        changed[name] = tensors[name].copy()
        changed[name][1] = bad
        save_safetensors(weights, changed)
        with pytest.raises(ModelError) as caught:
            load_model(folder)
        message = str(caught.value)
        assert str(weights) in message and repr(name) in message and "non-finite" in message
        assert "replace NaN" not in message


# -- class 3: special files named .gguf -----------------------------------------------------------
def test_special_files_named_gguf_are_said_to_be_what_they_are(tmp_path):
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    device = tmp_path / "zero.gguf"
    device.symlink_to("/dev/zero")
    sock_path = tmp_path / "s.gguf"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    cases = [
        (folder, "is a folder"),
        (fifo, r"is a named pipe \(FIFO\)"),
        (device, "is a device"),
        (sock_path, "is a socket"),
        (tmp_path / "missing.gguf", "no such file"),
        (empty, "cannot be read|not a GGUF"),
    ]
    try:
        for path, words in cases:
            outcome: list[BaseException] = []
            thread = threading.Thread(target=_catch, args=(outcome, path), daemon=True)
            thread.start()
            thread.join(5)
            assert not thread.is_alive(), f"{path} hangs"
            assert isinstance(outcome[0], ModelError), outcome
            assert str(path) in str(outcome[0]) and re.search(words, str(outcome[0]))
    finally:
        server.close()


def _catch(outcome: list, path) -> None:
    try:
        load_model(path)
    except BaseException as exc:
        outcome.append(exc)


# -- class 5: the chat template ------------------------------------------------------------------
def old_regex(template: str) -> str | None:
    """The two regexes chat_prompt used (quadratic on hostile input): the reference."""
    found = re.search(r"<\|im_start\|>system\\n(.*?)<\|im_end\|>", template)
    if found is None:
        found = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template, re.S)
    return None if found is None else found[1]


def test_the_linear_parse_agrees_with_the_regexes_on_random_templates():
    rng = np.random.default_rng(24)
    pieces = ["<|im_start|>system\\n", "<|im_start|>system\n", "<|im_end|>", "\n", "\\n",
              "hi", "<|im_start|>", "system", "x"]  # fmt: skip
    for _ in range(3000):
        template = "".join(rng.choice(pieces, size=int(rng.integers(0, 12))))
        assert default_system(template) == old_regex(template), repr(template)


@pytest.mark.parametrize(
    "unit",
    ["<|im_start|>system\n", "<|im_start|>system\\n", "<|im_start|>system\\n\n",
     "<|im_start|>system\\nab\n<|im_start|>", "<|im_end|><|im_start|>system\\n\n"],
)  # fmt: skip
def test_hostile_templates_parse_in_linear_time(unit):
    template = unit * (MAX_TEMPLATE_CHARS // len(unit))
    start = time.perf_counter()
    prompt = chatml_prompt(template, "hello")
    assert time.perf_counter() - start < 0.5
    assert prompt is not None and prompt.endswith("<|im_start|>assistant\n")


def test_an_oversized_template_is_refused_by_key(source, tmp_path):
    for n, size in enumerate([MAX_TEMPLATE_CHARS + 1, 600_000]):
        template = ("<|im_start|>system\n" * size)[:size]
        path = rewrite_gguf(source, tmp_path / f"{n}.gguf", {"tokenizer.chat_template": template})
        refused(path, words=rf"metadata tokenizer\.chat_template holds the text .*\({size:,} "
                r"characters\); expected text of at most", seconds=1.0)  # fmt: skip


# -- classes 6 and 7: text and max_new_tokens ------------------------------------------------------
@pytest.mark.parametrize("text", ["\udcff", "a\ud800b", "caf\udcc3\udca9", "\udfff" * 3])
def test_text_utf8_cannot_hold_is_a_value_error(model, text):
    with pytest.raises(TextError, match=r"^text: character \d+ is "):
        model.attention(text)
    with pytest.raises(TextError, match=r"^prompt: character \d+ is "):
        model.generate(text, 2)
    with pytest.raises(ValueError):
        model.generate(text, 2, chat=True)


@pytest.mark.parametrize("count", [2.5, 0, -1, True, "3", 10**9, None, math.nan, 1.0])
def test_max_new_tokens_must_be_a_whole_number_in_range(model, count):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"^max_new_tokens: expected a whole number from 1 to"):
        model.generate("the cat", count)
    assert time.perf_counter() - start < 0.5  # refused before anything runs


def test_max_new_tokens_accepts_numpy_integers(model):
    assert len(model.generate("the cat", np.int64(2)).token_ids) <= 2


def test_every_key_the_decoder_reads_is_in_the_table():
    """A key read with file.get() instead of metadata_value() would skip the checks."""
    import inspect

    from attn_explorer.models.decoder import llama, weights
    from attn_explorer.models.decoder.text import bpe

    for module in (bpe, llama, weights):
        source_text = inspect.getsource(module)
        for key in re.findall(r'file\.get\("([^"]+)"', source_text):
            assert key in SPECS, f"{module.__name__} reads {key} unchecked"
