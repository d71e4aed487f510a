"""``scripts/serve.sh`` and ``scripts/test.sh`` with ``scripts/_env.sh``, run by bash against a fake
``.venv`` whose ``pip`` and ``decisiond`` only write down how they were called.

The fake python forwards to this test's interpreter (which has torch), so the torch step is skipped
and nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _fake_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("_env.sh", "serve.sh", "test.sh"):
        shutil.copy2(ROOT / "scripts" / name, repo / "scripts" / name)
    shutil.copy2(ROOT / "pyproject.toml", repo / "pyproject.toml")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = repo / "calls.log"
    scripts = {
        "python": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',
        "pip": f'#!/bin/sh\necho "pip $*" >> "{calls}"\n',
        "decisiond": f'#!/bin/sh\necho "decisiond $*" >> "{calls}"\n',
        "activate": f'PATH="{bin_dir}:$PATH"; export PATH\n',
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    return repo


def _run(repo: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")}
    done = subprocess.run(
        ["bash", str(repo / "scripts" / script), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _calls(repo: Path) -> list[str]:
    log = repo / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None, reason="needs bash")
def test_serve_sh_passes_its_arguments_to_decisiond_and_installs_once(tmp_path: Path) -> None:
    """Regression: _env.sh read serve.sh's arguments as the extras, so `serve.sh --port 9000` ran
    `pip install -e '.[--port]'` and failed; and every run re-installed everything."""
    repo = _fake_repo(tmp_path)
    first = _run(repo, "serve.sh", "--port", "9000", "--model", "smollm2-135m")
    calls = _calls(repo)
    assert calls[-1] == "decisiond serve --port 9000 --model smollm2-135m"
    installs = [c for c in calls if c.startswith("pip install")]
    assert any(c.endswith("--editable .") for c in installs), installs
    assert not any("[" in c for c in installs), installs
    assert "==> 2/3" in first.stdout and "MB" in first.stdout  # each step says what it installs and its size

    second = _run(repo, "serve.sh", "--port", "9001")
    assert [c for c in _calls(repo) if c.startswith("pip")] == installs  # nothing changed: no install
    assert "up to date" in second.stdout
    assert _calls(repo)[-1] == "decisiond serve --port 9001"


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None, reason="needs bash")
def test_test_extras_install_once_serve_reuses_them_and_a_changed_pyproject_reinstalls(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path)
    done = _run(repo, "test.sh", "--version")  # python -m pytest --version
    assert "pytest" in done.stdout + done.stderr
    installs = [c for c in _calls(repo) if c.startswith("pip install")]
    assert any(c.endswith("--editable .[test]") for c in installs), installs

    _run(repo, "test.sh", "--version")
    _run(repo, "serve.sh")  # the test install holds everything serve needs
    assert [c for c in _calls(repo) if c.startswith("pip install")] == installs

    with (repo / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write("\n# a changed dependency\n")
    _run(repo, "serve.sh")
    again = [c for c in _calls(repo) if c.startswith("pip install")]
    assert len(again) > len(installs) and again[-2].endswith("--editable .")
