"""Everything the window shows, without Qt: the session, its results, the stepper, the document.

The window builds one :class:`AppState` and hands its parts to the views; the
command line's export, tests and the lessons drive the same objects. Each part
owns one fact: the session the numbers and options (the stepper position among
them), the results what was computed from them, the document which file they
belong to and its name. Nothing here imports Qt.
"""

from __future__ import annotations

from attn_explorer.state.document import Document
from attn_explorer.state.results.results import Results
from attn_explorer.state.session import Session
from attn_explorer.state.types import UNTITLED
from attn_explorer.state.views.stepper import Stepper
from attn_explorer.state.views.vectors import VectorsState


class AppState:
    """The application's state: one session and what follows it.

    ``name`` and ``path`` start the :class:`Document`: the numbers came from that file
    (the command line's export of a session file), or are untitled.
    """

    def __init__(
        self,
        session: Session | None = None,
        *,
        name: str = UNTITLED,
        path: str | None = None,
    ) -> None:
        self.session = session or Session()
        #: The one owner of the computed result (views subscribe to ``results.changed``).
        self.results = Results(self.session)
        #: The loop stepper: an overlay on the result while a step-through is in progress.
        self.stepper = Stepper(self.session)
        self.document = Document(self.session, name=name, path=path)
        #: The vectors view's selection, projection and drags.
        self.vectors = VectorsState(self.session, self.stepper, self.document)
