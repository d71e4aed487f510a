"""``decisiond record`` against a local fake upstream: answers pass through unchanged, every
exchange lands in the cassette, and the API key goes upstream but never into the cassette."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from decisiond.cassette import read_cassette, request_key
from decisiond.cli import main
from decisiond.inprocess import BackgroundServer
from decisiond.record import create_record_app

from .fake_upstream import UPSTREAM_MODEL, upstream_app

SECRET = "sk-live-do-not-store-123"
REQUEST = {
    "state": "I was charged twice and need the refund today.",
    "questions": {
        "department": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"billing": None, "technical": None},
        },
        "urgent": {"type": "noul", "instructions": "Is it urgent?"},
    },
}


@pytest.fixture
def upstream() -> Iterator[tuple[BackgroundServer, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    with BackgroundServer(upstream_app(seen)) as server:
        yield server, seen


def test_record_passes_answers_through_and_stores_them_without_the_key(
    upstream: tuple[BackgroundServer, list[dict[str, str]]], tmp_path: Path
) -> None:
    server, seen = upstream
    cassette = tmp_path / "rec" / "tickets.jsonl"
    with BackgroundServer(create_record_app(server.base_url, cassette, api_key=SECRET)) as proxy:
        direct = httpx.post(server.base_url + "/v1/systemone", json=REQUEST)
        proxied = httpx.post(proxy.base_url + "/v1/systemone", json=REQUEST, headers={"x-request-id": "r-1"})
        refused = httpx.post(proxy.base_url + "/v1/systemone", json={**REQUEST, "model": "no-such-model"})
        models = httpx.get(proxy.base_url + "/v1/models")
        invalid = httpx.post(proxy.base_url + "/v1/systemone", content=b'{"state": 1}')
    assert proxied.status_code == 200
    assert json.loads(proxied.content)["model"] == UPSTREAM_MODEL
    # the upstream counts calls in x_latency_ms: same bytes but that counter
    assert proxied.content == direct.content.replace(b'"x_latency_ms": 1.5', b'"x_latency_ms": 3.0')
    assert refused.status_code == 400 and models.status_code == 200
    assert [h.get("authorization") for h in seen[1:]] == [f"Bearer {SECRET}"] * 4
    assert seen[1]["x-request-id"] == "r-1"
    text = cassette.read_text(encoding="utf-8")
    assert SECRET not in text and "authorization" not in text.lower()
    entries = read_cassette(cassette)
    assert [e.route for e in entries] == ["/v1/systemone", "/v1/systemone", "/v1/models"]  # the invalid one is not kept
    first = entries[0]
    assert first.key == request_key(REQUEST) and first.request == REQUEST
    assert first.response.body.encode() == proxied.content and first.response.status == 200
    assert first.model == UPSTREAM_MODEL and first.time is not None and first.time.endswith("Z")
    assert entries[1].response.status == 400
    assert invalid.status_code == 422  # the upstream's own answer (FastAPI's validation), passed through


def test_without_a_configured_key_the_callers_header_goes_upstream_only(
    upstream: tuple[BackgroundServer, list[dict[str, str]]], tmp_path: Path
) -> None:
    server, seen = upstream
    cassette = tmp_path / "c.jsonl"
    with BackgroundServer(create_record_app(server.base_url, cassette)) as proxy:
        answer = httpx.post(
            proxy.base_url + "/v1/systemone", json=REQUEST, headers={"Authorization": f"Bearer {SECRET}"}
        )
    assert answer.status_code == 200
    assert seen[-1]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in cassette.read_text(encoding="utf-8")


def test_an_unreachable_upstream_is_a_502_and_nothing_is_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with BackgroundServer(create_record_app("http://127.0.0.1:9", cassette, timeout_s=2.0)) as proxy:
        answer = httpx.post(proxy.base_url + "/v1/systemone", json=REQUEST)
    assert answer.status_code == 502
    assert answer.json()["detail"]["error_type"] == "upstream_error"
    assert cassette.read_text() == ""


def test_record_cli_refuses_an_unset_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECISIOND_TEST_UNSET_KEY", raising=False)
    argv = ["record", "--upstream", "http://127.0.0.1:9", "--cassette", str(tmp_path / "c.jsonl")]
    assert main([*argv, "--api-key-env", "DECISIOND_TEST_UNSET_KEY"]) == 2


def test_the_proxy_passes_the_sdk_headers_both_ways_and_does_not_record_an_overload(tmp_path: Path) -> None:
    """Regression: the record proxy returned only the upstream's body and content type, so the
    official SDK, which reads `x-typesafe-request-id`, raised "The response did not include a
    request ID" through it and lost a 529's `Retry-After`; the SDK's own headers were not passed
    upstream; and a transient 529 was written to the cassette, to be replayed for ever."""
    seen: list[dict[str, str]] = []
    busy = FastAPI()

    @busy.post("/v1/systemone")
    async def overloaded(request: Request) -> JSONResponse:
        seen.append(dict(request.headers))
        body = {"detail": {"error_type": "overloaded_error", "message": "busy"}}
        headers = {"retry-after": "7", "x-typesafe-request-id": "up-42", "x-request-id": "up-42"}
        return JSONResponse(body, status_code=529, headers=headers)

    cassette = tmp_path / "c.jsonl"
    sdk_headers = {"x-typesafe-sdk": "python/0.7.5", "x-typesafe-retry-count": "1", "typesafe-danger-zone-images": "1"}
    with BackgroundServer(busy) as server, BackgroundServer(create_record_app(server.base_url, cassette)) as proxy:
        answer = httpx.post(proxy.base_url + "/v1/systemone", json=REQUEST, headers=sdk_headers)
    assert answer.status_code == 529
    assert answer.headers["retry-after"] == "7"
    assert answer.headers["x-typesafe-request-id"] == "up-42" and answer.headers["x-request-id"] == "up-42"
    assert {name: seen[0].get(name) for name in sdk_headers} == sdk_headers
    assert not cassette.exists() or read_cassette(cassette) == []
