"""``decisiond serve``: graceful SIGTERM in a real process, the dead-thread watch, the bind warning."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from decisiond import cli

from .reliability_support import VALID, settings

MANIFEST = """
name = "fake-slow"
backend = "fake"
delay_ms = {delay}
[weights]
path = "."
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(tmp_path: Path, *, delay_ms: int, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    models = tmp_path / "models"
    models.mkdir()
    (models / "fake-slow.toml").write_text(MANIFEST.format(delay=delay_ms), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")} | {"HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable,
        "-m",
        "decisiond.cli",
        "serve",
        "--models-dir",
        str(models),
        "--model",
        "fake-slow",
        "--port",
        str(port),
        *extra,
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/health", timeout=1).json().get("status") == "ok":
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"the server did not start: {process.communicate()[0].decode()[-2000:]}")


@pytest.mark.slow
def test_sigterm_finishes_in_flight_requests_and_exits_0(tmp_path: Path) -> None:
    process, url = _start(tmp_path, delay_ms=1500, extra=["--shutdown-timeout-s", "20"])
    results: dict[str, Any] = {}

    def in_flight() -> None:
        results["response"] = httpx.post(f"{url}/v1/systemone", json=VALID, timeout=30)

    worker = threading.Thread(target=in_flight)
    worker.start()
    time.sleep(0.5)  # the request is now inside the 1.5 s forward pass
    process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        late = httpx.post(f"{url}/v1/systemone", json=VALID, timeout=5).status_code
    except httpx.TransportError:
        late = "refused"
    worker.join(30)
    output = process.communicate(timeout=30)[0].decode()
    assert results["response"].status_code == 200, output[-2000:]
    assert results["response"].json()["answers"]["team"]["choice"] == "billing"
    assert late in (503, "refused")
    assert process.returncode == 0, output[-2000:]
    assert '"route": "/v1/systemone"' in output and '"status": 200' in output  # the JSON access line


@pytest.mark.slow
def test_a_bad_keys_file_stops_the_server_before_it_binds(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")}
    done = subprocess.run(
        [sys.executable, "-m", "decisiond.cli", "serve", "--api-keys-file", str(tmp_path / "none"), "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "cannot read the API keys file" in done.stderr


class _Runtime:
    def __init__(self, statuses: list[str]) -> None:
        self.statuses = statuses
        self.error = None

    def health(self) -> tuple[str, int]:
        return (self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]), 200

    def dead_models(self) -> list[str]:
        return ["fake-model"]


def test_the_watch_stops_the_server_when_a_model_thread_dies(caplog: pytest.LogCaptureFixture) -> None:
    server = SimpleNamespace(should_exit=False, config=SimpleNamespace(port=8000))
    runtime: Any = _Runtime(["loading", "ok", "ok", "error"])
    with caplog.at_level(logging.INFO, logger="decisiond"):
        cli.watch(runtime, server, settings(), poll_s=0.001)
    assert server.should_exit is True
    assert any("ready on http://127.0.0.1:8000" in r.getMessage() for r in caplog.records)
    assert any("model thread of fake-model died" in r.getMessage() for r in caplog.records)


def test_loopback_hosts() -> None:
    assert cli.is_loopback("127.0.0.1") and cli.is_loopback("::1") and cli.is_loopback("localhost")
    assert not cli.is_loopback("0.0.0.0") and not cli.is_loopback("10.1.2.3") and not cli.is_loopback("example.com")


class _Stop(Exception):
    pass


def _serve_until_create_app(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> None:
    import decisiond.app

    def stop(*_: Any, **__: Any) -> None:
        raise _Stop

    monkeypatch.setattr(decisiond.app, "create_app", stop)
    monkeypatch.setattr(cli, "_resolve_manifests", lambda _: [])
    with pytest.raises(_Stop):
        cli.serve(settings(**overrides))


def test_binding_elsewhere_without_keys_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="decisiond"):
        _serve_until_create_app(monkeypatch, host="0.0.0.0")
        _serve_until_create_app(monkeypatch, host="0.0.0.0", api_keys="k1")
        _serve_until_create_app(monkeypatch, host="127.0.0.1")
    warnings = [r.getMessage() for r in caplog.records if "without API keys" in r.getMessage()]
    assert len(warnings) == 1 and "0.0.0.0" in warnings[0]


def test_serve_help_lists_the_reliability_flags() -> None:
    parser = cli.build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    text = serve.format_help()
    for flag in (
        "--api-keys-file",
        "--shutdown-timeout-s",
        "--max-options",
        "--max-json-depth",
        "--log-format",
        "--log-level",
        "--max-body-bytes",
        "--max-questions",
        "--max-levels",
        "--max-state-tokens",
        "--max-total-tokens",
    ):
        assert flag in text


@pytest.mark.slow
def test_the_thread_policy_is_on_health_and_in_the_start_up_line(tmp_path: Path) -> None:
    process, url = _start(tmp_path, delay_ms=0, extra=["--threads", "1"])
    try:
        chosen = httpx.get(f"{url}/health", timeout=5).json()["threads"]
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    assert chosen["intra_op"] == 1 and chosen["inter_op"] == 1 and chosen["source"] == "--threads"
    assert chosen["wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "spin 20000, then sleep")
    assert chosen["cpus"] >= 1
    assert "torch threads: 1 intra-op, 1 inter-op (--threads" in output
