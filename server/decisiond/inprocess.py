"""Serve an ASGI app on a free loopback port from a background thread (uvicorn).

Used by the pytest plugin to run decisiond inside a test session, and by tests to run a fake
upstream and the recording proxy. The socket is bound before the thread starts, so the port is
known at once and never raced for.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any


class BackgroundServer:
    """One uvicorn server on ``host:port`` (port 0: a free one) in a daemon thread.

    Args:
        app (Any): the ASGI app.
        host (str, optional): address to bind. Defaults to 127.0.0.1.
        port (int, optional): port to bind; 0 picks a free one. Defaults to 0.
        options (dict, optional): more ``uvicorn.Config`` arguments, e.g.
            :func:`decisiond.connections.server_options`. Defaults to none.

    Example:
        >>> with BackgroundServer(app) as server:  # doctest: +SKIP
        ...     httpx.get(server.base_url + "/health")
    """

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, options: dict[str, Any] | None = None
    ) -> None:
        import uvicorn

        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host, self.port = self.socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", **(options or {}))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name=f"decisiond-server-{self.port}", daemon=True)

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        self.server.run(sockets=[self.socket])

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        """Start the thread and wait until uvicorn accepts connections.

        Raises:
            RuntimeError: the server did not start within ``timeout_s`` seconds (its app failed to start).
        """
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server on {self.base_url} did not start; see the log above")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask uvicorn to exit, wait for the thread, and close the socket."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        self.socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
