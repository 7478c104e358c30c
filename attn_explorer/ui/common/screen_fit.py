"""Where the main window opens: a size derived from the screen, never off its edge.

Pure rectangle arithmetic on ``(x, y, width, height)`` tuples, so the rules are tested
without a screen; :func:`fit_window` applies them to a real window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

Rect = tuple[int, int, int, int]  # x, y, width, height

PREFERRED_SIZE = (1600, 1000)  # on a big screen: room for every dock, not a wall of grey
MINIMUM_SIZE = (1000, 650)  # every dock still reachable (docks tabify, panels scroll)
FILL_BELOW = (1500, 950)  # a screen smaller than this gets all of its available area


def default_geometry(available: Rect) -> Rect:
    """The window's first rectangle on a screen whose free area is ``available``.

    Small screens (laptops, a projector at 1280 × 720) get their whole free area; bigger
    ones a window of :data:`PREFERRED_SIZE`, centred.
    """
    x, y, width, height = available
    if width < FILL_BELOW[0] or height < FILL_BELOW[1]:
        return available
    w, h = min(PREFERRED_SIZE[0], width), min(PREFERRED_SIZE[1], height)
    return (x + (width - w) // 2, y + (height - h) // 2, w, h)


def minimum_size(available: Rect) -> tuple[int, int]:
    """:data:`MINIMUM_SIZE`, or the screen's free area where that is smaller."""
    return (min(MINIMUM_SIZE[0], available[2]), min(MINIMUM_SIZE[1], available[3]))


def fits(rect: Rect, available: Rect, slack: int = 0) -> bool:
    """True when ``rect`` lies inside ``available`` and is at least the minimum size."""
    x, y, w, h = rect
    ax, ay, aw, ah = available
    return (
        x >= ax - slack
        and y >= ay - slack
        and x + w <= ax + aw + slack
        and y + h <= ay + ah + slack
        and w >= minimum_size(available)[0] - slack
        and h >= minimum_size(available)[1] - slack
    )


def _tuple(rect: QRect) -> Rect:
    return (rect.x(), rect.y(), rect.width(), rect.height())


def available_area(window: QWidget) -> Rect:
    """The free area of the screen the window is on (the primary screen before it shows)."""
    from PySide6.QtGui import QGuiApplication

    screen = window.screen() or QGuiApplication.primaryScreen()
    return _tuple(screen.availableGeometry())


def fit_window(window: QWidget) -> None:
    """Give ``window`` its minimum and default size for the screen it is on."""
    from PySide6.QtCore import Qt

    available = available_area(window)
    window.setMinimumSize(*minimum_size(available))
    x, y, w, h = default_geometry(available)
    window.setGeometry(x, y, w, h)
    if (x, y, w, h) == available:
        # All of a small screen: maximised, so the window manager fits the title bar and
        # borders in too (their size is unknown until the window is shown).
        window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)


def saved_frame_fits(saved: object) -> bool:
    """True when a frame saved at the last close (``[x, y, w, h]`` from the settings file,
    which may hold anything) lies inside the free area of one of today's screens."""
    from PySide6.QtGui import QGuiApplication

    if not isinstance(saved, list | tuple) or len(saved) != 4:
        return False
    try:
        x, y, w, h = (int(v) for v in saved)
    except (TypeError, ValueError):
        return False
    frame = (x, y, w, h)
    return any(fits(frame, _tuple(s.availableGeometry())) for s in QGuiApplication.screens())


def keep_inside(window: QWidget) -> None:
    """Shrink and move a shown window whose frame (title bar, borders) runs off its screen."""
    if window.isMaximized() or window.isFullScreen():
        return
    ax, ay, aw, ah = available_area(window)
    frame, inner = window.frameGeometry(), window.geometry()
    extra_w, extra_h = frame.width() - inner.width(), frame.height() - inner.height()
    width = min(frame.width(), aw)
    height = min(frame.height(), ah)
    x = min(max(frame.x(), ax), ax + aw - width)
    y = min(max(frame.y(), ay), ay + ah - height)
    if (x, y, width, height) != _tuple(frame):
        least = window.minimumSize()
        window.setMinimumSize(
            min(least.width(), width - extra_w), min(least.height(), height - extra_h)
        )
        window.resize(width - extra_w, height - extra_h)
        window.move(x, y)
