"""Command line: launch the window, or run a headless sub-command.

    attn-explorer [SESSION.json]        open the window (on a saved session)
    attn-explorer open FILE             open the window on Q, K, V from a .npz/.npy/.safetensors
    attn-explorer --self-test           open offscreen, render, export, check, exit
    attn-explorer scores ...            print S = Q Kᵀ for every strategy, with timing
    attn-explorer export ...            write heatmap images / CSV / NPZ without a window
    attn-explorer bench ...             print the strategy timing table
    attn-explorer analyze ...           a real model's instruments on one text, as JSON

User errors print one line on stderr and exit with status 2; no traceback. Standard
output follows cli/console.py: a reader that went away ends quietly (status 141), a
write that fails (a full disk) is one line and status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from attn_explorer import __version__
from attn_explorer.cli.console import OneLineParser, UserError, run_guarded

__all__ = ["UserError", "main", "run_scores"]

SUBCOMMANDS = {
    "scores": "print S = Q Kᵀ for every strategy, with timing",
    "export": "write heatmaps (PNG/SVG), CSV or NPZ from a session, example or model",
    "bench": "print the strategy timing table (loop / matmul / batched / einsum)",
    "analyze": "head scores, rollout, logit lens, next token, ablation of a model, as JSON",
    "open": "open the window on query, key, value arrays (.npz, .npy, .safetensors)",
}


def _main_parser() -> argparse.ArgumentParser:
    epilog = "sub-commands:\n" + "\n".join(
        f"  {name:<8} {text}" for name, text in SUBCOMMANDS.items()
    )
    epilog += "\n\nrun 'attn-explorer SUB-COMMAND --help' for a sub-command's options."
    parser = OneLineParser(
        prog="attn-explorer",
        description="Attention Explorer: see, step through and time multi-head attention.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"attn-explorer {__version__}")
    parser.add_argument("session", nargs="?", help="a session file (.json) to open")
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="open the window offscreen, render the worked example, export a PNG, check it, exit",
    )
    return parser


def _scores_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="attn-explorer scores",
        description="Print S = Q Kᵀ computed by each strategy, with the time each took.",
    )
    parser.add_argument(
        "--example",
        choices=["worked", "exercise"],
        help="the seed article's worked example (Q = K) or its exercise (adds k4 = (2, 0))",
    )
    parser.add_argument("--query", help='query matrix as JSON, e.g. "[[1,0],[0,1]]"')
    parser.add_argument("--key", help="key matrix as JSON (defaults to the query)")
    parser.add_argument(
        "--strategy",
        action="append",
        choices=["loop", "matmul", "batched"],
        help="strategy to run (repeatable; default all three)",
    )
    return parser


def _parse_matrix(name: str, text: str) -> list[list[float]]:
    try:
        # An integer of 5 000 digits raised a bare ValueError from int(): keep it a float.
        value = json.loads(text, parse_int=lambda digits: float(digits))
    except json.JSONDecodeError as exc:
        raise UserError(f"--{name}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"--{name}: not valid JSON (nested too deeply)") from None
    _check_numbers(f"--{name}", value)
    return value


def _check_numbers(flag: str, value: object) -> None:
    """Refuse, in the command line's words, JSON that is not rows of numbers of one length
    (numpy's own words for it named dtypes and "inhomogeneous shapes")."""
    example = "[[1, 0], [0, 1]]"
    level: list[object] = [value]
    while level:
        if any(isinstance(item, bool) for item in level):
            raise UserError(f"{flag}: true and false are booleans, not numbers; give numbers only")
        lists = [item for item in level if isinstance(item, list)]
        if lists and len(lists) != len(level):
            raise UserError(f"{flag}: a row mixes numbers and lists; give rows like {example}")
        if not lists:
            bad = next((item for item in level if not isinstance(item, (int, float))), None)
            if bad is not None:
                raise UserError(
                    f"{flag}: {json.dumps(bad)[:40]} is not a number; give numbers only, "
                    f"like {example}"
                )
            return
        lengths = sorted({len(item) for item in lists})
        if len(lengths) > 1:
            raise UserError(
                f"{flag}: rows of {' and '.join(map(str, lengths))} values; give every row the "
                f"same number of values, like {example}"
            )
        level = [item for row in lists for item in row]


def run_scores(argv: Sequence[str]) -> int:
    """The ``scores`` sub-command."""
    args = _scores_parser().parse_args(argv)  # before numpy: a typo costs no imports
    import numpy as np

    from attn_explorer.compute import STRATEGIES, attention_scores, time_strategies
    from attn_explorer.state.presets import WORKED_QK, preset

    if args.example and (args.query or args.key):
        raise UserError("give either --example or --query/--key, not both")
    if args.example == "exercise":  # the preset's keys, and the worked example's three queries
        query, key = WORKED_QK, preset("exercise").snapshot.key[0, 0].tolist()
    elif args.query:
        query = _parse_matrix("query", args.query)
        key = _parse_matrix("key", args.key) if args.key else query
    elif args.key:
        raise UserError("--key needs --query")
    else:
        query = key = WORKED_QK
    strategies = args.strategy or list(STRATEGIES)
    try:
        q = np.asarray(query)  # not dtype=float64: true and "1" would pass as numbers;
        k = np.asarray(key)  # the compute layer refuses them by name
    except (ValueError, TypeError) as exc:
        raise UserError(f"query/key: expected rectangular lists of numbers ({exc})") from None
    try:
        timings = time_strategies(q, k, strategies, repeats=3, min_seconds=0.005)
        for name in strategies:
            scores = attention_scores(q, k, name)
            t = timings[name]
            print(f"{name} ({t.median * 1e6:.1f} µs median of {t.repeats}):")
            print("S = " + json.dumps(_plain(scores.tolist())))
    except ValueError as exc:  # the compute layer names its arguments: --query, --key here
        from attn_explorer.models.errors import phrase

        raise UserError(phrase(exc, "cli")) from None
    return 0


def _plain(value: object) -> object:
    """Floats that are whole numbers print as integers (S = [[1, 0, 1], ...])."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``attn-explorer`` and ``python -m attn_explorer``."""
    if getattr(sys, "frozen", False):  # only a bundle needs it; the import costs ~6 ms
        import multiprocessing

        multiprocessing.freeze_support()  # a frozen bundle's timing child processes start here
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list and args_list[0] in SUBCOMMANDS else ""
    prog = f"attn-explorer {command}".rstrip()
    return run_guarded(prog, lambda: _dispatch(args_list), needs_stdout=bool(command))


def _dispatch(args_list: list[str]) -> int:
    if args_list and args_list[0] == "scores":
        return run_scores(args_list[1:])
    if args_list and args_list[0] == "export":
        from attn_explorer.cli.export import run_export

        return run_export(args_list[1:])
    if args_list and args_list[0] == "open":
        from attn_explorer.cli.open_tensors import run_open

        return run_open(args_list[1:])
    if args_list and args_list[0] == "analyze":
        from attn_explorer.cli.analyze import run_analyze

        return run_analyze(args_list[1:])
    if args_list and args_list[0] == "bench":
        from attn_explorer.cli.bench import run_bench

        return run_bench(args_list[1:])
    args = _main_parser().parse_args(args_list)
    if args.self_test:
        from attn_explorer.cli.self_test import run_self_test

        return run_self_test()
    from attn_explorer.ui.window.launch import run_app

    return run_app(args.session)
