"""The package an application installs: ``python -m build`` makes a wheel and an sdist that
``twine check`` accepts, and the wheel works from a fresh virtual environment.

The fresh venv gets the wheel with ``pip install --no-deps`` and borrows its dependencies (torch,
transformers, pytest, ...) from this test's environment through a ``.pth`` line, so nothing is
downloaded again. Its own site-packages comes first on ``sys.path``, so ``decisiond`` is imported
from the installed wheel, not from ``server/`` (a ``.pth`` path line does not run the editable
install's finder); the test asserts that. What the wheel declares as dependencies is checked
against ``pyproject.toml``, not by a fresh resolve.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "server" / "decisiond"
pytestmark = pytest.mark.slow


def _run(*command: str | Path, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DECISIOND_", "PYTHONPATH"))}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, ROOT, timeout=600)
    return out


@pytest.fixture(scope="module")
def fresh(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the built wheel; its dependencies come from this environment."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    (wheel,) = dist.glob("*.whl")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel)
    own = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(own) / "borrowed-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    return venv


def test_build_makes_a_wheel_and_an_sdist_that_twine_accepts(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"], files
    _run(sys.executable, "-m", "twine", "check", "--strict", *files)


def test_the_wheel_holds_every_file_of_the_package_and_declares_its_dependencies(dist: Path) -> None:
    """Package data (py.typed, static files) must reach the wheel, or the installed package breaks."""
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    ours = {
        f"decisiond/{path.relative_to(PACKAGE).as_posix()}"
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert ours - names == set()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # Compared as parsed requirements: the wheel writes markers in its own normal form (double quotes).
    declared = {
        str(Requirement(line.removeprefix("Requires-Dist: ")))
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ")
    }
    for requirement in pyproject["dependencies"]:
        assert str(Requirement(requirement)) in declared
    assert "decisiond = decisiond.entry:main" in entry_points and "decisiond = decisiond.pytest_plugin" in entry_points
    with tarfile.open(next(dist.glob("*.tar.gz"))) as sdist:
        assert any(name.endswith("/server/decisiond/py.typed") for name in sdist.getnames())


def test_the_console_script_runs_from_the_installed_wheel(fresh: Path, tmp_path: Path) -> None:
    where = _run(fresh / "bin" / "python", "-c", "import decisiond; print(decisiond.__file__)").stdout
    assert where.startswith(str(fresh)), where  # the wheel's copy, not server/
    version = _run(fresh / "bin" / "decisiond", "--version").stdout
    assert version.strip() == "decisiond 0.1.0"
    # From an empty folder (no models/ here): the manifests shipped in the package are known, and the
    # default model's weights are found.
    listed = _run(fresh / "bin" / "decisiond", "models", cwd=tmp_path).stdout
    rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
    assert set(rows) == {"minilm-l6", "qwen2.5-1.5b", "smollm2-135m"}, listed
    assert "(missing)" not in rows["minilm-l6"]
    # The quality model is one pull away from any folder: without its weights, serve says so.
    env = {**os.environ, "DECISIOND_CACHE_DIR": str(tmp_path / "cache")}
    refused = subprocess.run(
        [fresh / "bin" / "decisiond", "serve", "--model", "qwen2.5-1.5b", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "run `decisiond pull qwen2.5-1.5b`" in refused.stderr, refused.stderr


def test_the_client_imports_without_torch(fresh: Path) -> None:
    blocked = "import sys; sys.modules['torch'] = sys.modules['transformers'] = None\n"
    code = blocked + "import decisiond.client as c; c.Noul('Is it urgent?', yes='a deadline'); print(c.__file__)"
    assert _run(fresh / "bin" / "python", "-c", code).stdout.startswith(str(fresh))


def test_the_pytest_plugin_and_client_run_an_applications_suite(fresh: Path, tmp_path: Path) -> None:
    """The example application's scripted tests, as its developers run them, on the installed wheel."""
    app = tmp_path / "ticket_router"
    shutil.copytree(ROOT / "examples" / "ticket_router", app)
    markers = _run(fresh / "bin" / "python", "-m", "pytest", "--markers", cwd=app).stdout
    assert "@pytest.mark.decisiond(replay=None" in markers
    done = _run(fresh / "bin" / "python", "-m", "pytest", "-q", "tests/test_router_scripted.py", cwd=app)
    assert " passed" in done.stdout and "failed" not in done.stdout
