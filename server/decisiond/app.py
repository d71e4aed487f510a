"""The HTTP app: routes, error mapping, auth, metrics, request ids, body limits, and model loading.

:func:`create_app` builds a FastAPI app from :class:`~decisiond.config.Settings`. Given a ready
:class:`~decisiond.service.Service` (tests, the pytest plugin) it serves it at once; otherwise its
lifespan loads the configured models on a background thread while ``/health`` answers
``{"status": "loading"}``. Nothing loads a model at import.

Every response carries ``x-request-id``, the same id as ``x-typesafe-request-id`` (what the
official SDKs read), and ``server-timing`` (``prepare``, ``queue``, ``model``
for decisions, ``total`` always), is counted in ``/metrics`` and written as one access line
(:mod:`decisiond.logs`). With API keys configured, ``/v1/*`` and ``/metrics`` need one
(:mod:`decisiond.auth`) and ``/health`` shows only its status.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic_core import to_json
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import __version__, logs
from .auth import BEARER, AuthMiddleware
from .body import BodyDecodingMiddleware
from .config import Settings
from .errors import DecisionError, InternalError, Unavailable
from .handlers import decision_error, error_response, http_error, served_model_name, validation_error
from .limits import BodyLimitMiddleware, BodyTimeoutMiddleware
from .manifest import Manifest, find_manifest
from .metrics import CONTENT_TYPE, Metrics
from .playground import add_playground
from .probes import add_probes
from .service import ServedModel, Service, load_model
from .shutdown import Drain, HeldRequestsMiddleware
from .slashes import TrailingSlashMiddleware
from .wire import DecisionRequest, DecisionResponse, ErrorBody, ModelList

log = logging.getLogger("decisiond.app")

REQUEST_ID = "x-request-id"
#: The request id header both official SDKs read (``response.request_id``, ``APIError.requestId``).
TYPESAFE_REQUEST_ID = "x-typesafe-request-id"
SERVER_TIMING = "server-timing"
#: A caller's request id is kept when it is 1 to 200 of these characters; otherwise a new one is made.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,200}")
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "a semantic limit, an unknown model, unreadable media, too many tokens"},
    401: {"model": ErrorBody, "description": "keys are configured and the key sent is not one of them"},
    403: {"model": ErrorBody, "description": "keys are configured and no key was sent"},
    413: {"model": ErrorBody, "description": "the body, or the body decompressed, is larger than the configured limit"},
    415: {"model": ErrorBody, "description": "a Content-Encoding other than zstd, gzip or deflate"},
    500: {"model": ErrorBody, "description": "a server fault (the model failed); no traceback"},
    503: {"model": ErrorBody, "description": "loading, out of memory, or shutting down; see Retry-After"},
    529: {
        "model": ErrorBody,
        "description": "overloaded: the queue is full or the request waited too long; Retry-After",
    },
}


@dataclass
class Runtime:
    """What the app serves: the service once loaded, and the load status."""

    settings: Settings
    service: Service | None = None
    status: str = "loading"
    error: str | None = None
    manifests: list[Manifest] = field(default_factory=list)
    draining: bool = False
    drain: Drain = field(default_factory=lambda: Drain(30.0))

    def stop(self) -> None:
        """SIGTERM: refuse new requests, start the shutdown deadline (:mod:`decisiond.shutdown`)."""
        self.draining = True
        self.drain.begin()

    def models(self) -> list[ServedModel]:
        """The models served now (none while loading)."""
        return self.service.models if self.service is not None else []

    def dead_models(self) -> list[str]:
        """Names of served models whose model thread has died (the server cannot answer them)."""
        return [m.name for m in self.models() if m.engine.error is not None or not (m.engine.alive or m.engine.closing)]

    def health(self) -> tuple[str, int]:
        """The status ``/health`` reports and its HTTP status: ``loading`` 200, ``ok`` 200,
        ``stopping`` 503 (SIGTERM received), ``error`` 503 (loading failed or a model thread died)."""
        if self.status == "error" or self.dead_models():
            return "error", 503
        if self.draining:
            return "stopping", 503
        return self.status, 200

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


async def get_runtime(request: Request) -> Runtime:
    """The app's runtime (async: FastAPI would run a plain function on a thread, per request)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_service(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Service:
    """The ready service (async, like :func:`get_runtime`).

    Raises:
        Unavailable: the server is stopping, or the models are still loading or failed to load (503).
    """
    if runtime.draining:
        raise Unavailable("the server is shutting down", retry_after_s=5)
    if runtime.service is None:
        if runtime.status == "error":
            raise Unavailable("the model failed to load; see the server log", retry_after_s=30)
        raise Unavailable("the model is still loading; retry shortly", retry_after_s=2)
    return runtime.service


ServiceDep = Annotated[Service, Depends(get_service)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _request_id(scope: Scope) -> str:
    """The caller's ``x-request-id`` when it is a safe token, else a new one (never an echo of
    arbitrary bytes into headers and logs)."""
    sent = dict(scope.get("headers") or []).get(REQUEST_ID.encode())
    if sent:
        text = sent.decode("latin-1").strip()
        if _SAFE_ID.fullmatch(text):
            return text
    return f"{random.getrandbits(128):032x}"  # not a secret: a unique label, without uuid4's urandom call


def _until_disconnect(request: Request) -> Any:
    """A coroutine function returning once the client has gone: the body is read, so the next ASGI
    message is ``http.disconnect`` (the server sends it when the connection closes, or once the
    response is complete)."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            await asyncio.sleep(0.05)  # a server that answers at once with empty bodies: poll, never spin

    return gone


def _server_timing(timings: dict[str, float], total_ms: float) -> bytes:
    """``prepare;dur=0.4, queue;dur=0.1, model;dur=3.2, total;dur=4.0`` (ms, W3C Server-Timing)."""
    parts = [f"{name};dur={ms:.2f}" for name, ms in timings.items() if name != "total"]
    parts.append(f"total;dur={total_ms:.2f}")
    return ", ".join(parts).encode()


class RequestIdMiddleware:
    """The outer layer of every request: ``x-request-id`` (and ``x-typesafe-request-id``) and
    ``server-timing`` on every response,
    the metrics and the access line of every request, 503 while draining, and any unhandled fault
    turned into a 500 ``internal_error`` JSON body without a traceback.

    Args:
        app (ASGIApp): the app inside.
        runtime (Runtime): load and drain status.
        metrics (Metrics): where requests are counted.
        paths (frozenset[str], optional): the app's route paths (none has parameters), to label a
            request answered before routing (a replay, a 413, a 401) by its route. Defaults to none:
            such requests are "unmatched".
    """

    def __init__(self, app: ASGIApp, runtime: Runtime, metrics: Metrics, paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.runtime = runtime
        self.metrics = metrics
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        request_id = _request_id(scope)
        state: dict[str, Any] = {**(scope.get("state") or {}), "request_id": request_id, "arrived": time.monotonic()}
        scope["state"] = state  # this request's own: a server may share its lifespan state dict
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                total_ms = (time.perf_counter() - began) * 1000.0
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID.encode(), request_id.encode("latin-1")),
                    (TYPESAFE_REQUEST_ID.encode(), request_id.encode("latin-1")),
                    (SERVER_TIMING.encode(), _server_timing(state.get("timings", {}), total_ms)),
                ]
            await send(message)

        try:
            if self.runtime.draining and scope.get("path") not in ("/health", "/ready"):
                await error_response(Unavailable("the server is shutting down", retry_after_s=5))(
                    scope, receive, send_with_id
                )
            else:
                await self.app(scope, receive, send_with_id)
        except Exception as exc:
            log.error(
                "unhandled fault on %s %s: %s", scope.get("method"), scope.get("path"), type(exc).__name__, exc_info=exc
            )
            if status == 500:  # nothing was sent yet
                await error_response(InternalError("internal server error"))(scope, receive, send_with_id)
        finally:
            self._account(scope, state, request_id, status, time.perf_counter() - began)

    def _account(self, scope: Scope, state: dict[str, Any], request_id: str, status: int, seconds: float) -> None:
        path = scope.get("path")
        route = getattr(scope.get("route"), "path", None) or (path if path in self.paths else "unmatched")
        method = str(scope.get("method", ""))
        self.metrics.observe_request(route, method, status, seconds)
        logs.access(
            id=request_id,
            method=method,
            route=route,
            model=state.get("model"),
            questions=state.get("questions"),
            tokens=state.get("tokens"),
            status=status,
            ms=round(seconds * 1000.0, 2),
        )


def create_app(
    settings: Settings | None = None,
    *,
    service: Service | None = None,
    manifests: list[Manifest] | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings (Settings, optional): limits, keys and what to serve. Defaults to ``Settings()``.
        service (Service, optional): serve these already-loaded models. Defaults to loading
            ``manifests`` (or ``settings.model`` from ``settings.models_dir``) at start; nothing is
            loaded when ``settings.replay`` is given in strict mode.
        manifests (list[Manifest], optional): what to load when no service is given.

    Returns:
        FastAPI: routes ``POST /v1/systemone``, ``GET /v1/models``, ``GET /metrics``, ``GET /health``,
        ``GET /ready`` (:mod:`decisiond.probes`), each also with one trailing slash
        (:mod:`decisiond.slashes`), and ``GET /`` (the playground, unless off); ``app.state.runtime``
        and ``app.state.metrics`` hold its status and metrics.

    Raises:
        ValueError: the API keys file cannot be read.
        CassetteError: a ``settings.replay`` cassette is missing or has a corrupt line.
    """
    settings = settings or Settings()
    keys = settings.keys()
    runtime = Runtime(settings, service=service, status="ok" if service or not settings.needs_model else "loading")
    runtime.drain = Drain(settings.shutdown_timeout_s)
    metrics = Metrics(runtime.models)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime.service is None and settings.needs_model:
            runtime.manifests = manifests or [find_manifest(name, settings.models_dir) for name in settings.model]
            threading.Thread(target=runtime.load, name="decisiond-loader", daemon=True).start()
        yield
        runtime.draining = True
        if runtime.service is not None:
            runtime.service.close(runtime.drain.remaining_s())

    app = FastAPI(
        title="decisiond",
        version=__version__,
        summary="A local System One decision server",
        lifespan=lifespan,
        generate_unique_id_function=lambda route: route.name,
        redirect_slashes=False,  # a 307 has no JSON body; one slash is the route (TrailingSlashMiddleware)
    )
    app.state.runtime = runtime
    app.state.metrics = metrics
    app.state.auth = bool(keys)
    app.add_exception_handler(DecisionError, decision_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error(settings))
    if settings.replay:  # innermost: replayed answers still get request ids and body limits
        from .cassette import Library
        from .replay import ReplayMiddleware

        library = Library.load(settings.replay)
        mode = settings.replay_mode
        app.add_middleware(ReplayMiddleware, library=library, mode=mode, keys=bool(keys), settings=settings)
    app.add_middleware(BodyDecodingMiddleware, max_bytes=settings.max_body_bytes, max_parts=settings.max_images + 1)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(BodyTimeoutMiddleware, timeout_s=settings.body_timeout_s)
    if keys:  # before any body is read or any cassette consulted, in every mode
        app.add_middleware(AuthMiddleware, keys=keys)
    documented = [Security(BEARER)] if keys else []  # the scheme in the OpenAPI document; AuthMiddleware checks
    routers = [_decision_routes(metrics), _operation_routes(metrics)]
    for router in routers:
        app.include_router(router, dependencies=documented)
    add_probes(app, keys=bool(keys))
    add_playground(app, enabled=settings.playground)
    paths = frozenset(
        {"/health", "/ready", *(route.path for router in routers for route in router.routes)}  # type: ignore[attr-defined]
    )
    app.add_middleware(HeldRequestsMiddleware, drain=runtime.drain)
    app.add_middleware(RequestIdMiddleware, runtime=runtime, metrics=metrics, paths=paths)
    app.add_middleware(TrailingSlashMiddleware, routes=app.router.routes)  # outermost: before replay and ids
    return app


def _decision_routes(metrics: Metrics) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.post("/systemone", response_model=DecisionResponse, responses=_ERRORS, tags=["decisions"], name="decide")
    async def decide(body: DecisionRequest, request: Request, service: ServiceDep) -> Response:
        """Answer typed questions about one state.

        Example: ``{"state": "I was charged twice.", "questions": {"refund": {"type": "noul",
        "instructions": "Does the customer ask for money back?"}}}`` →
        ``{"model": "minilm-l6", "answers": {"refund": {"type": "noul", "noul": 0.71}}, ...}``
        """
        request.state.questions = len(body.questions)
        arrived = getattr(request.state, "arrived", None)  # the request timeout runs from arrival
        try:
            decision = await service.decide(body, client_gone=_until_disconnect(request), arrived=arrived)
        except Exception:  # a refusal's access line names the model too, as an answer's does
            request.state.model = served_model_name(request, body.model)
            raise
        request.state.model = decision.model
        request.state.tokens = decision.input_tokens
        request.state.timings = decision.timings_ms
        metrics.observe_answers(decision.model, [q.type for q in body.questions.values()])
        # pydantic-core's encoder: the same bytes as JSONResponse's json.dumps, 6x faster
        return Response(to_json(decision.body), media_type="application/json")

    @router.get("/models", response_model=ModelList, responses=_ERRORS, tags=["models"], name="list_models")
    async def list_models(service: ServiceDep) -> dict[str, Any]:
        """The models this server serves: name, description, release date, aliases, backend, device."""
        return {"models": [served.card() for served in service.models]}

    return router


def _operation_routes(metrics: Metrics) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/metrics",
        tags=["operations"],
        name="metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}},
    )
    async def read_metrics() -> Response:
        """Prometheus metrics: requests by route and status, latency, questions answered by type,
        batch sizes, queue depth, model load time, cache hits and misses, failures."""
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return router
