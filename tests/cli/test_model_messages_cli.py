"""Every class of refusal ``attn-explorer export --model`` and ``analyze`` can print names the
flag the user typed and what to type instead (issue 36): a model file's fault names --model,
the file and the tensor; a text's fault names --text or --text-file; a size limit says which
flags get under it (--layer L --head H for a text too long to export every head); a second
text names --text-pair. Never the Python API's words (``text:``, ``stack[layer, head]``)."""

from __future__ import annotations

import re

import pytest

from attn_explorer.cli.main import main
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.formats.gguf_file import GGUFFile
from attn_explorer.models.testing.hostile_gguf import rewrite_gguf
from attn_explorer.models.testing.tiny_bert import write_tiny_bert
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf

#: The Python API's names for what the command line calls --text, --text-pair, --layer …
API_WORDS = re.compile(r"(?<![-\w])(text|text_pair|prompt):|stack\[|run_head_export|fmt=|Error")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    decoder = folder / "tiny.gguf"
    write_tiny_gguf(decoder, context_length=8192)  # room for a long pass (> 4,096 tokens)
    table = GGUFFile(decoder).dequantize("token_embd.weight")  # (269, 32)
    swapped = rewrite_gguf(decoder, folder / "swapped.gguf", tensors={"token_embd.weight": table.T})
    return {"decoder": decoder, "swapped": swapped, "bert": write_tiny_bert(folder / "bert")}


def refused(capsys, *argv: str) -> str:
    """Run the command; assert it was refused in one line (exit 2); return the message."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert not API_WORDS.search(err), err
    return err.rstrip("\n").split(": error: ", 1)[1]


def write(tmp_path, text: str):
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- model file errors ------------------------------------------------------------------------
def test_a_swapped_embedding_names_the_flag_the_file_and_the_tensor(capsys, models, tmp_path):
    message = refused(
        capsys, "export", "--model", str(models["swapped"]), "--text", "the cat",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert message == (
        f"--model: {models['swapped']}: tensor 'token_embd.weight' has shape (32, 269); "
        "expected (269, 32), one row of llama.embedding_length = 32 values per token: its two "
        "dimensions are swapped; convert the model again (llama.cpp's convert_hf_to_gguf.py "
        "writes it as the model has it)."
    )
    assert not (tmp_path / "out").exists()


def test_a_missing_model_file_names_the_flag_and_the_file(capsys, tmp_path):
    missing = tmp_path / "nothing.gguf"
    message = refused(
        capsys,
        "analyze",
        "--model",
        str(missing),
        "--text",
        "x",
        "--json",
        str(tmp_path / "a.json"),
    )
    assert message == f"--model: {missing}: no such file."


# -- text errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--text", "--text-file"])
def test_a_text_without_tokens_names_the_flag_that_gave_it(capsys, models, tmp_path, flag):
    text = "\x00\u200b"  # characters BERT's tokenizer drops: no token left
    given = text if flag == "--text" else write(tmp_path, text)
    message = refused(
        capsys, "export", "--model", str(models["bert"]), flag, given, "--out", str(tmp_path / "o")
    )
    assert message == f"{flag}: the text is empty (no tokens in it); type some words."


def test_analyze_names_the_text_flag_too(capsys, models, tmp_path):
    message = refused(
        capsys, "analyze", "--model", str(models["bert"]), "--text-file", write(tmp_path, "\u200b"),
        "--json", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert message == "--text-file: the text is empty (no tokens in it); type some words."


# -- size and limit errors ----------------------------------------------------------------------
def test_a_text_too_long_to_export_every_head_says_to_export_one_with_layer_and_head(
    capsys, models, tmp_path
):
    text = "the cat sat on the mat. " * 480
    tokens = len(load_gguf(models["decoder"]).tokenizer.encode(text))
    assert tokens > 4096  # 2 layers × 4 heads × T² × 8 bytes over 2³⁰ for any T over 4,096
    long_text = write(tmp_path, text)
    message = refused(
        capsys, "export", "--model", str(models["decoder"]), "--text-file", long_text,
        "--format", "npz", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    size = 2 * 4 * tokens * tokens * 8 / 1e9
    assert message == (
        f"--text-file: {tokens:,} tokens are too many to export every head: the scores and "
        f"weights of 2 layers × 4 heads would take {size:.1f} GB, over the 1.1 GB one pass "
        "keeps (at most 4,096 tokens); export one head with --layer L --head H (L from 1 to 2, "
        "H from 1 to 4), every head as a picture with --format png, or a text of at most 4,096 "
        "tokens."
    )


@pytest.mark.slow  # a long pass of 4,323 tokens
def test_the_way_out_it_names_works_one_head_of_that_text(models, tmp_path):
    long_text = write(tmp_path, "the cat sat on the mat. " * 480)
    out = tmp_path / "head"
    argv = ["export", "--model", str(models["decoder"]), "--text-file", long_text]
    assert main([*argv, "--layer", "2", "--head", "4", "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["tiny_layer2_head4_weights.npz"]


def test_a_text_over_the_character_limit_names_the_flag(capsys, models, tmp_path):
    message = refused(
        capsys, "export", "--model", str(models["decoder"]), "--text-file",
        write(tmp_path, "a" * 100_001), "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert message == (
        "--text-file: 100,001 characters, over the limit of 100,000; a model reads at most a "
        "few thousand, so shorten it."
    )


# -- pair errors --------------------------------------------------------------------------------
def test_a_second_text_for_a_decoder_names_text_pair(capsys, models, tmp_path):
    message = refused(
        capsys, "export", "--model", str(models["decoder"]), "--text", "the cat",
        "--text-pair", "on the mat", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert message == "--text-pair: a decoder reads one text; join the two."


def test_a_second_text_without_tokens_names_text_pair(capsys, models, tmp_path):
    message = refused(
        capsys, "export", "--model", str(models["bert"]), "--text", "the cat",
        "--text-pair", "\x00\u200b", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert message == (
        "--text-pair: the second text has no tokens; type some words or leave it out."
    )


# -- the scores command: its matrices are --query and --key -----------------------------------
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("[[1, 2], [3]]", "--query: rows of 1 and 2 values; give every row the same number of "
         "values, like [[1, 0], [0, 1]]"),
        ('[[1, "x"]]', '--query: "x" is not a number; give numbers only, like [[1, 0], [0, 1]]'),
        ("[[true, 2]]", "--query: true and false are booleans, not numbers; give numbers only"),
        ("[[1e300, 2]]", "--query: entry [0, 0] is 1e+300, over the limit of ±1e+15 "
         "(MAX_ABS_VALUE): larger values overflow the scores; use smaller numbers."),
    ],
)  # fmt: skip
def test_scores_names_the_query_flag_never_numpys_words(capsys, query, message):
    assert main(["scores", "--query", query]) == 2
    err = capsys.readouterr().err
    assert err == f"attn-explorer scores: error: {message}\n"
