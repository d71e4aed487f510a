"""``/ready`` (readiness) against ``/health`` (liveness), probe polls in the log, and one trailing
slash on an API route."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

import decisiond.app
from decisiond.app import create_app

from .reliability_support import VALID, fake_manifest, served_app, settings


def test_ready_is_503_with_retry_after_until_every_model_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: /health said 200 while the models were loading, so a readiness probe that used
    it sent traffic to a server that could only answer 503."""
    release = threading.Event()
    real_load = decisiond.app.load_model

    def slow_load(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(decisiond.app, "load_model", slow_load)
    app = create_app(settings(), manifests=[fake_manifest(), fake_manifest("second")])

    async def run() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                loading = [await client.get("/ready"), await client.get("/health")]
                release.set()
                for _ in range(200):
                    ready = await client.get("/ready")
                    if ready.status_code == 200:
                        break
                    await asyncio.sleep(0.02)
                return loading, [ready, await client.get("/health")]

    (ready_loading, health_loading), (ready, health) = asyncio.run(run())
    assert ready_loading.status_code == 503 and ready_loading.json() == {"status": "loading"}
    assert ready_loading.headers["retry-after"] == "2"
    assert health_loading.status_code == 200 and health_loading.json() == {"status": "loading"}
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "models": ["fake-model", "second"]}
    assert health.json()["status"] == "ok"


def test_ready_is_503_while_draining_and_open_without_a_key_but_terse() -> None:
    async def run() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with served_app(settings(api_keys="k1")) as (app, client):
            open_ = await client.get("/ready")
            locked = await client.get("/v1/models")
            app.state.runtime.draining = True
            return open_, locked, await client.get("/ready")

    open_, locked, draining = asyncio.run(run())
    assert open_.status_code == 200 and open_.json() == {"status": "ready"}  # no model names without a key
    assert locked.status_code == 403
    assert draining.status_code == 503 and draining.json() == {"status": "stopping"}
    assert draining.headers["retry-after"] == "5"


def test_one_trailing_slash_on_an_api_route_is_the_route() -> None:
    """Regression: POST /v1/systemone/ answered 307 with an empty body, which clients do not follow for a POST;
    and POST /v1/systemone// still did (Starlette's slash redirect), though every response is JSON."""

    async def run() -> dict[str, httpx.Response]:
        async with served_app() as (_, client):
            return {
                "plain": await client.post("/v1/systemone", json=VALID),
                "slash": await client.post("/v1/systemone/", json=VALID),
                "models": await client.get("/v1/models/"),
                "ready": await client.get("/ready/"),
                "unknown": await client.get("/nope/"),
                "two": await client.post("/v1/systemone//", json=VALID),
            }

    got = asyncio.run(run())
    assert got["slash"].status_code == 200, got["slash"].text
    assert got["slash"].json()["answers"] == got["plain"].json()["answers"]
    assert got["models"].status_code == 200 and got["models"].json()["models"][0]["name"] == "fake-model"
    assert got["ready"].status_code == 200
    assert got["unknown"].status_code == 404 and got["unknown"].json()["detail"]["error_type"] == "not_found_error"
    assert got["two"].status_code == 404, got["two"].text  # only one slash is forgiven; never a 200 on a strange path
    assert got["two"].json()["detail"]["error_type"] == "not_found_error"


def test_probe_polls_are_logged_at_debug_and_decisions_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: every /health poll wrote an access line at info, drowning the requests."""

    async def run() -> None:
        async with served_app() as (_, client):
            for path in ("/health", "/ready", "/metrics"):
                await client.get(path)
            await client.post("/v1/systemone", json=VALID)

    with caplog.at_level(logging.DEBUG, logger="decisiond.access"):
        asyncio.run(run())
    levels = {r.fields["route"]: r.levelno for r in caplog.records if r.name == "decisiond.access"}  # type: ignore[attr-defined]
    assert levels == {
        "/health": logging.DEBUG,
        "/ready": logging.DEBUG,
        "/metrics": logging.DEBUG,
        "/v1/systemone": logging.INFO,
    }
