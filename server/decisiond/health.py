"""``GET /health``: the load status, and once ready the models, their engines and the thread policy.

Kept apart from :mod:`decisiond.app` (which builds the app and calls :func:`add_health`); it reads
the app's runtime from ``app.state.runtime``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from . import threads


def add_health(app: FastAPI, *, show_detail: bool) -> None:
    """Add ``GET /health`` to ``app``; with ``show_detail`` False (API keys on) it shows only the status."""

    @app.get("/health", tags=["operations"], name="health")
    async def health(request: Request) -> JSONResponse:
        """``loading`` until the model is ready, then ``ok`` with the model, device, dtype and the torch
        thread policy; ``error`` (503) when loading failed or a model thread died; ``stopping`` (503)
        after SIGTERM. With API keys configured, only ``{"status": ...}``."""
        runtime = request.app.state.runtime
        status, code = runtime.health()
        if not show_detail or runtime.service is None or status != "ok":
            body: dict[str, Any] = {"status": status}
            if show_detail and status == "error":
                body["error"] = "a model failed to load or its thread stopped; see the server log"
                body["failed_models"] = runtime.dead_models()
            return JSONResponse(body, status_code=code)
        default = runtime.service.default
        info = default.backend.info()
        policy = threads.applied()
        return JSONResponse(
            {
                "status": "ok",
                "model": default.name,
                "device": info.device,
                "dtype": info.dtype,
                "threads": policy.as_dict() if policy is not None else None,
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
        )
