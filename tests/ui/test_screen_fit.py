"""Where the window opens: from the screen's free area, never off its edge."""

import pytest

from attn_explorer.ui.common import screen_fit
from attn_explorer.ui.common.screen_fit import default_geometry, fits, minimum_size


def test_a_corrupt_saved_frame_is_ignored(qapp):
    for saved in (None, "1,2,3,4", [1, 2, 3], ["a", 0, 0, 0], [0, 0, 10**30, 5]):
        assert not screen_fit.saved_frame_fits(saved)
    assert screen_fit.saved_frame_fits(["0", "0", "1280", "720"])  # an ini file's strings


def test_a_laptop_or_projector_screen_gets_its_whole_free_area():
    assert default_geometry((0, 0, 1280, 720)) == (0, 0, 1280, 720)
    assert default_geometry((0, 27, 1366, 741)) == (0, 27, 1366, 741)  # below a top panel


def test_a_big_screen_gets_a_centred_window_of_the_preferred_size():
    assert default_geometry((0, 0, 1920, 1080)) == (160, 40, 1600, 1000)
    assert default_geometry((1920, 0, 2560, 1440)) == (1920 + 480, 220, 1600, 1000)


def test_the_minimum_never_exceeds_the_screen():
    assert minimum_size((0, 0, 1920, 1080)) == (1000, 650)
    assert minimum_size((0, 0, 900, 600)) == (900, 600)


def test_a_saved_window_fits_only_inside_the_free_area_and_above_the_minimum():
    screen = (0, 0, 1280, 720)
    assert fits((0, 0, 1280, 720), screen)
    assert not fits((0, 0, 1600, 1000), screen)  # saved on a bigger screen
    assert not fits((1300, 0, 1000, 700), screen)  # on a screen that is gone
    assert not fits((0, 0, 400, 300), screen)  # smaller than the usable minimum


def test_the_window_opens_inside_the_test_screen(qtbot):
    from attn_explorer.ui.window.main_window import MainWindow

    window = MainWindow(defer_plots=False)
    qtbot.addWidget(window)
    window.files.ask_before_discard = False
    window.show()
    qtbot.waitExposed(window)
    free = window.screen().availableGeometry()
    assert free.contains(window.frameGeometry())
    assert (window.width(), window.height()) == (1600, 1000)  # the 1920 × 1080 test screen
    assert window.minimumWidth() == 1000 and window.minimumHeight() == 650


@pytest.mark.slow
def test_a_size_saved_on_a_bigger_screen_is_not_restored(qtbot):
    from PySide6.QtCore import QRect

    from attn_explorer.ui.window.main_window import MainWindow

    first = MainWindow(defer_plots=False)
    qtbot.addWidget(first)
    first.files.ask_before_discard = False
    first.setGeometry(QRect(0, 0, 1800, 1050))
    first.save_settings()
    second = MainWindow(defer_plots=False)
    qtbot.addWidget(second)
    second.files.ask_before_discard = False
    assert (second.width(), second.height()) == (1800, 1050)  # fits this screen: kept

    first.save_settings()
    from attn_explorer.ui.common.settings import settings

    settings().setValue("frame", [600, 400, 1900, 1070])  # saved on a bigger screen
    settings().sync()
    third = MainWindow(defer_plots=False)
    qtbot.addWidget(third)
    third.files.ask_before_discard = False
    assert screen_fit.fits(
        (third.x(), third.y(), third.width(), third.height()), (0, 0, 1920, 1080)
    )
    assert (third.width(), third.height()) == (1600, 1000)
