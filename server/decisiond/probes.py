"""The probes: ``GET /health`` (liveness, and what is served) and ``GET /ready`` (readiness).

``/health`` answers 200 as long as the process can serve or is still loading, so a liveness probe
does not restart a server that is loading its models. ``/ready`` answers 503 with ``Retry-After``
until every model is loaded (and again while draining after SIGTERM, or after a model failed), so a
readiness probe or a load balancer sends no traffic before the server can answer it. Neither needs
an API key; with keys configured they show only their status. Their polls are logged at debug
level (:data:`decisiond.logs.POLLED_ROUTES`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from . import threads
from .auth import authenticated

if TYPE_CHECKING:
    from .app import Runtime

#: ``Retry-After`` seconds of ``/ready`` by status: a load takes seconds, a drain up to its timeout.
READY_RETRY_AFTER_S = {"loading": 2, "stopping": 5, "error": 30}


def add_probes(app: FastAPI, *, keys: bool) -> None:
    """Add ``GET /health`` and ``GET /ready`` to ``app``, which holds its runtime in
    ``app.state.runtime``.

    Args:
        app (FastAPI): the app.
        keys (bool): whether API keys are configured: then the probes, which are open, show their
            detail (models, device, queues, caches) only to a caller that sent a valid key.
    """

    @app.get("/health", tags=["operations"], name="health")
    async def health(request: Request) -> JSONResponse:
        """``loading`` until the model is ready, then ``ok`` with the model, device, dtype and the torch
        thread policy (:mod:`decisiond.threads`); ``error``
        (503) when loading failed or a model thread died; ``stopping`` (503) after SIGTERM. With API
        keys configured, only ``{"status": ...}`` unless the caller sends a valid key."""
        runtime: Runtime = request.app.state.runtime
        show_detail = not keys or authenticated(request.scope)
        status, code = runtime.health()
        if not show_detail or runtime.service is None or status != "ok":
            body: dict[str, Any] = {"status": status}
            if show_detail and status == "error":
                body["error"] = "a model failed to load or its thread stopped; see the server log"
                body["failed_models"] = runtime.dead_models()
            return JSONResponse(body, status_code=code)
        return JSONResponse(_health_detail(runtime))

    @app.get(
        "/ready",
        tags=["operations"],
        name="ready",
        responses={503: {"description": "loading, stopping or failed; see Retry-After"}},
    )
    async def ready(request: Request) -> JSONResponse:
        """200 ``{"status": "ready"}`` once every model is loaded; 503 with ``Retry-After`` and the
        status (``loading``, ``stopping``, ``error``) before, while draining, or after a failure."""
        runtime: Runtime = request.app.state.runtime
        status, _ = runtime.health()
        if status == "ok":
            body: dict[str, Any] = {"status": "ready"}
            if not keys or authenticated(request.scope):
                body["models"] = [served.name for served in runtime.models()]
            return JSONResponse(body)
        retry_after = READY_RETRY_AFTER_S.get(status, 5)
        return JSONResponse({"status": status}, status_code=503, headers={"retry-after": str(retry_after)})


def _health_detail(runtime: Runtime) -> dict[str, Any]:
    assert runtime.service is not None
    default = runtime.service.default
    info = default.backend.info()
    return {
        "status": "ok",
        "model": default.name,
        "device": info.device,
        "dtype": info.dtype,
        "threads": policy.as_dict() if (policy := threads.applied()) is not None else None,
        "models": [
            {
                "name": served.name,
                "backend": served.backend.family,
                "queue_depth": served.engine.queue_depth(),
                "mean_batch_size": round(served.engine.stats.mean_batch_size(), 2),
                "batches": served.engine.stats.batches,
                "requests": served.engine.stats.requests,
                "caches": served.backend.cache_stats(),
            }
            for served in runtime.service.models
        ],
    }
