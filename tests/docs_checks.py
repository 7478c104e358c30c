"""The checks that keep README.md, CONTRIBUTING.md and docs/ true to the tree and the app.

Each check takes the text of a document and returns its problems as strings (empty when all is
well), so the tests can run it on the real documents and, once each, on a broken example to
show that it reports what it should (tests/test_docs_*.py, tests/ui/test_shortcuts.py).

Conventions the documents follow:

- A fenced code block whose last preceding non-blank line is ``<!-- cli: run -->`` holds
  command lines that run as written on the built-in examples (in a scratch folder) and exit 0.
- ``<!-- cli: pending (why) -->`` marks a block whose command lines the parser does not take
  yet (a feature being merged); they must fail to parse, so the marker goes when they parse.
- Every other ``attn-explorer …`` line in a code block must parse with the real parser.
- A shortcut is written in backticks, as the window writes it (``Ctrl+Shift+T``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Every document the checks cover: what users and contributors read.
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)

FENCE = re.compile(r"^(```|~~~)")
#: Fenced blocks of printed output, not commands: their lines are never parsed.
OUTPUT_FENCES = {"text", "output"}
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_IMAGE = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
MARKER = re.compile(r"^<!--\s*cli:\s*(run|pending)\b.*-->$")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
#: Where a shell line stops being the command's arguments.
SHELL_STOPS = {">", ">>", "|", "||", "&&", ";", "&", "2>", "<"}


# -- links and pictures ---------------------------------------------------------------------
def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans removed."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, CODE_SPAN.sub("", line)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(0)[1:-1], heading).strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in ``text`` (a repeated heading gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines_keeping_code(text):
        match = HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            found.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return found


def prose_lines_keeping_code(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code kept (headings use it)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def link_problems(path: Path, text: str) -> list[str]:
    """Every relative link or picture of ``text`` (the document at ``path``) that points at
    nothing: a missing file or folder, or an anchor no heading of the target has."""
    problems = []
    for number, line in prose_lines(text):
        targets = LINK.findall(line) + HTML_IMAGE.findall(line)
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, control:
                continue
            file_part, _, anchor = target.partition("#")
            where = f"{path.name}:{number}: {target}"
            if not file_part:  # an anchor of this page
                if anchor not in anchors(text):
                    problems.append(f"{where}: {path.name} has no heading #{anchor}")
                continue
            destination = (path.parent / file_part).resolve()
            if not destination.exists():
                problems.append(f"{where}: no such file")
                continue
            target_text = destination.read_text("utf-8") if destination.suffix == ".md" else ""
            if anchor and target_text and anchor not in anchors(target_text):
                problems.append(f"{where}: {destination.name} has no heading #{anchor}")
    return problems


def pictures(text: str) -> list[str]:
    """The targets of every picture (``![…](…)``) in ``text``, in order."""
    return [
        m.group(1)
        for _, line in prose_lines(text)
        for m in LINK.finditer(line)
        if m.group(0).startswith("!")
    ]


# -- command lines --------------------------------------------------------------------------
@dataclass(frozen=True)
class CommandLine:
    """One ``attn-explorer …`` line of a code block: its arguments and how it is marked."""

    where: str
    argv: tuple[str, ...]
    marker: str  # "run", "pending" or "" (parse only)


def command_lines(path: Path, text: str) -> list[CommandLine]:
    """Every ``attn-explorer`` command line in the code blocks of ``text``."""
    found = []
    fenced, output, marker, previous = False, False, "", ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if FENCE.match(stripped):
            if not fenced:
                match = MARKER.match(previous)
                marker = match.group(1) if match else ""
                # a ```text block shows what a command printed, not a command to type
                output = stripped[3:].strip() in OUTPUT_FENCES
            fenced = not fenced
            previous = stripped
            continue
        if stripped:
            previous = stripped
        if fenced and output:
            continue
        argv = command_argv(line) if fenced or line.startswith("    ") else None
        if argv is not None:
            found.append(CommandLine(f"{path.name}:{number}", argv, marker if fenced else ""))
    return found


def command_argv(line: str) -> tuple[str, ...] | None:
    """The arguments after ``attn-explorer`` on a shell line, or None when it is not one."""
    text = line.strip().removeprefix("$ ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return None
    while words and ENV_ASSIGNMENT.match(words[0]):
        words.pop(0)
    if not words or Path(words[0]).name != "attn-explorer":
        return None
    argv = []
    for word in words[1:]:
        if word in SHELL_STOPS:
            break
        argv.append(word)
    return tuple(argv)


class _Parsed(Exception):
    """Raised instead of running a command once its arguments have parsed."""


def parse_problem(argv: tuple[str, ...]) -> str:
    """Why the real command line refuses ``argv``, or ``""`` when its parser takes it.

    Runs ``cli.main``'s dispatch with argparse's ``parse_args`` stopped right after a
    successful parse, so each sub-command's own parser decides and nothing runs.
    """
    from attn_explorer.cli import main as cli

    real = argparse.ArgumentParser.parse_args
    refusals: list[BaseException] = []  # a command may catch its parser's error and exit 2

    def parse_then_stop(
        self: argparse.ArgumentParser, args: object = None, namespace: object = None
    ) -> argparse.Namespace:
        try:
            real(self, args, namespace)  # type: ignore[arg-type]  # passed on as given
        except BaseException as exc:
            refusals.append(exc)
            raise
        raise _Parsed

    quiet = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(quiet),
            contextlib.redirect_stderr(quiet),
            _patched(argparse.ArgumentParser, "parse_args", parse_then_stop),
        ):
            cli._dispatch(list(argv))
    except _Parsed:
        return ""
    except SystemExit as exc:  # --help, --version
        if exc.code in (0, None):
            return ""
    except Exception:
        pass
    if refusals:
        return str(refusals[0]) or type(refusals[0]).__name__
    return quiet.getvalue().strip() or "ran without parsing its arguments"


@contextlib.contextmanager
def _patched(owner: type, name: str, value: object) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def cli_problems(lines: list[CommandLine]) -> list[str]:
    """Lines that do not parse, and pending lines that parse already."""
    problems = []
    for line in lines:
        problem = parse_problem(line.argv)
        shown = " ".join(shlex.quote(a) for a in line.argv)
        if line.marker == "pending" and not problem:
            problems.append(
                f"{line.where}: attn-explorer {shown} parses now: drop its 'cli: pending' marker"
            )
        elif line.marker != "pending" and problem:
            problems.append(f"{line.where}: attn-explorer {shown}: {problem}")
    return problems


# -- keyboard -------------------------------------------------------------------------------
KEY_NAMES = r"(?:F\d{1,2}|Tab|Space|Enter|Escape|Home|End|Left|Right|Up|Down|PgUp|PgDown)"
SHORTCUT = re.compile(rf"^(?:(?:Ctrl|Alt|Shift|Meta)\+)+(?:{KEY_NAMES}|[^\s+]|\+)$|^{KEY_NAMES}$")
#: Keys that belong to widgets, not to the window's actions: Enter in a table or a size box,
#: and the dialog buttons' Alt+letters (ui/common/text.add_mnemonics: Discard, Save, Cancel).
WIDGET_KEYS = frozenset({"Enter", "Alt+D", "Alt+S", "Alt+C"})


def shortcut_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, keys) of every shortcut written in backticks in ``text``'s prose."""
    found = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if fenced:
            continue
        for span in CODE_SPAN.findall(line):
            for keys in span[1:-1].split(" / "):
                if SHORTCUT.match(keys.strip()):
                    found.append((number, keys.strip()))
    return found


def keys_of(rows: list[tuple[str, str]], help_text: str) -> set[str]:
    """Every key the window answers: its actions' shortcuts, the keys its F1 help names
    (panels, Escape, Alt+1 … Alt+4) and the widgets' own keys."""
    keys = {k.strip() for row_keys, _ in rows for k in row_keys.split(" / ")}
    for word in re.findall(r"[\w+.=-]+", help_text):
        if SHORTCUT.match(word):
            keys.add(word)
    if "Alt+1 … Alt+4" in help_text:
        keys.update(f"Alt+{n}" for n in range(1, 5))
    return keys | WIDGET_KEYS


def shortcut_problems(name: str, text: str, known: set[str]) -> list[str]:
    """Shortcuts written in ``text`` that the window does not have."""
    return [
        f"{name}:{number}: `{keys}` is not a shortcut of the window"
        for number, keys in shortcut_mentions(text)
        if keys not in known
    ]


def shortcut_table(text: str, heading: str = "## Every shortcut") -> list[tuple[str, str]]:
    """The (keys, action) rows of the table under ``heading``."""
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1]))
    return rows
