"""Slow and oversized clients are cut off (issue 14, item 10): a bound on header bytes, on the time
to send the headers, and on the time to send the body, each with its flag."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from decisiond.app import create_app
from decisiond.connections import server_options
from decisiond.inprocess import BackgroundServer

from .reliability_support import fake_service, settings


@contextmanager
def _served(**overrides: float) -> Iterator[BackgroundServer]:
    app_settings = settings(**overrides)
    app = create_app(app_settings, service=fake_service(app_settings))
    with BackgroundServer(app, options=server_options(app_settings)) as server:
        yield server


def _read_all(sock: socket.socket, timeout_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took."""
    sock.settimeout(timeout_s)
    began, chunks = time.monotonic(), []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (TimeoutError, ConnectionResetError):
        pass
    return b"".join(chunks), time.monotonic() - began


def test_a_connection_that_sends_no_headers_is_closed_after_the_header_timeout() -> None:
    """Bug: a connection that sent nothing, or headers a byte at a time, was held as long as the
    client liked (600 slow connections were held for 75 s)."""
    with _served(header_timeout_s=0.5) as server:
        silent = socket.create_connection((server.host, server.port))
        partial = socket.create_connection((server.host, server.port))
        partial.sendall(b"POST /v1/systemone HTTP/1.1\r\nhost: x\r\n")
        for sock in (silent, partial):
            answer, waited = _read_all(sock, 10)
            sock.close()
            assert waited < 5, "the connection was held past the header timeout"
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408")


def test_headers_over_the_limit_are_refused() -> None:
    """Bug: a 40 MiB header was accepted."""
    with _served(max_header_bytes=16_384) as server:
        sock = socket.create_connection((server.host, server.port))
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 200_000 + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer, _ = _read_all(sock, 10)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
        ok = socket.create_connection((server.host, server.port))
        ok.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-small: " + b"a" * 8000 + b"\r\n\r\n")
        answer, _ = _read_all(ok, 10)
        ok.close()
        assert answer.startswith(b"HTTP/1.1 200")


def test_a_body_sent_too_slowly_is_answered_408() -> None:
    """Bug: a client could send its body a byte at a time and hold a request (and its memory) open."""
    with _served(body_timeout_s=0.5) as server:
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")
        sock.sendall(b'content-length: 1000\r\n\r\n{"state": ')
        answer, waited = _read_all(sock, 10)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert b'"request_timeout"' in answer and waited < 5


def test_a_body_left_unread_is_not_counted_as_the_next_requests_headers() -> None:
    """Bug (found by the soak): after an early answer (413 for a declared length over the limit), the
    unread rest of that body was counted as the next request's headers on the same connection, so a
    valid request got 431."""
    with _served(max_header_bytes=16_384, max_body_bytes=4096) as server:
        sock = socket.create_connection((server.host, server.port))
        head = b"POST /v1/systemone HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        sock.sendall(head + b"content-length: 100000\r\n\r\n" + b" " * 1000)
        sock.settimeout(10)
        first = sock.recv(65536)  # the 413 comes before the rest of the body is sent
        assert first.startswith(b"HTTP/1.1 413"), first[:80]
        try:
            sock.sendall(b" " * 99_000 + b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer, _ = _read_all(sock, 10)
        sock.close()
        assert b"HTTP/1.1 431" not in answer
        assert answer == b"" or answer.startswith(b"HTTP/1.1 200"), answer[:80]  # answered, or closed after the 413


def test_an_idle_kept_alive_connection_gets_no_unsolicited_408() -> None:
    """Bug (found by the soak): the header timer was re-armed when a response completed, so a
    kept-alive connection idle for longer than --header-timeout-s got an unsolicited 408 and a close,
    which a client sending its next request at that moment read as the answer (or a read error)."""
    with _served(header_timeout_s=0.5) as server:
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(1.5)  # idle past the header timeout, within uvicorn's 5 s keep-alive
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        answer, _ = _read_all(sock, 10)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
