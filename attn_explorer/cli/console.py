"""The command line's one policy for its arguments, its paths and its standard output.

* **Argument errors are one line, exit 2.** :class:`OneLineParser` is argparse
  whose ``error`` raises :class:`UserError` (``<prog>: error: <what> (see '<prog>
  --help')``) instead of printing the usage text.
* **Standard output behaves as in well-behaved Unix tools** (:func:`run_guarded`):
  a reader that went away (``| head -c1``: a broken pipe) ends the command
  quietly with status 141, as SIGPIPE would; a failed write (``>/dev/full``)
  is one line on stderr and exit 2; a closed stdout (``>&-``) is refused before
  any work, since nothing printed could be seen.
* **A model's refusals name the flag the user typed** (:func:`model_refusal`):
  ``--text-file: 1,201 tokens …; export one head with --layer L --head H``, never the
  Python API's ``text:`` or ``stack[layer, head]``; a model file's own fault names
  ``--model`` and the file, and the key or tensor in it.
* **Paths the command line prints or creates are checked first**
  (:func:`check_output_path`): a name over the system's limits or one holding a
  newline or another control character (the output is one path per line) is one
  line, exit 2, never ``File name too long`` from deep inside.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

#: Exit status of a command whose reader went away (128 + SIGPIPE), printed quietly.
BROKEN_PIPE_STATUS = 141
#: Exit status of every refused command: a user error or an output that cannot be written.
USER_ERROR_STATUS = 2
#: Longest file name component and path (bytes), as Linux and macOS allow.
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4095


class UserError(Exception):
    """A mistake in what the user asked for: shown as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one :class:`UserError` line pointing at ``--help``."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see '{self.prog} --help')")

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse's own swallows OSError: --help >/dev/full would exit 0 having printed nothing
        if message:
            (file or sys.stderr).write(message)


def describe_path(text: str) -> str:
    """``text`` for a one-line message: quoted with escapes when it holds control characters."""
    return repr(text) if any(ord(c) < 32 or ord(c) == 127 for c in text) else text


def check_output_path(option: str, path: str | os.PathLike[str]) -> None:
    """Refuse (UserError naming ``option``) a path the command line would create or print
    that the system cannot hold or one line cannot show."""
    text = os.fspath(path)
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise UserError(
            f"{option}: {describe_path(text)[:80]} holds the control character {bad!r}; the "
            "output lists one path per line, so choose a name without it"
        )
    encoded = os.fsencode(text)
    if len(encoded) > MAX_PATH_BYTES:
        raise UserError(
            f"{option}: the path is {len(encoded):,} bytes long, over the limit of "
            f"{MAX_PATH_BYTES:,}; choose a shorter one"
        )
    for part in encoded.split(b"/"):
        if len(part) > MAX_NAME_BYTES:
            raise UserError(
                f"{option}: a name in the path is {len(part):,} bytes long, over the limit of "
                f"{MAX_NAME_BYTES}; choose a shorter one"
            )


def _stdout_is_open() -> bool:
    """False when stdout was closed before the program started (``>&-``)."""
    if sys.stdout is None:  # Python's stdout when descriptor 1 was closed at start-up
        return False
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # a stream without a descriptor (a test's capture)
        return True
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def write_error_reason(exc: OSError) -> str:
    """Why stdout could not be written, in a message's words."""
    reasons = {
        errno.ENOSPC: "the disk is full",
        errno.EBADF: "standard output is closed",
        errno.EIO: "an input/output error",
        errno.EDQUOT: "the disk quota is exceeded",
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def run_guarded(prog: str, run: Callable[[], int], needs_stdout: bool = True) -> int:
    """Run a command under the output policy (see module doc); return its exit status.

    ``run`` prints with ``print``; its output is flushed here, so a write error is
    seen before the status is returned. A :class:`UserError` (from ``run`` or its
    parser) is printed as ``<prog>: error: <message>``.
    """
    try:
        if needs_stdout and not _stdout_is_open():
            raise UserError("standard output is closed; nothing printed could be seen")
        status = run()
        if sys.stdout is not None:
            sys.stdout.flush()
        return status
    except UserError as exc:
        _error(prog, str(exc))
        return USER_ERROR_STATUS
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE_STATUS
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG):
            raise
        _silence_stdout()
        _error(prog, f"cannot write the output: {write_error_reason(exc)}")
        return USER_ERROR_STATUS
    except SystemExit as exc:  # argparse's --help / --version printed, then exit 0
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            return BROKEN_PIPE_STATUS
        except OSError as error:
            _silence_stdout()
            _error(prog, f"cannot write the output: {write_error_reason(error)}")
            return USER_ERROR_STATUS
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else USER_ERROR_STATUS


def _error(prog: str, message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"{prog}: error: {message}", file=sys.stderr, flush=True)


def model_refusal(
    error: ValueError, text_flag: str = "--text", corrupt_flag: str = "--corrupt"
) -> str:
    """``error``, raised by running ``--model`` on a text, in the command line's words:
    the flag the user gave (``text_flag`` is ``--text`` or ``--text-file``; ``--text-pair``,
    ``--layer``, ``--stage``…) and what to type instead; a model file's own fault (which
    names the file) after ``--model:``."""
    from attn_explorer.models.errors import Refusal

    refusal = error if isinstance(error, Refusal) else Refusal(str(error))
    if not refusal.what or refusal.what == "model":
        return f"--model: {refusal.phrase('api')}"
    return refusal.phrase("cli", {"text": text_flag, "corrupt": corrupt_flag})
