"""``decisiond serve --replay``: answer recorded requests from cassettes, byte for byte.

:class:`ReplayMiddleware` sits inside the app's request-id and body-limit middlewares. For
``POST /v1/systemone`` it reads the body, computes its request key
(:func:`~decisiond.cassette.request_key`) and, when a cassette holds that key, sends the recorded
status, content type and body unchanged (the upstream's model name included; only the answers are
put in the new request's order when its questions come in another order than recorded). An unrecorded
request gets, in ``strict`` mode, a 404 ``not_found_error`` naming the cassettes and the key; in
``fallback`` mode it goes on to the local model. A body the wire refuses goes on to the app, which
answers its usual 422 or 400 (in strict mode with no model, the same 422 is answered here). The
request limits (questions, options, levels, depth, empty ids) are applied before the cassette is
consulted, so a replay refuses what the server would refuse.

``GET /v1/models`` answers the recorded model list when a cassette holds one; otherwise strict
mode lists the models the cassettes name, and fallback mode the local models. In strict mode
``GET /health`` is answered here too, since no model is loaded.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import authenticated
from .cassette import MODELS_KEY, MODELS_ROUTE, SYSTEMONE_ROUTE, Library, answers_in_order, key_of, parse_request
from .config import Settings
from .errors import DecisionError, NotFound
from .wire import check_request_limits


async def _send_bytes(
    send: Send, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
) -> None:
    raw = [(b"content-type", content_type.encode("latin-1")), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _send_json(send: Send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    await _send_bytes(send, status, "application/json", json.dumps(body).encode("utf-8"), headers)


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole request body, and the messages read, to hand on to the app unchanged."""
    chunks: list[bytes] = []
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks), messages


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """A receive that first hands back ``messages``, then the client's own."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class ReplayMiddleware:
    """Answers recorded requests from a :class:`~decisiond.cassette.Library` (see the module docstring).

    Args:
        app (ASGIApp): the decisiond app.
        library (Library): the loaded cassettes.
        mode (str): ``strict`` (misses are 404) or ``fallback`` (misses go to the local model).
        keys (bool, optional): API keys are configured (:mod:`decisiond.auth` checks them in front);
            then ``/health`` shows its detail to key holders only. Defaults to False.
        settings (Settings, optional): the request limits, applied before the cassette is consulted,
            as the server applies them before a model. Defaults to ``Settings()``.
    """

    def __init__(
        self, app: ASGIApp, library: Library, mode: str, keys: bool = False, settings: Settings | None = None
    ) -> None:
        if mode not in ("strict", "fallback"):
            raise ValueError(f"replay mode must be strict or fallback, got {mode!r}")
        self.app = app
        self.library = library
        self.mode = mode
        self.keys = keys
        self.settings = settings or Settings()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope.get("path"), scope.get("method")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif path == SYSTEMONE_ROUTE and method == "POST":
            await self._decide(scope, receive, send)
        elif path == MODELS_ROUTE and method == "GET":
            await self._models(scope, receive, send)
        elif path == "/health" and method == "GET" and self.mode == "strict":
            body: dict[str, Any] = {"status": "ok"}
            if not self.keys or authenticated(scope):  # with keys, only a key holder sees the cassettes
                body |= {"mode": "replay", "cassettes": [str(p) for p in self.library.paths]}
                body["entries"] = len(self.library.entries)
            await _send_json(send, 200, body)
        else:
            await self.app(scope, receive, send)

    async def _decide(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body, messages = await _read_body(receive)
        except DecisionError as exc:  # the body limit, raised while reading
            await _send_json(send, exc.status, exc.body(), exc.headers)
            return
        try:
            request = parse_request(body)
        except ValidationError as exc:
            if self.mode == "strict":
                await _send_json(send, 422, {"detail": _validation_detail(exc)})
            else:
                await self.app(scope, _replaying(messages, receive), send)
            return
        try:
            check_request_limits(request, self.settings)
        except DecisionError as exc:  # the same 400 or 422 the server answers before any model
            await _send_json(send, exc.status, exc.body(), exc.headers)
            return
        key = key_of(request)
        entry = self.library.find(key)
        if entry is not None:
            recorded = entry.response
            content = recorded.body.encode("utf-8")
            if recorded.status == 200:  # recorded in one question order, asked in another: answer in this one
                content = answers_in_order(recorded.body, list(request.questions))
            await _send_bytes(send, recorded.status, recorded.content_type, content, recorded.headers())
        elif self.mode == "fallback":
            await self.app(scope, _replaying(messages, receive), send)
        else:
            miss = NotFound(
                f"no recorded answer for request key {key} in {self.library.describe()}; record it with "
                "`decisiond record`, or serve with --replay-mode fallback to let the local model answer"
            )
            await _send_json(send, miss.status, miss.body())

    async def _models(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = self.library.find(MODELS_KEY)
        if entry is not None:
            recorded = entry.response
            await _send_bytes(
                send, recorded.status, recorded.content_type, recorded.body.encode("utf-8"), recorded.headers()
            )
        elif self.mode == "fallback":
            await self.app(scope, receive, send)
        else:
            cards = [
                {"name": name, "description": f"replayed from {self.library.describe()}", "release_date": "2026-01-01"}
                for name in self.library.upstream_models()
            ]
            await _send_json(send, 200, {"models": cards})


def _validation_detail(exc: ValidationError) -> list[dict[str, Any]]:
    """pydantic's errors in FastAPI's 422 shape, without ``input`` (never echo the state)."""
    return [
        {"loc": ["body", *e.get("loc", ())], "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
    ]
