"""The shipped example sessions: listed for the menu, loaded, and regenerated from the presets.

Qt-free. Each example is a session file under ``resources/examples`` written from a
preset (:data:`EXAMPLE_FILES`), so a test can check the shipped files against the
presets and ``python -m attn_explorer.state.storage.examples`` rewrites them.
"""

from __future__ import annotations

import os
from importlib.resources.abc import Traversable
from pathlib import Path

from attn_explorer.state.presets import PRESET_TEXT, preset
from attn_explorer.state.storage.safe_files import write_atomic
from attn_explorer.state.storage.session_file import (
    LoadedSession,
    load_session_text,
    session_json,
    snapshot_to_dict,
)

#: Shipped example sessions: file name → preset it is generated from (and its title).
EXAMPLE_FILES = {
    "worked.json": "worked",
    "exercise.json": "exercise",
    "random-4-heads.json": "random",
    "causal.json": "causal",
}


def list_examples() -> list[tuple[str, Traversable]]:
    """The shipped example sessions as (menu title, file), in menu order."""
    from attn_explorer.state.storage.resources import resource

    return [
        (PRESET_TEXT[name][0], resource("examples", file)) for file, name in EXAMPLE_FILES.items()
    ]


def load_example(file: Traversable) -> LoadedSession:
    """Load a shipped example (one of :func:`list_examples`'s files)."""
    return load_session_text(file.read_text(encoding="utf-8"), file.name)


def example_text(file_name: str) -> str:
    """The session-file text an example is generated from (its preset)."""
    chosen = preset(EXAMPLE_FILES[file_name])
    return session_json(snapshot_to_dict(chosen.snapshot, chosen.options, chosen.name))


def write_examples(folder: str | os.PathLike[str]) -> list[Path]:
    """Regenerate the example session files in ``folder`` from the presets."""
    return [
        write_atomic(Path(folder) / file, example_text(file).encode("utf-8"))
        for file in EXAMPLE_FILES
    ]


# python -m attn_explorer.state.storage.examples → regenerate resources/examples
if __name__ == "__main__":
    from attn_explorer.state.storage.resources import resource

    for written in write_examples(str(resource("examples"))):
        print(written)
