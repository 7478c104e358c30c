"""Local and global layers are visible: the model's notes, the result and the grid say which.

A tiny random Gemma 3 (six layers: five local with a window of 4, the sixth global) is
written as llama.cpp writes it, from plain numpy arrays (no torch needed).
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.testing.hf_gguf import write_hf_decoder_gguf
from attn_explorer.models.testing.tiny_gguf import tiny_vocabulary

CONFIG = {
    "vocab_size": len(tiny_vocabulary()),
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
    "sliding_window": 4,
}


def random_gemma3_state(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, ff, q, kv = 32, 64, 4 * 8, 2 * 8

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    state = {"model.embed_tokens.weight": w(CONFIG["vocab_size"], h), "model.norm.weight": w(h)}
    for layer in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        state |= {
            p + "input_layernorm.weight": w(h, scale=0.1),
            p + "self_attn.q_proj.weight": w(q, h, scale=1.0),
            p + "self_attn.k_proj.weight": w(kv, h, scale=1.0),
            p + "self_attn.v_proj.weight": w(kv, h),
            p + "self_attn.o_proj.weight": w(h, q),
            p + "self_attn.q_norm.weight": w(8, scale=0.1),
            p + "self_attn.k_norm.weight": w(8, scale=0.1),
            p + "post_attention_layernorm.weight": w(h, scale=0.1),
            p + "pre_feedforward_layernorm.weight": w(h, scale=0.1),
            p + "post_feedforward_layernorm.weight": w(h, scale=0.1),
            p + "mlp.gate_proj.weight": w(ff, h),
            p + "mlp.up_proj.weight": w(ff, h),
            p + "mlp.down_proj.weight": w(h, ff),
        }
    return state


@pytest.fixture
def gemma(tmp_path):
    path = tmp_path / "tiny-gemma3.gguf"
    write_hf_decoder_gguf(path, "gemma3", CONFIG, random_gemma3_state())
    return load_gguf(path)


def test_the_result_says_which_layers_are_local(gemma):
    result = gemma.attention("the cat sat on the mat")
    assert result.layer_kinds == ("local",) * 5 + ("global",)
    assert result.window == 4
    t = result.weights.shape[-1]
    far = np.tril(np.ones((t, t), dtype=bool), -4)  # i − j ≥ 4: outside the window
    assert (result.weights[:5][..., far] == 0).all()  # local layers: the band
    assert (result.weights[5][..., far] > 0).any()  # the global layer sees further back
    assert result.notes[0] == "weights: 80 × F32"  # 6 layers × 13 + embedding + norm
    assert result.notes[1] == (
        "5 of 6 layers local (window 4), the rest global; the pattern from llama.cpp's convention."
    )


def test_the_grid_labels_each_layer_local_or_global(qtbot, gemma):
    from attn_explorer.ui.model.model_grid import ThumbnailGrid

    grid = ThumbnailGrid(lambda head: None, lambda head, cell: None)
    qtbot.addWidget(grid)
    grid.build(6, 4)
    grid.set_layer_kinds(("local",) * 5 + ("global",), 4)
    texts = grid._layer_header.texts()
    assert texts[0] == "layer 1\nlocal" and texts[5] == "layer 6\nglobal"
    grid.set_layer_kinds(("global",) * 6, 0)  # a model without windows: plain labels
    assert grid._layer_header.texts()[0] == "layer 1"


def test_rerunning_the_blocks_follows_the_family(gemma):
    """The ablation hook's rerun (one stream, and a batch of streams) equals the forward pass
    on Gemma 3's q/k norms, sandwich norms, local windows and local RoPE base."""
    from attn_explorer.models.decoder.blocks import run_blocks

    ids = np.array(gemma.tokenizer.encode("the cat sat on the mat, the cat"))
    forward = gemma.forward(ids)
    assert forward.hidden_states is not None
    one = run_blocks(gemma, forward.hidden_states[0], 0)
    np.testing.assert_allclose(one, forward.hidden_states[-1], atol=1e-5)
    mask = np.ones((2, 6, 4), dtype=np.float32)
    mask[1, 2, 3] = 0  # the second stream: layer 3's head 4 ablated
    both = run_blocks(gemma, forward.hidden_states[0], 0, head_mask=mask)
    np.testing.assert_allclose(both[0], forward.hidden_states[-1], atol=1e-4)
    assert np.abs(both[1] - both[0]).max() > 1e-3
