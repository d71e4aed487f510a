"""``decisiond serve --replay``: recorded answers byte for byte, strict misses, fallback to the
local model, no model loaded in strict mode, and corrupt cassettes refused at start."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.cassette import CassetteError, CassetteWriter, Library, new_entry, request_key
from decisiond.cli import main
from decisiond.config import Settings
from decisiond.service import Service

from .conftest import fake_service

REQUEST = {
    "model": "jev-latest",
    "state": "The app crashes when I upload a photo.",
    "questions": {
        "department": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"billing": None, "technical": None},
        }
    },
}
RECORDED = (
    b'{"model":"jev-hosted-3",  "answers":{"department":{"type":"choice","choice":"technical",'
    b'"probabilities":{"billing":0.1,"technical":0.9},"confidence":0.8}},"usage":{"input_tokens":31,"output_tokens":0},'
    b'"x_latency_ms":88.25}'
)
MODELS = b'{"models": [{"name": "jev-hosted-3", "description": "hosted", "release_date": "2026-03-01"}]}'


def _cassette(path: Path, *, models: bool = True) -> Path:
    writer = CassetteWriter(path)
    writer.append(new_entry("/v1/systemone", REQUEST, 200, "application/json", RECORDED))
    refused = {**REQUEST, "model": "jev-gone"}
    writer.append(
        new_entry(
            "/v1/systemone",
            refused,
            400,
            "application/json",
            b'{"detail":{"error_type":"api_usage_error","message":"gone"}}',
        )
    )
    if models:
        writer.append(new_entry("/v1/models", None, 200, "application/json", MODELS))
    return path


@asynccontextmanager
async def _client(settings: Settings, service: Service | None = None) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, service=service)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def test_a_request_in_another_question_order_is_answered_in_its_own_order(tmp_path: Path) -> None:
    """Regression: the request key kept the question order, so the same questions asked in another
    order missed their recording (404), though the order never changes an answer."""
    two = {
        "state": "s",
        "questions": {"a": {"type": "noul", "instructions": "A?"}, "b": {"type": "noul", "instructions": "B?"}},
    }
    recorded = b'{"model":"up","answers":{"a":{"type":"noul","noul":0.1},"b":{"type":"noul","noul":0.9}},"usage":{}}'
    cassette = tmp_path / "c.jsonl"
    CassetteWriter(cassette).append(new_entry("/v1/systemone", two, 200, "application/json", recorded))
    swapped = {"state": "s", "questions": dict(reversed(list(two["questions"].items())))}  # type: ignore[attr-defined]
    async with _client(Settings(replay=[cassette], models_dir=tmp_path / "no-models")) as client:
        same = await client.post("/v1/systemone", json=two)
        other = await client.post("/v1/systemone", json=swapped)
    assert same.content == recorded
    assert other.status_code == 200
    assert list(other.json()["answers"]) == ["b", "a"]
    assert other.json()["answers"] == {"b": {"type": "noul", "noul": 0.9}, "a": {"type": "noul", "noul": 0.1}}


def test_a_cassette_with_keys_of_the_previous_form_is_read_and_rekeyed(tmp_path: Path) -> None:
    cassette = tmp_path / "old.jsonl"
    entry = new_entry("/v1/systemone", REQUEST, 200, "application/json", RECORDED).model_dump(mode="json")
    cassette.write_text(json.dumps({**entry, "key": "sq1-0123456789abcdef0123456789abcdef"}) + "\n", encoding="utf-8")
    library = Library.load([cassette])
    assert list(library.entries) == [request_key(REQUEST)] and request_key(REQUEST).startswith("sq2-")


async def test_recorded_answers_are_replayed_byte_for_byte_without_a_model(tmp_path: Path) -> None:
    cassette = _cassette(tmp_path / "c.jsonl")
    reordered = {"questions": REQUEST["questions"], "x_unknown": True, "state": REQUEST["state"]}
    async with _client(Settings(replay=[cassette], models_dir=tmp_path / "no-models")) as client:
        first = await client.post("/v1/systemone", json=REQUEST)
        again = await client.post("/v1/systemone", content=json.dumps(reordered).encode())
        refused = await client.post("/v1/systemone", json={**REQUEST, "model": "jev-gone"})
        models = await client.get("/v1/models")
        health = await client.get("/health")
    assert first.status_code == 200 and first.content == RECORDED
    assert again.content == RECORDED and first.headers["content-type"] == "application/json"
    assert "x-request-id" in first.headers
    assert refused.status_code == 400 and refused.json()["detail"]["message"] == "gone"
    assert models.content == MODELS
    assert health.json()["status"] == "ok" and health.json()["mode"] == "replay"


async def test_a_strict_miss_is_a_404_naming_the_cassettes_and_the_key(tmp_path: Path) -> None:
    first, second = _cassette(tmp_path / "a.jsonl"), _cassette(tmp_path / "b.jsonl", models=False)
    other = {**REQUEST, "state": "Where is my invoice?"}
    async with _client(Settings(replay=[first, second], replay_mode="strict")) as client:
        miss = await client.post("/v1/systemone", json=other)
        invalid = await client.post("/v1/systemone", json={"state": 5, "questions": {}})
    assert miss.status_code == 404
    detail = miss.json()["detail"]
    assert detail["error_type"] == "not_found_error"
    assert request_key(other) in detail["message"]
    assert str(first) in detail["message"] and str(second) in detail["message"]
    assert "Where is my invoice" not in miss.text  # never echo the state
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"][0] == "body"


async def test_strict_mode_without_a_recorded_model_list_lists_the_cassettes_models(tmp_path: Path) -> None:
    cassette = _cassette(tmp_path / "c.jsonl", models=False)
    async with _client(Settings(replay=[cassette])) as client:
        models = (await client.get("/v1/models")).json()
    assert [m["name"] for m in models["models"]] == ["jev-hosted-3"]


async def test_fallback_answers_a_miss_with_the_local_model(tmp_path: Path) -> None:
    cassette = _cassette(tmp_path / "c.jsonl", models=False)
    settings = Settings(replay=[cassette], replay_mode="fallback", max_wait_ms=0)
    other = {**REQUEST, "state": "billing billing technical"}
    async with _client(settings, fake_service(settings)) as client:
        hit = await client.post("/v1/systemone", json=REQUEST)
        miss = await client.post("/v1/systemone", json=other)
        models = await client.get("/v1/models")
        invalid = await client.post("/v1/systemone", json={"state": 5, "questions": {}})
    assert hit.content == RECORDED
    assert miss.status_code == 200
    body = miss.json()
    assert body["model"] == "fake-1" and body["answers"]["department"]["choice"] == "billing"
    assert [m["name"] for m in models.json()["models"]] == ["fake-1"]
    assert invalid.status_code == 422


def test_a_corrupt_cassette_is_refused_at_start_with_its_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = _cassette(tmp_path / "c.jsonl")
    cassette.write_text(cassette.read_text() + '{"key": "sq1-x", "response": 5}\n', encoding="utf-8")
    with pytest.raises(CassetteError, match=r"c\.jsonl:4"):
        create_app(Settings(replay=[cassette]))
    assert main(["serve", "--replay", str(cassette), "--port", "0"]) == 2
    assert "c.jsonl:4" in capsys.readouterr().err
