"""Request bodies before the app reads them: compressed and multipart bodies.

The size limit on the body as received is :class:`decisiond.limits.BodyLimitMiddleware`, outside
this one. :class:`BodyDecodingMiddleware` undoes a ``Content-Encoding`` (zstd, gzip, deflate; anything
  else 415; the decoded size capped by the same limit, 413; :mod:`decisiond.compression`) and turns
  a ``multipart/form-data`` upload into the JSON body it stands for (:mod:`decisiond.uploads`), so
  the routes, the replay and every check downstream see one JSON body. A plain JSON body passes
  through untouched, at no cost.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import compression, uploads
from .errors import DecisionError
from .handlers import error_response


async def read_body(receive: Receive) -> bytes:
    """The whole request body (a disconnect ends it early)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class BodyDecodingMiddleware:
    """Decode compressed and multipart request bodies into plain JSON (see the module docstring).

    Args:
        app (ASGIApp): the app inside.
        max_bytes (int): the most bytes a decoded body may hold (``--max-body-bytes``).
        max_parts (int): the most parts of a multipart body (the request and ``--max-images`` images).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, max_parts: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_parts = max_parts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        encoding = headers.get(b"content-encoding", b"").decode("latin-1")
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        multipart = uploads.is_multipart(content_type)
        try:
            applied = compression.encodings(encoding)
            if not applied and not multipart:
                await self.app(scope, receive, send)
                return
            raw = await read_body(receive)  # the limit above counts the bytes as received
            body = await run_in_threadpool(self._decode, raw, applied, content_type if multipart else None)
        except DecisionError as exc:
            await error_response(exc)(scope, receive, send)
            return
        kept = [(k, v) for k, v in scope.get("headers") or [] if k not in (b"content-encoding", b"content-length")]
        if multipart:
            kept = [(k, v) for k, v in kept if k != b"content-type"] + [(b"content-type", b"application/json")]
        scope["headers"] = [*kept, (b"content-length", str(len(body)).encode())]  # in place: outer layers read it
        await self.app(scope, _once(body, receive), send)

    def _decode(self, raw: bytes, applied: list[str], multipart_type: str | None) -> bytes:
        return decode_body(raw, applied, multipart_type, max_bytes=self.max_bytes, max_parts=self.max_parts)


def decode_body(raw: bytes, applied: list[str], multipart_type: str | None, *, max_bytes: int, max_parts: int) -> bytes:
    """A body as received → the JSON body it stands for: every encoding of ``applied`` undone, then a
    multipart upload (``multipart_type``, its ``Content-Type``; None when it is not one) turned
    into JSON. Runs on a worker thread.

    Raises:
        RequestTooLarge: decoded, the body is over ``max_bytes`` (413).
        ApiUsageError: a malformed compressed or multipart body, or unclaimed or missing parts (400).
    """
    body = compression.decode(raw, applied, max_bytes)
    if multipart_type is not None:
        body = uploads.to_json_body(body, multipart_type, max_parts)
    return body


def _once(body: bytes, receive: Receive) -> Receive:
    """A receive that hands over ``body`` as one message, then the client's own (for disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
