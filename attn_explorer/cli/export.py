"""``attn-explorer export``: write heatmaps, CSV or NPZ without opening a window.

    attn-explorer export SESSION.json --out DIR [--stage STAGE] [--heads all|montage|current|1,3]
                         [--format png|svg|csv|npz] [--width PX]
    attn-explorer export --example worked --out DIR ...
    attn-explorer export --model FOLDER|FILE.gguf --text "..." [--text-pair "..."] --out DIR
    attn-explorer export --model FILE.gguf --text-file FILE --layer L --head H --stage weights
                         --format npz --out DIR     (one head: one .npz, L and H from 1)

Prints each path written, one per line. User errors print one line on stderr
and exit with status 2; no traceback. Qt runs offscreen when there is no display.
An export whose estimated memory (from the session's declared shape) is over
``state.export.MAX_EXPORT_BYTES`` is refused before anything is computed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from attn_explorer.cli.console import UserError, check_output_path, model_refusal
from attn_explorer.compute import STAGES
from attn_explorer.state.presets import PRESETS
from attn_explorer.state.storage.export import EXPORT_FORMATS

if TYPE_CHECKING:
    from attn_explorer.state.app_state import AppState
    from attn_explorer.state.session import Session

PROG = "attn-explorer export"


class ExportCommandError(UserError):
    """A mistake in the command line or its inputs: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ExportCommandError(f"{message} (see '{PROG} --help')")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Write heatmaps (PNG/SVG), CSV or NPZ of a session, example or model.",
        epilog="Heads are numbered from 1, as in the window, the exported titles and file names.",
    )
    source = parser.add_argument_group("what to export (one of)")
    source.add_argument("session", nargs="?", help="a saved session file (.json)")
    source.add_argument("--example", choices=list(PRESETS), help="a built-in example session")
    source.add_argument(
        "--model", metavar="PATH", help="a BERT model folder or a .gguf decoder file (with --text)"
    )
    parser.add_argument("--text", help="the text to run through --model")
    parser.add_argument(
        "--text-file", metavar="FILE", help="read the text for --model from FILE (UTF-8, as is)"
    )
    parser.add_argument(
        "--layer", type=int, metavar="L", help="with --head: export only this layer (from 1)"
    )
    parser.add_argument(
        "--head", type=int, metavar="H", help="with --layer: export only this head (from 1)"
    )
    parser.add_argument("--text-pair", help="a second text for --model (sentence pairs)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into")
    parser.add_argument("--stage", choices=STAGES, help="pipeline stage (default: the session's)")
    parser.add_argument(
        "--heads",
        default="montage",
        help="montage (one figure, default), all (one file each), current, or numbers like 1,3",
    )
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default=None,
        dest="format_given",
        help="file format (png; npz for one model head)",
    )
    parser.add_argument("--width", type=int, default=1600, metavar="PX", help="image width (1600)")
    return parser


def parse_heads(text: str) -> str | list[int]:
    """``all`` / ``montage`` / ``current``, or comma-separated head numbers (from 1)."""
    if text in ("all", "montage", "current"):
        return text
    try:
        heads = [int(part) for part in text.split(",")]
    except ValueError:
        raise ExportCommandError(
            f"--heads: {text!r} is not all, montage, current or head numbers like 1,3"
        ) from None
    return heads


def _state(args: argparse.Namespace) -> AppState:
    """The example or the session file to export, named as the window would name it."""
    from attn_explorer.state.app_state import AppState
    from attn_explorer.state.presets import preset
    from attn_explorer.state.session import Session
    from attn_explorer.state.storage.session_file import SessionFileError, load_session

    if args.example:
        chosen = preset(args.example)
        return AppState(Session(chosen.snapshot, chosen.options), name=chosen.name)
    try:
        loaded = load_session(args.session)
    except SessionFileError as exc:
        raise ExportCommandError(str(exc)) from None
    for note in loaded.notes:
        print(f"{PROG}: note: {args.session}: {note}", file=sys.stderr)
    name = loaded.name or Path(args.session).stem
    return AppState(Session(loaded.snapshot, loaded.options), name=name, path=args.session)


def _check_cost(session: Session, args: argparse.Namespace) -> None:
    """Refuse, from the declared shape and before any work, an export over the memory limit."""
    from attn_explorer.state.storage.export import (
        MAX_EXPORT_BYTES,
        MAX_WIDTH,
        MIN_WIDTH,
        export_memory_estimate,
        image_bytes_estimate,
    )
    from attn_explorer.state.storage.safe_files import megabytes

    if not MIN_WIDTH <= args.width <= MAX_WIDTH:
        raise ExportCommandError(
            f"width: {args.width!r} pixels is not allowed; use {MIN_WIDTH}..{MAX_WIDTH}"
        )
    stage = args.stage or session.options.stage
    panels = None if args.heads == "montage" else 1  # one figure of every head, or one each
    need = export_memory_estimate(session, stage, args.format, args.width, panels=panels)
    if need <= MAX_EXPORT_BYTES:
        return
    image = 0
    if args.format == "png":
        image = image_bytes_estimate(session, stage, args.width, panels)
    if image and need - image <= MAX_EXPORT_BYTES // 2:  # the width is the cause: say so
        fits = [
            w
            for w in range(MIN_WIDTH, args.width, 100)
            if export_memory_estimate(session, stage, args.format, w, panels=panels)
            <= MAX_EXPORT_BYTES
        ]
        largest = f"; --width {fits[-1]} or less fits" if fits else ""
        raise ExportCommandError(
            f"--width {args.width}: an image that wide would need about {megabytes(image)} "
            f"of memory, over the command line's limit of {megabytes(MAX_EXPORT_BYTES)}"
            f"{largest} (or export fewer heads per image, or --format svg)"
        )
    b, h, t, _ = session.shape
    raise ExportCommandError(
        f"this export would need about {megabytes(need)} of memory ({b * h * t * t:,} "
        f"scores per stage for B={b}, H={h}, T={t} in {session.options.dtype}), over the "
        f"command line's limit of {megabytes(MAX_EXPORT_BYTES)}; use fewer heads or "
        "tokens, dtype float32 or --format csv, or export from the window"
    )


def _model_text(args: argparse.Namespace) -> str:
    """The text for --model: --text, or the contents of --text-file exactly as written."""
    if args.text is not None and args.text_file is not None:
        raise ExportCommandError("give --text or --text-file, not both")
    if args.text_file is None:
        if not args.text:
            raise ExportCommandError('--model needs --text "..." (the text to run through it)')
        return str(args.text)
    from attn_explorer.cli.model_export import read_text_file

    try:
        return read_text_file(args.text_file)
    except ValueError as exc:
        raise ExportCommandError(f"--text-file: {exc}") from None
    except OSError as exc:
        from attn_explorer.state.storage.safe_files import os_error_reason

        raise ExportCommandError(
            f"--text-file: cannot read {args.text_file}: {os_error_reason(exc)}"
        ) from None


def model_message(error: ValueError, args: argparse.Namespace) -> str:
    """A refusal of --model's run naming the flag that gave the text (``console.model_refusal``)."""
    return model_refusal(error, "--text-file" if args.text_file is not None else "--text")


def _head_export(args: argparse.Namespace, text: str) -> list[Path]:
    """--layer L --head H: one head of one layer as one .npz."""
    from attn_explorer.cli.model_export import run_head_export

    if args.layer is None or args.head is None:
        raise ExportCommandError("--layer and --head go together (both numbered from 1)")
    fmt = "npz" if args.format_given is None else args.format_given
    try:
        return run_head_export(
            args.model,
            text,
            Path(args.out),
            layer=args.layer,
            head=args.head,
            stage=args.stage or "weights",
            fmt=fmt,
        )
    except ValueError as exc:
        raise ExportCommandError(model_message(exc, args)) from None
    except OSError as exc:
        from attn_explorer.state.storage.safe_files import os_error_reason

        raise ExportCommandError(
            f"could not write into {args.out}: {os_error_reason(exc)}"
        ) from None


def _model_export(args: argparse.Namespace) -> list[Path]:
    text = _model_text(args)
    if args.layer is not None or args.head is not None:
        return _head_export(args, text)
    if args.stage is not None:
        raise ExportCommandError("--stage with --model needs --layer and --head (one head)")
    try:
        from attn_explorer.cli.model_export import run_model_export
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("attn_explorer"):
            raise ExportCommandError(
                "exporting from a model is not available in this version "
                "(attn_explorer.cli.model_export is missing)"
            ) from None
        raise ExportCommandError(f"exporting from a model needs {exc.name}: {exc}") from None
    try:
        return list(
            run_model_export(
                args.model, text, Path(args.out), args.format, text_pair=args.text_pair
            )
        )
    except ValueError as exc:  # ModelError, TextError and a bad format
        raise ExportCommandError(model_message(exc, args)) from None
    except OSError as exc:
        from attn_explorer.state.storage.safe_files import os_error_reason

        raise ExportCommandError(
            f"could not write into {args.out}: {os_error_reason(exc)}"
        ) from None


def _export(argv: Sequence[str]) -> list[Path]:
    args = _parser().parse_args(list(argv))
    check_output_path("--out", args.out)  # too long, or a newline in one-path-per-line output
    args.format = args.format_given or "png"
    given = [name for name in ("session", "example", "model") if getattr(args, name)]
    if len(given) != 1:
        raise ExportCommandError(
            "give one of SESSION.json, --example NAME or --model FOLDER"
            + (f" (got {', '.join(given)})" if given else "")
        )
    if args.text_pair and not args.model:
        raise ExportCommandError("--text-pair is only used with --model")
    for flag in ("text", "text_file", "layer", "head"):
        if getattr(args, flag) is not None and not args.model:
            raise ExportCommandError(f"--{flag.replace('_', '-')} is only used with --model")
    if args.model:
        return _model_export(args)
    heads = parse_heads(args.heads)
    state = _state(args)  # a bad file is refused before Qt is loaded
    from attn_explorer.render.qt_app import use_offscreen_if_headless

    use_offscreen_if_headless()
    from attn_explorer.render.figure import export_heatmaps
    from attn_explorer.state.storage.session_file import ExportError

    _check_cost(state.session, args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ExportCommandError(f"--out: {out} is a file; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from attn_explorer.state.storage.session_file import os_error_reason

        raise ExportCommandError(f"--out: cannot create {out}: {os_error_reason(exc)}") from None
    try:
        return export_heatmaps(
            state, out, stage=args.stage, heads=heads, fmt=args.format, width=args.width
        )
    except ExportError as exc:
        raise ExportCommandError(str(exc)) from None


def run_export(argv: Sequence[str]) -> int:
    """The ``export`` sub-command: 0 on success, 2 on a user error (one line on stderr)."""
    try:
        paths = _export(argv)
    except ExportCommandError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:  # the estimate is an upper bound, but the machine may have less
        print(f"{PROG}: error: out of memory; export fewer heads or tokens", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
