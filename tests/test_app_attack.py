"""Hostile and broken input: every refusal a 4xx with the wire's body, ids and timings on every
response, no 5xx from the wire layer, JSON bombs refused, nothing echoed from the state or a key."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from decisiond.backends.base import Prepared, Work
from decisiond.backends.fake import FakeBackend
from decisiond.logs import JsonFormatter

from .reliability_support import VALID, served_app, settings

JSON = "application/json"


def _post_many(bodies: list[bytes], app_settings: Any = None, backend: Any = None) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        async with served_app(app_settings, backend) as (_, client):
            return [await client.post("/v1/systemone", content=body, headers={"content-type": JSON}) for body in bodies]

    return asyncio.run(run())


class BrokenPrepare(FakeBackend):
    def prepare(self, work: Work) -> Prepared:
        raise KeyError("an unexpected bug on the request thread")


def test_every_response_carries_a_request_id_and_server_timing() -> None:
    async def run() -> list[httpx.Response]:
        async with served_app(settings(max_body_bytes=4096)) as (_, client):
            return [
                await client.post("/v1/systemone", json=VALID),  # 200
                await client.get("/nowhere"),  # 404
                await client.delete("/v1/systemone"),  # 405
                await client.post("/v1/systemone", content=b"x" * 5000, headers={"content-type": JSON}),  # 413
                await client.post("/v1/systemone", json={"state": "s"}),  # 422
                await client.post("/v1/systemone", json={**VALID, "model": "nope"}),  # 400
            ]

    responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200, 404, 405, 413, 422, 400]
    for response in responses:
        assert len(response.headers["x-request-id"]) == 32
        assert "total;dur=" in response.headers["server-timing"]
        assert response.headers["content-type"] == JSON
    assert responses[0].headers["server-timing"].startswith("prepare;dur=")
    timing = responses[0].headers["server-timing"]
    assert "queue;dur=" in timing and "model;dur=" in timing
    assert responses[1].json()["detail"]["error_type"] == "not_found_error"
    assert responses[3].json()["detail"]["error_type"] == "request_too_large"


def test_an_unexpected_fault_is_a_500_internal_error_without_a_traceback() -> None:
    (response,) = _post_many([json.dumps(VALID).encode()], backend=BrokenPrepare())
    assert response.status_code == 500
    assert response.json() == {"detail": {"error_type": "internal_error", "message": "internal server error"}}
    assert response.headers["x-request-id"] and "server-timing" in response.headers


def test_a_caller_request_id_is_kept_only_when_it_is_a_safe_token() -> None:
    async def run() -> list[str]:
        async with served_app() as (_, client):
            ids = ["abc-123", "bad id\twith spaces", "x" * 300]
            return [(await client.get("/health", headers={"x-request-id": i})).headers["x-request-id"] for i in ids]

    kept, spaced, long = asyncio.run(run())
    assert kept == "abc-123" and spaced != "bad id\twith spaces" and long != "x" * 300


def test_a_streamed_body_over_the_limit_is_413() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 1024

    async def run() -> httpx.Response:
        async with served_app(settings(max_body_bytes=4096)) as (_, client):
            return await client.post("/v1/systemone", content=chunks(), headers={"content-type": JSON})

    response = asyncio.run(run())
    assert response.status_code == 413 and response.json()["detail"]["error_type"] == "request_too_large"


def test_a_json_bomb_is_refused_with_400_naming_the_limit() -> None:
    questions = b', "questions": {"q": {"type": "noul", "instructions": "x"}}}'
    bomb = b'{"state": ' + b"[" * 100_000 + b"]" * 100_000 + questions
    deep = b'{"state": ' + b"[" * 500 + b"]" * 500 + questions
    nested = json.loads("[" * 80 + "]" * 80)
    deep_criteria = {"state": "s", "questions": {"q": {"type": "choice", "criteria": {"a": nested}}}}
    responses = _post_many([bomb, deep, json.dumps(deep_criteria).encode()])
    assert [r.status_code for r in responses] == [400, 400, 400]
    for response in responses:
        assert response.json()["detail"]["error_type"] == "api_usage_error"
        assert "64" in response.json()["detail"]["message"]
    (at_limit,) = _post_many([b'{"state": ' + b"[" * 64 + b"]" * 64 + questions])
    assert at_limit.status_code == 200


def test_bodies_that_are_not_json_are_422_in_fastapi_shape() -> None:
    bodies = [
        b'{"state": "\xff\xfe\xfd", "questions": {}}',  # invalid UTF-8
        b'{"state": ' + b"9" * 5000 + b"}",  # an integer past Python's digit limit
        b'{"state": "a", "questions": ',  # truncated
        b"\x00\x01\x02",
    ]
    for response in _post_many(bodies):
        assert response.status_code == 422
        assert response.json()["detail"][0]["type"] == "json_invalid"


def test_duplicate_keys_huge_numbers_and_megabyte_strings_are_answered_without_5xx() -> None:
    noul = '"questions": {"q": {"type": "noul", "instructions": "x"}}'
    bodies = [
        ('{"state": "a", "state": "billing", ' + noul + "}").encode(),
        ('{"state": {"n": 1e999999, "m": -1e999999, "k": 12345678901234567890123}, ' + noul + "}").encode(),
        json.dumps({"state": "a" * 1_000_000, "questions": {"q": {"type": "noul", "instructions": "x"}}}).encode(),
        json.dumps({"state": "s", "questions": {"b" * 1_000_000: {"type": "noul", "instructions": "x"}}}).encode(),
        json.dumps({"state": "a " * 500_000, "questions": {"q": {"type": "noul", "instructions": "x"}}}).encode(),
    ]
    statuses = [r.status_code for r in _post_many(bodies)]
    # the last: half a million words is over the 32,768-token state budget (400 max_tokens_exceeded)
    assert statuses == [200, 200, 200, 200, 400]


def test_images_sent_to_a_text_only_model_are_refused_400() -> None:
    png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"  # truncated
    bodies = [
        {**VALID, "images": [png]},
        {**VALID, "images": ["data:text/html;base64,PGh0bWw+"]},  # a wrong MIME type
        {**VALID, "assets": {"<img>": {"type": "image", "format": "png", "data_base64": "AAAA"}}},
    ]
    for response in _post_many([json.dumps(body).encode() for body in bodies]):
        assert response.status_code == 400
        assert response.json()["detail"]["error_type"] == "api_usage_error"
        assert "image" in response.json()["detail"]["message"]


def test_while_draining_new_requests_get_503_and_health_says_stopping() -> None:
    async def run() -> tuple[httpx.Response, httpx.Response]:
        async with served_app() as (app, client):
            app.state.runtime.draining = True
            return await client.post("/v1/systemone", json=VALID), await client.get("/health")

    refused, health = asyncio.run(run())
    assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
    assert refused.json()["detail"]["error_type"] == "overloaded_error"
    assert health.status_code == 503 and health.json() == {"status": "stopping"}


MARKER = "SECRET-MARKER-7f3a9c"


@pytest.mark.parametrize("keys", ["", "sk-real-key"])
def test_no_response_or_log_line_quotes_the_state_or_a_key(keys: str, caplog: pytest.LogCaptureFixture) -> None:
    """A marker in the state, the instructions, a criterion and the Authorization header never comes back."""
    noul = {"type": "noul", "instructions": f"is {MARKER} here?"}
    bodies: list[Any] = [
        {"state": f"{MARKER} billing", "questions": {"q": noul}},
        {"state": MARKER, "questions": {}},
        {"state": 5, "questions": {"q": noul}, "secret": MARKER},
        {"state": {"k": MARKER}, "questions": {"q": {"type": "score", "criteria": [MARKER, None]}}},
        {"state": MARKER, "questions": {"q": {"type": "choice", "criteria": {f"o{i}": MARKER for i in range(300)}}}},
        {"state": MARKER, "questions": {"q": {"type": "maybe", "instructions": MARKER}}},
        {"state": " ".join([MARKER] * 40_000), "questions": {"q": noul}},
        {"state": [[[[MARKER]]]] * 2, "questions": {"q": noul}, "model": "no-such-model"},
        {"state": MARKER, "questions": {"q": noul}, "images": [MARKER]},
    ]
    raw = [json.dumps(body).encode() for body in bodies] + [f'{{"state": "{MARKER}", "questions": ['.encode()]
    formatter = JsonFormatter()

    async def run() -> list[httpx.Response]:
        async with served_app(settings(api_keys=keys)) as (_, client):
            out = []
            for auth in (f"Bearer {MARKER}", f"Bearer {keys}" if keys else None):
                headers = {"content-type": JSON, **({"authorization": auth} if auth else {})}
                for body in raw:
                    out.append(await client.post("/v1/systemone", content=body, headers=headers))
                out.append(await client.get("/metrics", headers=headers))
                out.append(await client.get("/health", headers=headers))
            return out

    with caplog.at_level(logging.DEBUG):
        responses = asyncio.run(run())
    statuses = {r.status_code for r in responses}
    assert statuses >= ({200, 400, 422, 401} if keys else {200, 400, 422})
    assert not any(status >= 500 for status in statuses)
    for response in responses:
        assert MARKER not in response.text
        assert MARKER not in str(response.headers)
        if keys:
            assert keys not in response.text and keys not in str(response.headers)
    lines = [formatter.format(record) for record in caplog.records]
    assert any('"route": "/v1/systemone"' in line for line in lines)
    for line in lines:
        assert MARKER not in line
        if keys:
            assert keys not in line


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)
question_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["noul", "choice", "score", "other"])},
    optional={"instructions": json_values, "criteria": json_values},
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "state": json_values,
        "questions": st.dictionaries(st.text(max_size=5), question_like | json_values, max_size=3),
        "model": json_values,
        "images": json_values,
    },
)


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(request_like, json_values, st.binary(max_size=200).map(lambda b: b)))
def test_random_json_and_bytes_never_get_a_5xx(body: Any) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    (response,) = _post_many([raw])
    assert response.status_code in (200, 400, 422), response.text
    payload = response.json()
    assert "detail" in payload or "answers" in payload
