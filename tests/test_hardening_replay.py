"""Record, replay and cassette integrity (issue 14, items 2, 11, 12): only what replays faithfully is
recorded, strict replay applies the request limits before the cassette, and cassette entries that
could not be sent as recorded are refused at load, naming file and line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.cassette import CassetteError, CassetteWriter, Library, new_entry, read_cassette, request_key
from decisiond.record import create_record_app

from .reliability_support import VALID, settings

ANSWER = b'{"model":"jev-up","answers":{},"usage":{"input_tokens":1,"output_tokens":0}}'


def _proxy_calls(tmp_path: Path, upstream: Any, bodies: list[bytes]) -> list[httpx.Response]:
    cassette = tmp_path / "c.jsonl"

    async def run() -> list[httpx.Response]:
        app = create_record_app("http://upstream", cassette, transport=httpx.MockTransport(upstream))
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
                headers = {"content-type": "application/json"}
                return [await client.post("/v1/systemone", content=body, headers=headers) for body in bodies]

    return asyncio.run(run())


def test_record_passes_on_the_answer_to_a_deeply_nested_body_and_keeps_no_5xx(tmp_path: Path) -> None:
    """Bug: a deeply nested client body made json.loads raise RecursionError after the upstream had
    answered (the client got a plain 500, the answer was lost); an upstream 5xx was recorded as if it
    were an answer (replayed later without its Retry-After)."""
    deep = b'{"state": ' + b"[" * 5000 + b"]" * 5000 + b', "questions": {}}'
    overloaded = json.dumps(VALID).encode()

    def upstream(request: httpx.Request) -> httpx.Response:
        if b"[[[[" in request.content:
            return httpx.Response(400, content=b'{"detail":{"error_type":"api_usage_error","message":"deep"}}')
        return httpx.Response(
            503, content=b'{"detail":{"error_type":"overloaded_error"}}', headers={"retry-after": "7"}
        )

    deep_answer, overloaded_answer = _proxy_calls(tmp_path, upstream, [deep, overloaded])
    assert deep_answer.status_code == 400 and b"deep" in deep_answer.content
    assert overloaded_answer.status_code == 503 and overloaded_answer.headers["retry-after"] == "7"
    assert read_cassette(tmp_path / "c.jsonl") == []


def test_nan_and_infinity_are_not_keyed_as_null(tmp_path: Path) -> None:
    """Bug: NaN and Infinity in a request were stored as null, so requests the model reads differently
    shared one key; a body with them cannot be stored faithfully, so it is not recorded."""
    with_null = b'{"state": {"t": null}, "questions": {"q": {"type": "noul", "instructions": "x?"}}}'
    keys = {request_key(with_null.replace(b"null", word)) for word in (b"null", b"NaN", b"Infinity", b"-Infinity")}
    assert len(keys) == 4
    answers = _proxy_calls(
        tmp_path, lambda _: httpx.Response(200, content=ANSWER), [with_null.replace(b"null", b"NaN")]
    )
    assert answers[0].status_code == 200 and answers[0].content == ANSWER
    assert read_cassette(tmp_path / "c.jsonl") == []


def _strict(tmp_path: Path, bodies: list[Any]) -> list[httpx.Response]:
    cassette = tmp_path / "strict.jsonl"
    CassetteWriter(cassette).append(new_entry("/v1/systemone", VALID, 200, "application/json", ANSWER))

    async def run() -> list[httpx.Response]:
        app = create_app(settings(replay=[cassette], max_questions=2))
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return [await client.post("/v1/systemone", json=body) for body in bodies]

    return asyncio.run(run())


def test_strict_replay_applies_the_request_limits_before_the_cassette(tmp_path: Path) -> None:
    """Bug: strict replay looked a request up before the limits, so an empty id, too many questions
    or too deep a state got 404 (not recorded) instead of the 400 the server answers."""
    noul = {"type": "noul", "instructions": "Is it?"}
    deep: Any = "x"
    for _ in range(80):
        deep = [deep]
    answers = _strict(
        tmp_path,
        [
            {"state": "s", "questions": {"": noul}},
            {"state": "s", "questions": {"a": noul, "b": noul, "c": noul}},
            {"state": deep, "questions": {"a": noul}},
            VALID,
        ],
    )
    assert [a.status_code for a in answers] == [400, 400, 400, 400]  # VALID has 3 questions, over the limit of 2
    assert all(a.json()["detail"]["error_type"] == "api_usage_error" for a in answers)


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"status": 200, "content_type": "application/json\r\nx-injected: 1", "body": "{}"}, "content_type"),
        ({"status": 200, "content_type": "application/jsön", "body": "{}"}, "content_type"),
        ({"status": 204, "content_type": "application/json", "body": "{}"}, "status"),
        ({"status": 101, "content_type": "application/json", "body": ""}, "status"),
        ({"status": 503, "content_type": "application/json", "body": "{}"}, "status"),
    ],
)
def test_cassette_entries_that_cannot_be_sent_as_recorded_are_refused_at_load(
    tmp_path: Path, response: dict[str, Any], problem: str
) -> None:
    """Bug: a content_type with CR/LF got no response at all (the log said 200), a non-latin-1 one a
    500, and 101 or 204 entries were replayed with a body."""
    cassette = tmp_path / "bad.jsonl"
    line = {"route": "/v1/systemone", "request": VALID, "response": response}
    cassette.write_text("\n" + json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(CassetteError, match=rf"bad\.jsonl:2: .*{problem}"):
        Library.load([cassette])
