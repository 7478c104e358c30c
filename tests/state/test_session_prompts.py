"""Session files keep the model dock's prompts (format version 2, issue 35); version 1
files open as before, and a file without prompts is still written as version 1."""

import json

import pytest

from attn_explorer.state.document import Document
from attn_explorer.state.session import Session
from attn_explorer.state.storage.prompts import MAX_PROMPT_CHARS, Prompts
from attn_explorer.state.storage.session_file import (
    SessionFileError,
    load_session,
    load_session_text,
    save_session,
    session_json,
    session_to_dict,
    snapshot_to_dict,
)

PROMPTS = Prompts(
    "When Mary and John went to the store, John gave a drink to",
    "When Mary and John went to the store, Mary gave a drink to",
    " Mary",
    1234,
)


def test_prompts_round_trip_as_version_2(tmp_path):
    path = tmp_path / "two.json"
    save_session(Session(), path, "two", PROMPTS)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 2
    assert data["prompts"] == {
        "text": PROMPTS.text,
        "corrupt": PROMPTS.corrupt,
        "answer": " Mary",
        "wrong": 1234,
    }
    assert load_session(path).prompts == PROMPTS


@pytest.mark.parametrize("prompts", [None, Prompts()])
def test_a_file_without_prompts_is_version_1_and_has_none(tmp_path, prompts):
    path = tmp_path / "one.json"
    save_session(Session(), path, "one", prompts)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1 and "prompts" not in data
    assert load_session(path).prompts is None


def test_the_document_saves_and_opens_the_prompts_and_a_v1_file_keeps_them(tmp_path):
    document = Document(Session())
    document.prompts = PROMPTS
    assert document.save_to(tmp_path / "with.json")
    old = tmp_path / "old.json"
    save_session(Session(), old, "old")  # version 1: no prompts
    other = Document(Session())
    other.prompts = Prompts("kept")
    assert other.open(old)
    assert other.prompts == Prompts("kept")  # a file without prompts leaves them
    assert other.open(tmp_path / "with.json")
    assert other.prompts == PROMPTS


def _text(version, prompts):
    """A default session's file text with ``version`` and ``prompts``."""
    data = session_to_dict(Session()) | {"version": version, "prompts": prompts}
    return json.dumps(data)


@pytest.mark.parametrize(
    ("version", "prompts", "message"),
    [
        (1, {"text": "a"}, "prompts: needs format version 2, the file says 1"),
        (2, [], "prompts: expected an object"),
        (2, {"sentence": "a"}, 'prompts: unknown field "sentence"'),
        (2, {"text": 3}, "prompts.text: expected text"),
        (2, {"answer": -1}, "prompts.answer: a token id is a whole number ≥ 0, got -1"),
        (2, {"wrong": 1.5}, "prompts.wrong: expected text or a token id"),
        (2, {"answer": True}, "prompts.answer: expected text or a token id"),
        (
            2,
            {"corrupt": "x" * (MAX_PROMPT_CHARS + 1)},
            f"prompts.corrupt: {MAX_PROMPT_CHARS + 1:,} characters long, over the limit",
        ),
    ],
)
def test_bad_prompts_are_refused_by_their_json_path(version, prompts, message):
    with pytest.raises(SessionFileError) as caught:
        load_session_text(_text(version, prompts), "bad.json")
    assert str(caught.value).startswith(f"bad.json: {message}"), str(caught.value)


def test_missing_prompt_fields_take_their_defaults():
    loaded = load_session_text(_text(2, {"corrupt": "b"}))
    assert loaded.prompts == Prompts(corrupt="b")


def test_prompts_modified_only_counts_against_the_document_s_file(tmp_path):
    session = Session()
    document = Document(session)
    heard: list[int] = []
    session.events.prompts.connect(lambda: heard.append(1))
    document.set_prompts(Prompts("a cat", "a hat"))  # untitled: the dock's typing, not a change
    assert heard == [1] and not document.prompts_modified and not document.modified
    path = tmp_path / "kept.json"
    assert document.save_to(path) and not document.modified
    document.set_prompts(Prompts("a cat", "a hat"))  # the same prompts again: no event
    assert heard == [1]
    document.set_prompts(Prompts("a cat", "a bat"))
    assert document.prompts_modified and document.modified and not document.has_unsaved_work
    assert document.open(path) and document.prompts == Prompts("a cat", "a hat")
    assert not document.modified


def test_recovering_an_autosave_brings_its_prompts_back(tmp_path):
    session = Session()
    kept = Prompts("When Mary and John", "When John and Mary", "", "")
    text = session_json(snapshot_to_dict(session.snapshot(), session.options, "work", kept))
    (tmp_path / "autosave.json").write_text(text, encoding="utf-8")
    document = Document(Session())
    assert document.recover(load_session(tmp_path / "autosave.json"), None)
    assert document.prompts == kept and document.name == "work"
