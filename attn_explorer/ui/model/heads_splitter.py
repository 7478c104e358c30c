"""The Model dock's two panes: the layers × heads grid and the tabs under (or beside) it.

A :class:`HeadsSplitter` puts the thumbnail grid above the tabs (selected head,
summaries, generation, positions) or beside them, whichever gives the grid's square
cells more room, and gives the grid's pane just the room its cells fill. It arranges
itself whenever its size changes, until the user drags the handle. The tabs are
:class:`LowerTabs`: short names, each drawn whole, that fit the dock's narrowest width.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QApplication,
    QProxyStyle,
    QSplitter,
    QStyle,
    QStyleOption,
    QTabBar,
    QTabWidget,
    QWidget,
)

from attn_explorer.ui.model.model_grid import ThumbnailGrid


class HeadsSplitter(QSplitter):
    """``grid`` and ``tabs`` in one splitter; ``detail`` is the widget that must stay whole."""

    def __init__(self, grid: ThumbnailGrid, tabs: QWidget, detail: QWidget) -> None:
        super().__init__(Qt.Orientation.Vertical)
        self._grid, self._detail = grid, detail
        self.setChildrenCollapsible(False)
        self.addWidget(grid)
        self.addWidget(tabs)
        self.setStretchFactor(0, 0)  # the grid keeps the size that fits its cells
        self.setStretchFactor(1, 1)
        self.splitterMoved.connect(self._on_split_dragged)
        self.installEventFilter(self)  # re-arrange when its room changes, before the layout
        self._split_by_user = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self and event.type() == QEvent.Type.Resize:
            self.arrange()
        return super().eventFilter(watched, event)

    def arrange(self) -> None:
        """Grid above or beside the head, whichever gives bigger cells; size it to its cells.

        A 6 × 12 grid (MiniLM) in a tall dock goes above, a square 12 × 12 in a wide one
        beside. Its pane gets just the room its square cells fill, the head the rest,
        until the user drags the splitter.
        """
        room, grid = self.size(), self._grid
        if grid.shape is None or room.isEmpty():
            return
        width, height = room.width(), room.height()
        beside = width - self._detail.minimumWidth() - 2 * self.handleWidth()
        above = height // 2
        cell_beside = grid.cell_for(min(beside, width * 3 // 5), height)
        cell_above = grid.cell_for(width, above)
        wanted = (
            Qt.Orientation.Horizontal
            if beside > 0 and cell_beside > cell_above
            else Qt.Orientation.Vertical
        )
        if self.orientation() != wanted:
            self.setOrientation(wanted)
            self._split_by_user = False
        if self._split_by_user:
            return
        if wanted == Qt.Orientation.Vertical:
            fits = grid.size_for(cell_above)
            bar = grid.horizontalScrollBar().sizeHint().height() if fits.width() > width else 0
            need = min(fits.height() + bar, above)  # too many layers: the grid scrolls
            self.setSizes([need, max(1, height - need)])
        else:
            need = grid.size_for(cell_beside).width()
            self.setSizes([need, max(1, width - need)])

    def _on_split_dragged(self, *_: object) -> None:
        self._split_by_user = True


class _TightTabStyle(QProxyStyle):
    """The app's style with less room beside each tab's name (``TAB_SPACE_PX`` in all)."""

    TAB_SPACE_PX = 12  # Fusion's own is 24: five names then overflow a 360-px dock

    def pixelMetric(
        self,
        metric: QStyle.PixelMetric,
        option: QStyleOption | None = None,
        widget: QWidget | None = None,
    ) -> int:
        if metric == QStyle.PixelMetric.PM_TabBarTabHSpace:
            return self.TAB_SPACE_PX
        return super().pixelMetric(metric, option, widget)


class CompactTabBar(QTabBar):
    """Tabs with names never elided, and only a little room beside them.

    The style's own padding made five tabs wider than a narrow dock, and the bar then
    scrolled, cutting the last visible name ("Gener").
    """

    def __init__(self) -> None:
        super().__init__()
        # Its own copy of the app's style by name: the palette switch replaces the app's
        # style object, which a proxy of that very object would outlive.
        app_style = QApplication.style()
        self._style = _TightTabStyle(app_style.name() if app_style else "Fusion")
        self.setStyle(self._style)
        self.setElideMode(Qt.TextElideMode.ElideNone)  # a name is shown whole or not at all
        self.setUsesScrollButtons(True)  # only if the dock is narrower than every name


class LowerTabs(QTabWidget):
    """The tabs under the grid (document mode, :class:`CompactTabBar`)."""

    def __init__(self) -> None:
        super().__init__()
        self.setTabBar(CompactTabBar())
        self.setDocumentMode(True)

    def add(self, page: QWidget, name: str, tip: str) -> None:
        """Add ``page`` under the short ``name``; ``tip`` says what it is in full."""
        self.setTabToolTip(self.addTab(page, name), tip)
