"""The model session without a GUI: request, result, selected head, shown values, hover, take."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attn_explorer.compute import LOOP_BUDGET, Cancelled
from attn_explorer.models import load_model
from attn_explorer.models import requests as requests_module
from attn_explorer.models.requests import (
    AttentionRequest,
    ModelCache,
    RequestFailed,
    answer,
    compute_attention,
)
from attn_explorer.models.session import ModelSession, head_name, shown_values


class Recorder:
    """Every event of a session, in order, as (name, args)."""

    def __init__(self, session: ModelSession) -> None:
        self.seen: list[tuple[str, tuple]] = []
        for name in ("request", "result", "selection", "values", "message"):
            getattr(session.events, name).connect(
                lambda *args, name=name: self.seen.append((name, args))
            )

    def names(self) -> list[str]:
        return [name for name, _ in self.seen]

    def messages(self) -> list[tuple]:
        return [args for name, args in self.seen if name == "message"]


@pytest.fixture
def session():
    return ModelSession()


def run(session: ModelSession) -> None:
    """What the view does after the debounce, without the worker thread."""
    request = session.start()
    assert request is not None
    session.accept(session.run(request))


def test_request_needs_a_model_and_words(session, tiny_model_dir):
    seen = Recorder(session)
    assert session.start() is None
    assert "Choose a model" in seen.messages()[-1][0] and seen.messages()[-1][1] == "error"
    session.set_folder(str(tiny_model_dir))
    session.set_text("   ")
    assert session.start() is None
    assert "empty" in seen.messages()[-1][0]
    session.set_text("the cat")
    session.set_pair("")
    session.set_strategy("matmul")
    assert (session.folder, session.text, session.pair, session.strategy) == (
        str(tiny_model_dir),
        "the cat",
        "",
        "matmul",
    )
    assert session.start() == AttentionRequest(str(tiny_model_dir), "the cat", None, "matmul")
    assert seen.messages()[-1] == ("Computing…", "info")


def test_request_event_only_on_a_change(session):
    seen = Recorder(session)
    session.set_text("the cat")
    session.set_text("the cat")
    session.set_pair("on the mat")
    session.set_folder("")  # no folder, as before
    session.set_strategy("batched")  # the default
    assert seen.names() == ["request", "request"]
    with pytest.raises(ValueError, match="strategy"):
        session.set_strategy("quantum")


def test_a_result_selects_clamps_and_reports(session, tiny_model_dir):
    seen = Recorder(session)
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat")
    run(session)
    result = session.result
    assert result.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert "result" in seen.names()
    assert seen.messages()[-1] == ("tiny-bert: 5 tokens, 2 layers × 2 heads (batched).", "info")
    assert session.select_head(1, 1)
    assert seen.seen[-1] == ("selection", (1, 1))
    assert not session.select_head(2, 0) and not session.select_head(0, -1)
    assert session.selected_head == (1, 1)

    # a result with fewer layers and heads keeps the selection inside it
    session.accept(dataclasses.replace(result, weights=result.weights[:1, :1]))
    assert session.selected_head == (0, 0)


def test_the_cache_loads_a_folder_once(tiny_model_dir):
    cache = ModelCache()
    assert cache.get(str(tiny_model_dir)) is cache.get(str(tiny_model_dir))


def test_a_failure_keeps_the_result_and_says_why(session, tiny_model_dir, tmp_path):
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat")
    run(session)
    before = session.result
    seen = Recorder(session)
    (tmp_path / "empty").mkdir()
    session.set_folder(str(tmp_path / "empty"))
    outcome = session.run(session.request())
    assert isinstance(outcome, RequestFailed) and "config.json" in outcome.message
    session.accept(outcome)
    assert session.result is before
    assert seen.names() == ["request", "message"] and seen.messages()[-1][1] == "error"


def test_truncation_is_in_the_status(session, tiny_model_dir):
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat on the mat " * 4)
    run(session)
    assert session.result.truncated and "truncated" in session.status()


def test_shown_values_weights_and_scores(session, tiny_model_dir):
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat")
    run(session)
    result = session.result
    weights = session.shown()
    assert weights.values is result.weights
    assert (weights.levels, weights.colormap, weights.label) == (
        (0.0, 1.0),
        "sequential",
        "softmax weight",
    )
    seen = Recorder(session)
    assert not session.show_scores
    session.set_show_scores(True)
    session.set_show_scores(True)
    assert seen.names() == ["values"] and session.show_scores
    scores = session.shown()
    assert scores.values is result.scores and scores.colormap == "diverging"
    low, high = scores.levels
    assert low == -high and high == pytest.approx(np.abs(result.scores).max())
    assert scores == shown_values(result, scores=True)  # the PNG export uses the same


def test_shown_values_need_a_result(session):
    with pytest.raises(ValueError, match="No result"):
        session.shown()


def test_hover_text_counts_from_one(session, tiny_model_dir):
    assert session.describe(0, 0, 0, 0) == ""
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat")
    run(session)
    text = session.describe(0, 1, 2, 1)
    value = session.result.weights[0, 1, 2, 1]
    assert text == (
        f"layer 1 · head 2: query 'cat' (i=3) → key 'the' (j=2): softmax weight {value:.4f}"
    )
    assert session.describe(0, 1, 5, 0) == "" and session.describe(2, 0, 0, 0) == ""
    assert head_name(1, 2) == "layer 2 · head 3"


def test_take_head_is_the_selected_head(session, tiny_model_dir):
    seen = Recorder(session)
    assert session.take_head() is None
    assert "Nothing to take" in seen.messages()[-1][0]
    session.set_folder(str(tiny_model_dir))
    session.set_text("the cat sat")
    run(session)
    session.select_head(1, 0)
    payload = session.take_head()
    expected = session.result.head(1, 0)
    assert payload.keys() == expected.keys()
    assert (payload["layer"], payload["head"], payload["model_name"]) == (1, 0, "tiny-bert")
    for name in ("query", "key", "value"):
        np.testing.assert_array_equal(payload[name], expected[name])


def test_compute_attention_matches_the_model(tiny_model_dir):
    request = AttentionRequest(str(tiny_model_dir), "the cat sat", "on the mat", "matmul")
    result = compute_attention(ModelCache(), request)
    expected = load_model(tiny_model_dir).attention("the cat sat", "on the mat")
    np.testing.assert_allclose(result.weights, expected.weights, atol=1e-6)
    assert result.strategy == "matmul"


def test_loop_is_refused_over_the_shared_budget(tiny_model_dir, monkeypatch):
    """The guard reads compute.LOOP_BUDGET.result, the budget every loop decision uses."""
    request = AttentionRequest(str(tiny_model_dir), "the cat sat", None, "loop")
    cache = ModelCache()
    layers = 2  # the tiny model's
    monkeypatch.setattr(
        requests_module, "estimate_loop_seconds", lambda q, k: LOOP_BUDGET.result / layers * 1.5
    )
    with pytest.raises(ValueError, match="loop strategy would take"):
        compute_attention(cache, request)
    failed = answer(cache, request)
    assert isinstance(failed, RequestFailed) and "matmul or batched" in failed.message
    monkeypatch.setattr(
        requests_module, "estimate_loop_seconds", lambda q, k: LOOP_BUDGET.result / layers * 0.5
    )
    assert compute_attention(cache, request).strategy == "loop"


def test_a_superseded_request_stops_after_loading(tiny_model_dir):
    request = AttentionRequest(str(tiny_model_dir), "the cat", None, "batched")
    with pytest.raises(Cancelled):
        answer(ModelCache(), request, should_stop=lambda: True)


def test_models_package_and_session_import_no_qt():
    """Like tests/test_layering.py for compute and state: every module of models, fresh."""
    probe = (
        "import importlib, json, pkgutil, sys\n"
        "import attn_explorer.models as package\n"
        "import attn_explorer.models.session\n"
        "loaded = [info.name for info in pkgutil.walk_packages(package.__path__, "
        "package.__name__ + '.')]\n"
        "for name in loaded: importlib.import_module(name)\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'PySide6', 'pyqtgraph', 'shiboken6'})\n"
        "print(json.dumps({'loaded': loaded, 'qt': qt}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYQTGRAPH_QT_LIB": "PySide6"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "attn_explorer.models.session" in report["loaded"]
    assert report["qt"] == [], report["qt"]
