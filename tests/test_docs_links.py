"""Every relative link, anchor and picture in README.md, CONTRIBUTING.md and docs/ exists."""

from __future__ import annotations

import pytest
from docs_checks import DOCUMENTS, ROOT, github_slug, link_problems, pictures


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_picture_points_at_something(path):
    assert link_problems(path, path.read_text(encoding="utf-8")) == []


def test_the_documents_are_found():
    names = {str(p.relative_to(ROOT)) for p in DOCUMENTS}
    assert {"README.md", "CONTRIBUTING.md", "docs/guide/keyboard.md"} <= names


def test_anchors_are_githubs():
    assert github_slug("Files: File ▸ Open tensors… and `attn-explorer open FILE`") == (
        "files-file--open-tensors-and-attn-explorer-open-file"
    )
    setup = "set-up-fresh-debianubuntu-machine"
    assert github_slug("Set up (fresh Debian/Ubuntu machine)") == setup


def test_a_broken_link_a_missing_picture_and_a_wrong_anchor_are_reported(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "here.png").write_bytes(b"")
    (tmp_path / "other.md").write_text("# Other\n\n## Limits\n", encoding="utf-8")
    page = tmp_path / "page.md"
    text = (
        "# Page\n\n"
        "![here](img/here.png) and ![gone](img/gone.png)\n"
        "[fine](other.md#limits), [no file](missing.md), [no heading](other.md#keyboard)\n"
        "[this page](#page), [web](https://example.org/x.png), `[code](nothing.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n"
    )
    assert link_problems(page, text) == [
        "page.md:3: img/gone.png: no such file",
        "page.md:4: missing.md: no such file",
        "page.md:4: other.md#keyboard: other.md has no heading #keyboard",
    ]
    assert pictures(text) == ["img/here.png", "img/gone.png"]
