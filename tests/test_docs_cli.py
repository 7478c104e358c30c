"""Every ``attn-explorer …`` line shown in a code block parses with the real parser; the lines
marked ``<!-- cli: run -->`` run on the built-in examples and exit 0 (tests/docs_checks.py)."""

from __future__ import annotations

import pytest
from docs_checks import DOCUMENTS, CommandLine, cli_problems, command_lines, parse_problem

LINES = [line for path in DOCUMENTS for line in command_lines(path, path.read_text("utf-8"))]
RUNNABLE = [line for line in LINES if line.marker == "run"]


def test_every_command_line_in_the_docs_parses():
    assert len(LINES) >= 20, "the command lines are found"
    assert cli_problems(LINES) == []


@pytest.mark.parametrize("line", RUNNABLE, ids=lambda line: line.where)
def test_a_runnable_command_line_runs_and_exits_0(line, tmp_path, monkeypatch, capsys):
    from attn_explorer.cli.main import main

    monkeypatch.chdir(tmp_path)  # the lines write into relative folders: a scratch one
    status = main(list(line.argv))
    out, err = capsys.readouterr()
    assert status == 0, f"{line.where}: exit {status}: {err}"
    assert out or any(tmp_path.iterdir()), "it printed or wrote something"


def test_the_runnable_lines_cover_scores_and_export():
    commands = {line.argv[0] for line in RUNNABLE}
    assert {"scores", "export"} <= commands


def test_a_line_that_no_longer_parses_is_reported():
    assert parse_problem(("export", "--example", "worked", "--out", "x")) == ""
    assert parse_problem(("scores", "--example", "worked")) == ""
    assert parse_problem(("--help",)) == ""
    unknown = ("export", "--example", "worked", "--out", "x", "--colour", "red")
    assert "unrecognized arguments: --colour" in parse_problem(unknown)
    assert "invalid choice" in parse_problem(("scores", "--example", "nope"))
    lines = [
        CommandLine("page.md:3", ("scores", "--strategy", "einsum"), ""),
        CommandLine("page.md:5", ("scores", "--example", "worked"), "pending"),
        CommandLine("page.md:6", ("analyze", "--frobnicate"), "pending"),
    ]
    problems = cli_problems(lines)
    assert len(problems) == 2
    assert problems[0].startswith("page.md:3: attn-explorer scores --strategy einsum: ")
    assert problems[1] == (
        "page.md:5: attn-explorer scores --example worked parses now: "
        "drop its 'cli: pending' marker"
    )


def test_command_lines_are_read_as_a_shell_would(tmp_path):
    page = tmp_path / "page.md"
    text = (
        "Prose: attn-explorer --self-test is not a code line.\n\n"
        "<!-- cli: run -->\n"
        "```sh\n"
        "attn-explorer scores --query '[[1,0],[0,1]]'  # a comment\n"
        "QT_DEBUG_PLUGINS=1 .venv/bin/attn-explorer --self-test\n"
        "attn-explorer bench --json > before.json\n"
        "python -m pytest\n"
        "```\n\n"
        "```text\n"
        "attn-explorer export: error: --text-file: too many tokens\n"
        "```\n\n"
        "    attn-explorer open layer3.npz\n"
    )
    found = command_lines(page, text)
    assert [(line.argv, line.marker) for line in found] == [
        (("scores", "--query", "[[1,0],[0,1]]"), "run"),
        (("--self-test",), "run"),
        (("bench", "--json"), "run"),
        (("open", "layer3.npz"), ""),
    ]
