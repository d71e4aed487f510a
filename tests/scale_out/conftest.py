"""A local Ray instance with Serve on a free loopback port, shared by the Ray tests of one session.

Ray is told the machine has 2 CPUs; model replicas ask for a fraction of one, so several replicas
(and several models) fit at once. Every test deploys its own application under its own name and
route prefix and deletes it after. Ray's logs go to a scratch folder the tests read (the
marker-never-in-logs check). Ray is shut down at the end of the session.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

#: ray_actor_options of every model replica in these tests: a quarter of a CPU, so 2 CPUs hold 8.
REPLICA = {"num_cpus": 0.25}


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RayServe:
    """The session's Ray instance: its HTTP root and its log folder."""

    url: str
    logs: Path

    def deploy(self, app: Any, name: str) -> str:
        """Run ``app`` as application ``name`` at ``/name``; returns its base URL once it is ready."""
        from ray import serve

        serve.run(app, name=name, route_prefix=f"/{name}")
        return f"{self.url}/{name}"

    def delete(self, name: str) -> None:
        """Remove application ``name`` and wait until it is gone."""
        from ray import serve

        serve.delete(name, _blocking=True)

    def log_text(self) -> str:
        """Everything Ray and its workers have logged so far (every file of the session's log folder)."""
        parts = []
        for path in sorted(self.logs.rglob("*")):
            if path.is_file():
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
        return "\n".join(parts)


@pytest.fixture(scope="session")
def ray_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayServe]:
    """Ray on this machine (2 CPUs, no dashboard) with Serve's proxy on a free loopback port."""
    ray = pytest.importorskip("ray", reason="the Ray tests need the `ray` extra: pip install -e '.[test,ray]'")
    from ray import serve

    temp = Path("/tmp") / f"ray-decisiond-{free_port()}"  # Ray's socket paths must stay short
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(temp), logging_level="WARNING")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        yield RayServe(f"http://127.0.0.1:{port}", temp / "session_latest" / "logs")
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture
def deployed(ray_serve: RayServe) -> Iterator[Callable[[Any, str], str]]:
    """``deployed(app, name)`` runs an application for one test; every one is deleted after it."""
    names: list[str] = []

    def run(app: Any, name: str) -> str:
        names.append(name)
        return ray_serve.deploy(app, name)

    yield run
    for name in names:
        ray_serve.delete(name)


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` every 0.2 s until it is true.

    Raises:
        AssertionError: naming ``what`` after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def post(url: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    """POST ``body`` to ``url/v1/systemone``."""
    return httpx.post(f"{url}/v1/systemone", json=body, timeout=60, **kwargs)
