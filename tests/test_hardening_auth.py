"""Auth is one front check for every mode (issue 14, items 3-5): it runs before the body is read,
compares bytes (non-ASCII keys work), applies to ``--replay`` and to every ``/v1`` route, and
``/health`` shows only its status to a caller without a key."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.cassette import CassetteWriter, new_entry

from .reliability_support import VALID, served_app, settings

KEY = "sk-test-0123456789"
UNICODE_KEY = "clé-secrète-ключ-🔑"
RECORDED = b'{"model":"jev-hosted-3","answers":{},"usage":{"input_tokens":1,"output_tokens":0}}'


def _statuses(app_settings: Any, requests: list[tuple[str, str, Any, dict[str, Any]]]) -> list[int]:
    async def run() -> list[int]:
        async with served_app(app_settings) as (_, client):
            return [
                (await client.request(method, path, content=body, headers=headers)).status_code
                for method, path, body, headers in requests
            ]

    return asyncio.run(run())


def test_a_bad_body_without_a_key_is_refused_for_the_key_not_the_body() -> None:
    """Bug: auth ran as a route dependency, after FastAPI parsed the body, so a caller without a key
    learnt how the server validates bodies (422) instead of getting 403."""
    statuses = _statuses(
        settings(api_keys=KEY),
        [
            ("POST", "/v1/systemone", b"{not json", {"content-type": "application/json"}),
            ("POST", "/v1/systemone", b'{"state": 1}', {"authorization": "Bearer wrong"}),
            ("POST", "/v1/nowhere", b"", {}),
        ],
    )
    assert statuses == [403, 401, 403]


def test_a_non_ascii_key_authenticates_when_sent_as_utf8_bytes() -> None:
    """Bug: the header was decoded as latin-1 text and re-encoded as UTF-8, so a key with any
    non-ASCII character could never match."""
    raw = b"Bearer " + UNICODE_KEY.encode("utf-8")
    statuses = _statuses(
        settings(api_keys=UNICODE_KEY),
        [
            ("GET", "/v1/models", None, {"authorization": raw}),
            ("GET", "/v1/models", None, {"authorization": b"Bearer " + UNICODE_KEY.encode("utf-8")[:-1]}),
        ],
    )
    assert statuses == [200, 401]


def _cassette(path: Path) -> Path:
    writer = CassetteWriter(path)
    writer.append(new_entry("/v1/systemone", VALID, 200, "application/json", RECORDED))
    return path


def _replay_calls(tmp_path: Path, mode: str, headers: dict[str, str]) -> dict[str, Any]:
    app_settings = settings(api_keys=KEY, replay=[_cassette(tmp_path / "c.jsonl")], replay_mode=mode)
    from .reliability_support import fake_service

    service = None if mode == "strict" else fake_service(app_settings)

    async def run() -> dict[str, Any]:
        app = create_app(app_settings, service=service)
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                health = await client.get("/health", headers=headers)
                return {
                    "decide": (await client.post("/v1/systemone", json=VALID, headers=headers)).status_code,
                    "models": (await client.get("/v1/models", headers=headers)).status_code,
                    "health": health.status_code,
                    "health_body": health.json(),
                }

    return asyncio.run(run())


def test_replay_needs_the_key_like_every_other_mode(tmp_path: Path) -> None:
    """Bug: the replay middleware sat inside the app but answered before the route dependency that
    checked keys, so with --replay recorded answers and /v1/models were open to anyone."""
    for mode in ("strict", "fallback"):
        assert _replay_calls(tmp_path, mode, {})["decide"] == 403
        assert _replay_calls(tmp_path, mode, {})["models"] == 403
        assert _replay_calls(tmp_path, mode, {"authorization": "Bearer nope"})["decide"] == 401
        allowed = _replay_calls(tmp_path, mode, {"authorization": f"Bearer {KEY}"})
        assert (allowed["decide"], allowed["models"]) == (200, 200)


def test_health_without_a_key_shows_only_the_status_in_replay_mode(tmp_path: Path) -> None:
    """Bug: with keys set, strict replay's /health showed the mode, cassette paths and entry counts
    to anyone."""
    anonymous = _replay_calls(tmp_path, "strict", {})
    assert anonymous["health_body"] == {"status": "ok"}
    authenticated = _replay_calls(tmp_path, "strict", {"authorization": f"Bearer {KEY}"})
    assert authenticated["health_body"]["entries"] == 1


def test_open_paths_are_open_under_a_route_prefix() -> None:
    """Bug: behind Ray Serve's route prefix the scope's path is ``/prefix/health``, so ``/health``
    asked for a key; the open paths are matched on the path inside the app (``root_path`` off)."""
    from decisiond.auth import route_path

    assert route_path({"path": "/locked/health", "root_path": "/locked"}) == "/health"
    assert route_path({"path": "/locked", "root_path": "/locked"}) == "/"
    assert route_path({"path": "/health", "root_path": ""}) == "/health"
    assert route_path({"path": "/v1/systemone"}) == "/v1/systemone"
