"""SIGTERM answers every request it holds and exits 0, whatever the timing (issue 14, item 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from .reliability_support import VALID
from .test_cli_serve import _free_port, _start


@pytest.mark.slow
def test_sigterm_past_the_shutdown_timeout_answers_every_held_request_and_exits_0(tmp_path: Path) -> None:
    """Bug: with work running past --shutdown-timeout-s, uvicorn cancelled the request tasks (plain-text
    500s) and the process aborted (exit 134) while the model thread was still inside torch."""
    process, url = _start(tmp_path, delay_ms=6000, extra=["--shutdown-timeout-s", "1", "--max-wait-ms", "0"])
    responses: list[httpx.Response | Exception] = []

    def post() -> None:
        try:
            responses.append(httpx.post(f"{url}/v1/systemone", json=VALID, timeout=30))
        except httpx.HTTPError as exc:
            responses.append(exc)

    workers = [threading.Thread(target=post) for _ in range(4)]
    for worker in workers:
        worker.start()
        time.sleep(0.1)
    time.sleep(0.5)  # one request is inside the 6 s forward pass, three are queued
    process.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.join(30)
    output = process.communicate(timeout=30)[0].decode()
    assert len(responses) == 4
    for response in responses:
        assert isinstance(response, httpx.Response), f"{response!r}\n{output[-2000:]}"
        assert response.status_code == 503, output[-2000:]
        assert response.headers["retry-after"] and response.json()["detail"]["error_type"] == "overloaded_error"
    assert process.returncode == 0, output[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.3, 1.5, 3.0])
def test_sigterm_during_start_up_exits_0(tmp_path: Path, after_s: float) -> None:
    """Bug: a SIGTERM while the server was still starting (importing torch, loading a model) killed
    the process by the signal or left it to abort, instead of a clean exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")} | {"HF_HUB_OFFLINE": "1"}
    models = Path(__file__).resolve().parent.parent / "models"
    command = [sys.executable, "-m", "decisiond", "serve", "--models-dir", str(models), "--port", str(_free_port())]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(after_s)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output[-3000:]
