"""``attn-explorer analyze``: every instrument of issue 25 on one text, as JSON, no window.

    attn-explorer analyze --model PATH (--text TEXT | --text-file FILE) --json OUT.json
                          [--no-ablation]
                          [(--corrupt TEXT | --corrupt-file FILE) [--answer STR] [--wrong STR]]

PATH is a GGUF decoder file or a BERT folder. OUT.json holds tokens, input_ids,
layers, heads, head_scores, rollout and, for a decoder (null for an encoder),
logit_lens, next_token and ablation; with a corrupted prompt (issue 35) also compare,
patching and logit_attribution (null without); see :mod:`attn_explorer.analysis.report`.
Written atomically; prints its path. User errors print one line on stderr and exit
with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from attn_explorer.cli.console import model_refusal

PROG = "attn-explorer analyze"
#: Longest --text-file read (bytes): four bytes for each of the text limit's characters.
MAX_TEXT_FILE_BYTES = 4 * 100_000


class AnalyzeCommandError(Exception):
    """A mistake in the command line or its inputs: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise AnalyzeCommandError(f"{message} (see '{PROG} --help')")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Head scores, rollout, logit lens, next token and head ablation of a "
        "real model on one text, written as JSON.",
    )
    parser.add_argument(
        "--model", required=True, metavar="PATH", help="a .gguf decoder file or a BERT folder"
    )
    text = parser.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="the text to analyze")
    text.add_argument("--text-file", metavar="FILE", help="a UTF-8 file holding the text")
    parser.add_argument("--json", required=True, metavar="OUT.json", help="the file to write")
    corrupt = parser.add_mutually_exclusive_group()
    corrupt.add_argument(
        "--corrupt",
        metavar="TEXT",
        help="a second, corrupted prompt of as many tokens: compare, patch and attribute",
    )
    corrupt.add_argument(
        "--corrupt-file", metavar="FILE", help="a UTF-8 file holding the corrupted prompt"
    )
    parser.add_argument(
        "--answer",
        metavar="STR",
        help="the answer token (one token; default: the clean prompt's top token)",
    )
    parser.add_argument(
        "--wrong",
        metavar="STR",
        help="the wrong token (one token; default: the corrupted prompt's top token)",
    )
    parser.add_argument(
        "--no-ablation",
        action="store_true",
        help="skip the scan over every head (its field is then null)",
    )
    return parser


#: The flag each kind of PairError (analysis.compare) is about.
PAIR_FLAGS = {
    "token_count": "--corrupt",
    "answer": "--answer",
    "wrong": "--wrong",
    "equal": "--corrupt",
    "encoder": "--model",
}


def _read_text(path: str, flag: str = "--text-file") -> str:
    from attn_explorer.state.storage.safe_files import read_user_file

    try:
        data = read_user_file(path, MAX_TEXT_FILE_BYTES, "text file")
    except ValueError as exc:
        raise AnalyzeCommandError(f"{flag}: {path}: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AnalyzeCommandError(
            f"{flag}: {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def _analyze(argv: Sequence[str]) -> Path:
    args = _parser().parse_args(list(argv))
    text = args.text if args.text is not None else _read_text(args.text_file)
    text_flag = "--text" if args.text is not None else "--text-file"
    corrupt_flag = "--corrupt-file" if args.corrupt_file is not None else "--corrupt"
    corrupt = args.corrupt
    if args.corrupt_file is not None:
        corrupt = _read_text(args.corrupt_file, "--corrupt-file")
    for flag, value in (("--answer", args.answer), ("--wrong", args.wrong)):
        if value is not None and corrupt is None:
            raise AnalyzeCommandError(f"{flag}: compares two prompts; give --corrupt as well")
    out = Path(args.json)
    if out.is_dir():
        raise AnalyzeCommandError(f"--json: {out} is a folder; give a file name")
    from attn_explorer.analysis import PairError, analyze
    from attn_explorer.models import load_model
    from attn_explorer.models.errors import check_text
    from attn_explorer.state.storage.safe_files import os_error_reason, write_atomic

    if corrupt is not None:
        try:
            check_text("corrupt", corrupt)  # before the model is loaded
        except ValueError as exc:
            raise AnalyzeCommandError(model_refusal(exc, text_flag, corrupt_flag)) from None
    try:
        check_text("text", text)  # before the model is loaded
        model = load_model(args.model)
    except ValueError as exc:  # ModelError, TextError
        raise AnalyzeCommandError(model_refusal(exc, text_flag)) from None
    except OSError as exc:
        raise AnalyzeCommandError(f"--model: {args.model}: {os_error_reason(exc)}") from None
    try:
        report = analyze(
            model,
            text,
            ablation=not args.no_ablation,
            corrupt=corrupt,
            answer=args.answer,
            wrong=args.wrong,
        )
    except PairError as exc:  # a pair that cannot be compared: the flag at fault
        raise AnalyzeCommandError(f"{PAIR_FLAGS[exc.kind]}: {exc.detail}") from None
    except ValueError as exc:  # TextError: empty, or too many tokens
        raise AnalyzeCommandError(model_refusal(exc, text_flag, corrupt_flag)) from None
    data = json.dumps(report, ensure_ascii=False, allow_nan=False).encode("utf-8")
    try:
        return write_atomic(out, data)
    except OSError as exc:
        raise AnalyzeCommandError(f"--json: cannot write {out}: {os_error_reason(exc)}") from None


def run_analyze(argv: Sequence[str]) -> int:
    """The ``analyze`` sub-command: 0 on success, 2 on a user error (one line on stderr)."""
    try:
        path = _analyze(argv)
    except AnalyzeCommandError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"{PROG}: error: out of memory; analyze a shorter text", file=sys.stderr)
        return 2
    print(path)
    return 0
