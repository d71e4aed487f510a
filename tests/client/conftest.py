"""Fixtures of the client tests: decisiond apps on the fake backend (exact numbers) and on the real
default model, in-process and over loopback, and a scripted HTTP server for retries."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from fastapi import FastAPI  # noqa: E402

from decisiond.app import create_app  # noqa: E402
from decisiond.backends.fake import FakeBackend  # noqa: E402
from decisiond.config import Settings  # noqa: E402
from decisiond.manifest import Manifest, Weights, find_manifest  # noqa: E402
from decisiond.service import ServedModel, Service, load_model, start_engine  # noqa: E402

MODELS = Path(__file__).resolve().parents[2] / "models"


def _fake_service() -> Service:
    """A service over one FakeBackend named ``fake-1`` (alias ``fake``)."""
    settings = Settings(max_wait_ms=0)
    manifest = Manifest(
        name="fake-1",
        aliases=["fake"],
        backend="fake",
        weights=Weights(path="."),
        description="keyword counts",
        release_date="2026-01-01",
    )
    backend = FakeBackend()
    return Service([ServedModel(manifest, backend, start_engine(backend, settings))], settings)


@pytest.fixture
def fake_service() -> Iterator[Service]:
    """A service over one FakeBackend named ``fake-1`` (alias ``fake``), closed after the test."""
    service = _fake_service()
    yield service
    service.close()


@pytest.fixture
def fake_app(fake_service: Service) -> FastAPI:
    """The real app serving the fake backend (exact, hand-computable numbers)."""
    return create_app(fake_service.settings, service=fake_service)


@pytest.fixture(scope="session")
def client_minilm_service() -> Iterator[Service]:
    """The real default model (all-MiniLM-L6-v2), loaded once for the client tests."""
    settings = Settings(max_wait_ms=0, models_dir=MODELS)
    service = Service([load_model(find_manifest("minilm-l6", MODELS), settings)], settings)
    yield service
    service.close()


@pytest.fixture
def loopback_url(fake_app: FastAPI) -> Iterator[str]:
    """The fake app served by uvicorn on a free loopback port, in a thread."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(fake_app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@dataclass
class Scripted:
    """A local HTTP server answering from a script: each request takes the next ``(status, headers,
    body)``; the last entry repeats. ``seen`` records ``(method, path, headers, body)`` per request."""

    script: list[tuple[int, dict[str, str], Any]]
    url: str = ""
    seen: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)


@pytest.fixture
def scripted() -> Iterator[Callable[[list[tuple[int, dict[str, str], Any]]], Scripted]]:
    """Start scripted servers on free loopback ports; all stop at the end of the test."""
    servers: list[ThreadingHTTPServer] = []

    def start(script: list[tuple[int, dict[str, str], Any]]) -> Scripted:
        state = Scripted(script)

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                state.seen.append(
                    (
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw) if raw else None,
                    )
                )
                status, headers, body = state.script[min(len(state.seen), len(state.script)) - 1]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
