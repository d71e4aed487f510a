"""The HTTP app: routes, error mapping, request ids, body limits, and model loading at start.

:func:`create_app` builds a FastAPI app from :class:`~decisiond.config.Settings`. Given a ready
:class:`~decisiond.service.Service` (tests, the pytest plugin) it serves it at once; otherwise its
lifespan loads the configured models on a background thread while ``/health`` answers
``{"status": "loading"}``. Nothing loads a model at import.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .config import Settings
from .errors import DecisionError, Overloaded, RequestTooLarge
from .manifest import Manifest, find_manifest
from .service import Service, load_model
from .wire import DecisionRequest, DecisionResponse, ErrorBody, ModelList

log = logging.getLogger("decisiond.app")

REQUEST_ID = "x-request-id"
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "a semantic limit, an unknown model, unreadable media, too many tokens"},
    413: {"model": ErrorBody, "description": "the body is larger than the configured limit"},
    503: {"model": ErrorBody, "description": "loading, queue full, or shutting down; see Retry-After"},
}


@dataclass
class Runtime:
    """What the app serves: the service once loaded, and the load status."""

    settings: Settings
    service: Service | None = None
    status: str = "loading"
    error: str | None = None
    manifests: list[Manifest] = field(default_factory=list)

    def load(self) -> None:
        """Load every manifest (on a background thread); record success or the error."""
        try:
            models = [load_model(manifest, self.settings) for manifest in self.manifests]
            self.service = Service(models, self.settings)
            self.status = "ok"
        except Exception as exc:  # reported on /health and in the log; the CLI exits non-zero
            self.status = "error"
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("loading failed: %s", self.error, exc_info=True)


def get_runtime(request: Request) -> Runtime:
    """The app's runtime."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def get_service(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Service:
    """The ready service.

    Raises:
        Overloaded: the models are still loading, or failed to load.
    """
    if runtime.service is None:
        if runtime.status == "error":
            raise Overloaded("the model failed to load; see the server log", retry_after_s=30)
        raise Overloaded("the model is still loading; retry shortly", retry_after_s=2)
    return runtime.service


ServiceDep = Annotated[Service, Depends(get_service)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _error_response(exc: DecisionError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _decision_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DecisionError)
    return _error_response(exc)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 shape without ``input`` or ``ctx``, so no error body quotes the state or a key."""
    assert isinstance(exc, RequestValidationError)
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=422)


class RequestIdMiddleware:
    """Put ``x-request-id`` on every response (the caller's, else a new one) and turn any
    unhandled fault into a 500 ``internal_error`` JSON body without a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(REQUEST_ID.encode())
        request_id = sent.decode("latin-1")[:200] if sent else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), (REQUEST_ID.encode(), request_id.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.error("unhandled fault on %s %s", scope.get("method"), scope.get("path"), exc_info=True)
            if not started:
                body = json.dumps({"detail": {"error_type": "internal_error", "message": "internal server error"}})
                await send_with_id(
                    {"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": body.encode()})


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413 ``request_too_large``, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = RequestTooLarge(f"the request body is larger than the limit of {self.max_bytes} bytes")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _error_response(too_large)(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise too_large
            return message

        await self.app(scope, counting_receive, send)


def create_app(
    settings: Settings | None = None,
    *,
    service: Service | None = None,
    manifests: list[Manifest] | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings (Settings, optional): limits and what to serve. Defaults to ``Settings()``.
        service (Service, optional): serve these already-loaded models. Defaults to loading
            ``manifests`` (or ``settings.model`` from ``settings.models_dir``) at start; nothing is
            loaded when ``settings.replay`` is given in strict mode.
        manifests (list[Manifest], optional): what to load when no service is given.

    Returns:
        FastAPI: routes ``POST /v1/systemone``, ``GET /v1/models``, ``GET /health``.

    Raises:
        CassetteError: a ``settings.replay`` cassette is missing or has a corrupt line.
    """
    settings = settings or Settings()
    runtime = Runtime(settings, service=service, status="ok" if service or not settings.needs_model else "loading")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime.service is None and settings.needs_model:
            runtime.manifests = manifests or [find_manifest(name, settings.models_dir) for name in settings.model]
            threading.Thread(target=runtime.load, name="decisiond-loader", daemon=True).start()
        yield
        if runtime.service is not None:
            runtime.service.close()

    app = FastAPI(
        title="decisiond",
        version="0.1.0",
        summary="A local System One decision server",
        lifespan=lifespan,
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.runtime = runtime
    app.add_exception_handler(DecisionError, _decision_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    if settings.replay:  # innermost: replayed answers still get request ids and body limits
        from .cassette import Library
        from .replay import ReplayMiddleware

        app.add_middleware(ReplayMiddleware, library=Library.load(settings.replay), mode=settings.replay_mode)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    _add_routes(app)
    return app


def _add_routes(app: FastAPI) -> None:
    @app.post("/v1/systemone", response_model=DecisionResponse, responses=_ERRORS, tags=["decisions"], name="decide")
    async def decide(request: DecisionRequest, service: ServiceDep, http: Request) -> JSONResponse:
        """Answer typed questions about one state.

        Example: ``{"state": "I was charged twice.", "questions": {"refund": {"type": "noul",
        "instructions": "Does the customer ask for money back?"}}}`` →
        ``{"model": "minilm-l6", "answers": {"refund": {"type": "noul", "noul": 0.71}}, ...}``
        """
        decision = await service.decide(request, is_disconnected=http.is_disconnected)
        return JSONResponse(decision.body)

    @app.get("/v1/models", response_model=ModelList, tags=["models"], name="list_models")
    async def list_models(service: ServiceDep) -> dict[str, Any]:
        """The models this server serves: name, description, release date, aliases, backend, device."""
        return {"models": [served.card() for served in service.models]}

    @app.get("/health", tags=["operations"], name="health")
    async def health(runtime: RuntimeDep) -> JSONResponse:
        """``loading`` until the model is ready, then ``ok`` with the model, device and dtype."""
        if runtime.service is None:
            body: dict[str, Any] = {"status": runtime.status}
            if runtime.error:
                body["error"] = "the model failed to load; see the server log"
            return JSONResponse(body, status_code=200 if runtime.status == "loading" else 503)
        default = runtime.service.default
        info = default.backend.info()
        return JSONResponse(
            {
                "status": "ok",
                "model": default.name,
                "device": info.device,
                "dtype": info.dtype,
                "models": [
                    {
                        "name": served.name,
                        "backend": served.backend.family,
                        "queue_depth": served.engine.queue_depth(),
                        "mean_batch_size": round(served.engine.stats.mean_batch_size(), 2),
                        "caches": served.backend.cache_stats(),
                    }
                    for served in runtime.service.models
                ],
            }
        )

