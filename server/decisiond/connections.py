"""How uvicorn serves connections: bounds on header bytes and on the time to send them.

uvicorn bounds neither the size of a request's headers (with httptools) nor the time a client takes
to send them: a connection that sends nothing, or a header a byte at a time, is held as long as the
client likes. :class:`GuardedHttpToolsProtocol` is uvicorn's httptools protocol with both bounds:

- headers (request line included) over ``max_header_bytes`` get ``431 Request Header Fields Too
  Large`` (RFC 6585 §5) and the connection is closed;
- a new connection whose first request's headers are not complete ``header_timeout_s`` after it
  opened, or a later request whose headers are not complete ``header_timeout_s`` after its first
  byte, gets ``408 Request Timeout`` (RFC 9110 §15.5.9) and is closed. An idle kept-alive
  connection is closed by uvicorn's ``timeout_keep_alive``, silently, as HTTP/1.1 expects.

The time to send the body is bounded by :class:`decisiond.limits.BodyTimeoutMiddleware`, idle
keep-alive connections by uvicorn's own ``timeout_keep_alive``. :func:`server_options` gives the
``uvicorn.Config`` arguments for a :class:`~decisiond.config.Settings`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .config import Settings


def _close_with(transport: asyncio.Transport, status: int, reason: str, error_type: str, message: str) -> None:
    body = json.dumps({"detail": {"error_type": error_type, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    transport.write(head + body)
    transport.close()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header size bound and a header timeout (module docstring);
    :func:`guarded_protocol` makes one with the server's bounds."""

    max_header_bytes = 64 * 1024
    header_timeout_s = 10.0
    _header_bytes = 0
    _in_headers = False  # from a message's first byte to its last header
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def _await_headers(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_timed_out)

    def on_message_begin(self) -> None:
        self._in_headers, self._header_bytes = True, 0
        if self._header_timer is None:  # a later request on a kept-alive connection: from its first byte
            self._await_headers()
        super().on_message_begin()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        waiting = self._in_headers or self.cycle is None  # an idle kept-alive connection is uvicorn's to close
        if waiting and not self.transport.is_closing():
            message = f"the request headers did not arrive within {self.header_timeout_s:g} s"
            _close_with(self.transport, 408, "Request Timeout", "request_timeout", message)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_headers:  # counted per chunk: at most one chunk more than the headers themselves
            self._header_bytes += len(data)
        if self._in_headers and self._header_bytes > self.max_header_bytes and not self.transport.is_closing():
            message = f"the request headers are over the limit of {self.max_header_bytes} bytes"
            _close_with(self.transport, 431, "Request Header Fields Too Large", "request_too_large", message)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._cancel_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)


def guarded_protocol(max_header_bytes: int, header_timeout_s: float) -> type[HttpToolsProtocol]:
    """A :class:`GuardedHttpToolsProtocol` with these bounds (uvicorn's ``http=`` takes a class)."""
    bounds = {"max_header_bytes": max_header_bytes, "header_timeout_s": header_timeout_s}
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), bounds)


def server_options(settings: Settings) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments that bound connections for ``settings``: the guarded protocol
    and the idle keep-alive timeout (``--keep-alive-timeout-s``)."""
    return {
        "http": guarded_protocol(settings.max_header_bytes, settings.header_timeout_s),
        "timeout_keep_alive": settings.keep_alive_timeout_s,
    }
