"""Everything the window shows, without Qt: the session, its results, the stepper, the document.

The window builds one :class:`AppState` and hands its parts to the views; tests
and the lessons drive the same objects. Nothing here imports Qt.
"""

from __future__ import annotations

from attn_explorer.state.document import Document
from attn_explorer.state.results.results import Results
from attn_explorer.state.session import Session
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.state.views.vectors import VectorsState


class AppState:
    """The application's state: one session and what follows it."""

    def __init__(self, session: Session | None = None) -> None:
        self.session = session or Session()
        #: The loop stepper: an overlay on the result while a step-through is in progress.
        self.stepper = Stepper(self.session)
        self.document = Document(self.session)
        #: The vectors view's selection, projection and drags.
        self.vectors = VectorsState(self.session, self.stepper)

    @property
    def results(self) -> Results:
        """The one owner of the computed result (``results.changed`` tells the views)."""
        return self.session.results
