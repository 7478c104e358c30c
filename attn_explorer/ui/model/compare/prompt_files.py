"""The model dock's prompts kept with the session file (format version 2, issue 35).

File ▸ Save writes the document's :attr:`~attn_explorer.state.document.Document.prompts`;
this module keeps them equal to what the dock holds (the sentence, the corrupted prompt,
the answer and wrong tokens), and when a file that holds prompts is opened it types them
back into the dock, which then runs them as the user's typing would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_explorer.models.session import ModelSession
from attn_explorer.state.document import Document
from attn_explorer.state.storage.prompts import Prompts
from attn_explorer.ui.model.compare.panel import compare_of

if TYPE_CHECKING:
    from attn_explorer.ui.model.model_view import ModelView


def current_prompts(session: ModelSession) -> Prompts:
    """What the model dock holds now, as a session file keeps it."""
    return Prompts(session.text, session.corrupt, session.answer, session.wrong)


def show_prompts(view: ModelView, prompts: Prompts) -> None:
    """Type ``prompts`` into the dock (each box as the user would; the runs follow)."""
    view.set_sentence(prompts.text)
    corrupt = compare_of(view).corrupt_edit
    if corrupt is not None:
        corrupt.setText(prompts.corrupt)
    view.session.set_answer(prompts.answer)
    view.session.set_wrong(prompts.wrong)


def keep_prompts(view: ModelView, document: Document) -> None:
    """Keep ``document.prompts`` up to date with the dock, and open a file's into it."""

    def remember() -> None:
        document.set_prompts(current_prompts(view.session))

    def restore() -> None:
        prompts = document.prompts
        if prompts is not None and prompts != current_prompts(view.session):
            show_prompts(view, prompts)

    restore()  # a file opened before the dock was built
    remember()
    view.session.events.request.connect(remember)
    view.session.events.compare.connect(remember)
    document.session.events.document.connect(restore)
