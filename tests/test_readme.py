"""The README's first sections run as written: every command of their ``bash`` blocks is either run
here against a live ``decisiond serve`` of the default model (from the repository root, with this
environment's ``decisiond`` on PATH), or named below with the test that covers it.

The only rewrite is the port: the live server listens on a free port, not 8000. The first
request's answer is compared with the answer the README prints, so that block stays true too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from decisiond.client.codec import request_from_wire

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The sections a new user reads first, in order.
FIRST_SECTIONS = ("Two commands", "A first request", "The command line", "Installing decisiond in an application")
#: Commands checked elsewhere, by their start: (why not here, where instead).
COVERED_ELSEWHERE = {
    "./scripts/serve.sh": "tests/test_scripts.py runs serve.sh with its arguments against a fake .venv",
    "./scripts/test.sh": "this suite is what test.sh runs; tests/test_scripts.py checks its install step",
    "pip install": "tests/test_packaging.py installs the built wheel into a fresh venv; the other forms download",
    "python -m build": "tests/test_packaging.py builds the wheel and the sdist",
}
pytestmark = pytest.mark.slow


def section(title: str) -> str:
    """The text of the README section ``## title`` (up to the next ``## ``)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, flags=re.M | re.S)
    assert match, f"the README has no section {title!r}"
    return match.group(1)


def commands(block: str) -> list[str]:
    """The commands of a bash block: lines joined while a quote is open or a line ends with ``\\``."""
    found, pending = [], ""
    for line in block.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if not pending.strip() or pending.rstrip().endswith("\\"):
            continue
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open
            continue
        if words:
            found.append(pending.strip())
        pending = ""
    assert not pending.strip(), f"an unfinished command: {pending!r}"
    return found


def first_commands() -> list[tuple[str, str]]:
    """(section, command) for every command of the first sections' ``bash`` blocks."""
    return [
        (title, command)
        for title in FIRST_SECTIONS
        for block in re.findall(r"```bash\n(.*?)```", section(title), flags=re.S)
        for command in commands(block)
    ]


COMMANDS = first_commands()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this environment's decisiond
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """``decisiond serve`` of the default model on a free port, ready (``/ready`` is 200)."""
    port = _free_port()
    command = [sys.executable, "-m", "decisiond.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.communicate()[0].decode()[-2000:]
            time.sleep(0.2)
        else:
            raise AssertionError("the server was not ready within 120 s")
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _run(command: str, url: str) -> subprocess.CompletedProcess[str]:
    command = command.replace("http://127.0.0.1:8000", url)
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def _readme_answer() -> dict[str, Any]:
    block = re.search(r"```json\n(.*?)```", section("A first request"), flags=re.S)
    assert block
    answer: dict[str, Any] = json.loads(block.group(1))
    return answer


def _assert_close(got: Any, printed: Any, where: str = "") -> None:
    """The printed answer within 0.01 (it was measured on another CPU; winners are exact)."""
    if isinstance(printed, dict):
        assert set(got) == set(printed), where
        for key in printed:
            _assert_close(got[key], printed[key], f"{where}.{key}")
    elif isinstance(printed, float):
        assert got == pytest.approx(printed, abs=0.01), where
    else:
        assert got == printed, where


def test_every_first_command_is_checked() -> None:
    """A command added to the first sections must be run here or covered by a named test."""
    assert len(COMMANDS) >= 8
    for _, command in COMMANDS:
        assert command.startswith(("curl ", "decisiond ", ". .venv/bin/activate", *COVERED_ELSEWHERE)), command


@pytest.mark.parametrize(("title", "command"), COMMANDS, ids=[f"{t}: {c[:40]}" for t, c in COMMANDS])
def test_a_first_command_runs_as_written(title: str, command: str, server: str) -> None:
    covered = next((why for start, why in COVERED_ELSEWHERE.items() if command.startswith(start)), None)
    if covered:
        pytest.skip(covered)
    if command.startswith("curl ") and shutil.which("curl") is None:
        pytest.skip("curl is not installed here")
    if command.startswith(". .venv/bin/activate"):
        if not (ROOT / ".venv" / "bin" / "activate").is_file():
            pytest.skip("no .venv here (the suite runs from another environment)")
        done = _run(f"{command}\ncommand -v decisiond", server)
        assert done.stdout.strip().endswith(".venv/bin/decisiond")
        return
    done = _run(command, server)
    if "/v1/systemone" in command:
        got, printed = json.loads(done.stdout), _readme_answer()
        assert isinstance(got.pop("x_latency_ms"), float) and isinstance(printed.pop("x_latency_ms"), float)
        _assert_close(got, printed)
    elif command.endswith("/ready"):
        assert json.loads(done.stdout) == {"status": "ready", "models": ["minilm-l6"]}
    elif command == "decisiond --version":
        assert re.fullmatch(r"decisiond \d+\.\d+\.\d+\S*", done.stdout.strip())
    elif command == "decisiond models":
        assert "minilm-l6" in done.stdout and "smollm2-135m" in done.stdout
    elif command.startswith("decisiond ask"):
        assert "billing" in done.stdout and "technical" in done.stdout


def test_the_first_request_body_is_accepted_by_ask_and_the_client(server: str) -> None:
    """Regression: the README's first request (a noul describing one side) was refused by
    `decisiond ask --request` and by the Python client, though the wire allows it."""
    (curl,) = [c for t, c in COMMANDS if t == "A first request"]
    words = shlex.split(curl)
    body = json.loads(words[words.index("-d") + 1])
    _, request = request_from_wire(body)
    assert request.questions["is_urgent"].yes == "Names a deadline, or says now or today"
    done = subprocess.run(
        [sys.executable, "-m", "decisiond.cli", "ask", "--url", server, "--request", "-", "--json"],
        input=json.dumps(body),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    _assert_close(json.loads(done.stdout)["answers"], _readme_answer()["answers"])
