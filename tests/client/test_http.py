"""DecisionClient and AsyncDecisionClient against the real app (in-process and over loopback), a
scripted server for retries and refusals, and the real default model."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from decisiond.client import (
    AsyncDecisionClient,
    Choice,
    DecisionAPIError,
    DecisionClient,
    DecisionConnectionError,
    DecisionRequest,
    DecodeError,
    NoAnswerError,
    Noul,
    Score,
)
from decisiond.client.http import join_url, retry_after_seconds
from decisiond.service import Service

E = math.e
REQUEST = DecisionRequest(
    "billing billing true furious",
    {
        "team": Choice.of("Which team?", "billing", "technical"),
        "yes": Noul.of("Is it?"),
        "anger": Score.of("How angry?", "calm", "annoyed", "furious"),
    },
)
ANSWER = {"model": "m", "answers": {"q": {"type": "noul", "noul": 0.25}}, "usage": {"input_tokens": 4}}
NOUL = DecisionRequest("SECRET-STATE", {"q": Noul.of("Is it?")})


def _check_exact(response: Any, model: str = "fake-1") -> None:
    assert response.model == model
    assert response.choice("team").choice == "billing"
    assert response.choice("team").probability == round(E**2 / (E**2 + 1), 4)
    assert response.choice("team").confidence == round((E**2 / (E**2 + 1) - 0.5) / 0.5, 4)
    assert response.noul("yes").probability == round(E / (E + 1), 4)
    assert response.score("anger").score == round((1 + 2 * E) / (2 + E), 4)
    assert response.input_tokens == 4 + (2 + 2) + (2 + 2) + (2 + 3)


def test_sync_client_against_the_app_in_process(fake_app: FastAPI) -> None:
    with TestClient(fake_app) as http:
        client = DecisionClient("http://testserver", http_client=http)
        _check_exact(client.decide("fake", REQUEST))
        _check_exact(client.decide(None, REQUEST))
        [model] = client.models()
    assert model.name == "fake-1"
    assert model.aliases[0] == "fake" and "jev-1.13" in model.aliases  # the default also answers hosted ids
    assert model.release_date == "2026-01-01"
    assert model.raw["backend"] == "fake"


def test_async_client_against_the_app_in_process(fake_app: FastAPI) -> None:
    async def run() -> tuple[Any, Any]:
        transport = httpx.ASGITransport(app=fake_app)
        async with httpx.AsyncClient(transport=transport) as http:
            client = AsyncDecisionClient("http://test", http_client=http)
            return await client.decide("fake-1", REQUEST), await client.models()

    response, models = asyncio.run(run())
    _check_exact(response)
    assert [m.name for m in models] == ["fake-1"]


def test_a_server_refusal_is_raised_at_once_with_status_and_detail(fake_app: FastAPI) -> None:
    with TestClient(fake_app) as http:
        client = DecisionClient("http://testserver", http_client=http)
        with pytest.raises(DecisionAPIError) as caught:
            client.decide("no-such-model", REQUEST)
    error = caught.value
    assert error.status == 400
    assert error.error_type == "api_usage_error"
    assert "unknown model 'no-such-model'" in error.message
    assert error.detail["error_type"] == "api_usage_error"
    assert error.request_id
    assert "billing billing" not in str(error)


def test_a_validation_refusal_carries_fastapis_detail(fake_app: FastAPI) -> None:
    with TestClient(fake_app) as http:
        client = DecisionClient("http://testserver", http_client=http)
        with pytest.raises(DecisionAPIError) as caught:
            client.decide(None, DecisionRequest(42, {"q": Noul.of("Is it?")}))
    assert caught.value.status == 422
    assert isinstance(caught.value.detail, list)
    assert "body.state" in caught.value.message


def test_sync_and_async_clients_over_loopback(loopback_url: str) -> None:
    with DecisionClient(loopback_url) as client:
        _check_exact(client.decide(None, REQUEST))
        assert [m.name for m in client.models()] == ["fake-1"]

    async def run() -> Any:
        async with AsyncDecisionClient(loopback_url) as client:
            return await asyncio.gather(*(client.decide("fake", REQUEST) for _ in range(4)))

    for response in asyncio.run(run()):
        _check_exact(response)


def test_decide_many_answers_each_request_and_turns_failures_into_responses_without_answers(fake_app: FastAPI) -> None:
    refused = DecisionRequest("hi", {"q": Noul({"ask": "Is it?"}, yes="y", no="n")})
    unknown_model = DecisionRequest(42, {"q": Noul.of("Is it?")})

    async def run() -> list[Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fake_app)) as http:
            client = AsyncDecisionClient("http://test", http_client=http)
            return await client.decide_many("fake", [REQUEST, unknown_model, refused, REQUEST], concurrency=2)

    first, failed, answered, last = asyncio.run(run())
    _check_exact(first)
    _check_exact(last)
    assert answered.ok
    assert not failed.ok
    assert failed.reason is not None and failed.reason.startswith("HTTP 422")
    with pytest.raises(NoAnswerError, match="HTTP 422"):
        failed.noul("q")


def test_key_headers_extra_and_path_reach_the_server(scripted: Callable[..., Any]) -> None:
    server = scripted([(200, {}, ANSWER)])
    client = DecisionClient(server.url + "/decisions", path="/", api_key="sk-test", headers={"x-tenant": "t1"})
    response = client.decide("m-1", NOUL, extra={"session_id": "s-9", "state": "replaced?", "model": "other"})
    method, path, headers, body = server.seen[0]
    assert (method, path) == ("POST", "/decisions")
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["x-tenant"] == "t1"
    assert body == {
        "model": "m-1",
        "state": "SECRET-STATE",
        "session_id": "s-9",
        "questions": {"q": {"type": "noul", "instructions": "Is it?"}},
    }
    assert response.noul("q").probability == 0.25
    assert "sk-test" not in repr(client)


def test_extra_never_adds_a_model_the_client_left_out(scripted: Callable[..., Any]) -> None:
    server = scripted([(200, {}, ANSWER)])
    DecisionClient(server.url).decide(None, NOUL, extra={"model": "sneaky"})
    assert server.seen[0][1] == "/v1/systemone"
    assert "model" not in server.seen[0][3]


def test_503_with_retry_after_is_retried_after_the_servers_wait(scripted: Callable[..., Any]) -> None:
    busy = (503, {"retry-after": "3"}, {"detail": {"error_type": "overloaded_error", "message": "queue full"}})
    server = scripted([busy, busy, (200, {}, ANSWER)])
    waits: list[float] = []
    response = DecisionClient(server.url, sleep=waits.append).decide(None, NOUL)
    assert response.noul("q").probability == 0.25
    assert len(server.seen) == 3
    assert waits == [3.0, 3.0]


def test_retry_after_is_capped(scripted: Callable[..., Any]) -> None:
    server = scripted([(429, {"retry-after": "3600"}, {"detail": "slow down"}), (200, {}, ANSWER)])
    waits: list[float] = []
    DecisionClient(server.url, sleep=waits.append, max_retry_after_s=5).decide(None, NOUL)
    assert waits == [5.0]


def test_5xx_is_retried_twice_with_backoff_then_raised(scripted: Callable[..., Any]) -> None:
    server = scripted([(500, {}, {"detail": {"error_type": "internal_error", "message": "internal server error"}})])
    waits: list[float] = []
    with pytest.raises(DecisionAPIError) as caught:
        DecisionClient(server.url, sleep=waits.append, backoff_s=0.25).decide(None, NOUL)
    assert caught.value.status == 500
    assert caught.value.error_type == "internal_error"
    assert len(server.seen) == 3
    assert waits == [0.25, 0.5]


def test_400_is_not_retried(scripted: Callable[..., Any]) -> None:
    detail = {"error_type": "api_usage_error", "message": "question 'q' is a noul with nothing to ask"}
    server = scripted([(400, {}, {"detail": detail}), (200, {}, ANSWER)])
    waits: list[float] = []
    with pytest.raises(DecisionAPIError) as caught:
        DecisionClient(server.url, sleep=waits.append).decide(None, NOUL)
    assert len(server.seen) == 1
    assert waits == []
    assert caught.value.status == 400
    assert caught.value.detail == detail
    assert str(caught.value) == "HTTP 400 api_usage_error: question 'q' is a noul with nothing to ask"


def test_async_client_retries_the_same_way(scripted: Callable[..., Any]) -> None:
    server = scripted([(503, {"retry-after": "1"}, {}), (200, {}, ANSWER)])
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def run() -> Any:
        async with AsyncDecisionClient(server.url, sleep=sleep) as client:
            return await client.decide(None, NOUL)

    assert asyncio.run(run()).noul("q").probability == 0.25
    assert waits == [1.0]
    assert len(server.seen) == 2


def test_connection_failures_are_retried_then_raised(closed_port_url: str) -> None:
    waits: list[float] = []
    with pytest.raises(DecisionConnectionError, match="after 3 attempt") as caught:
        DecisionClient(closed_port_url, sleep=waits.append).decide(None, NOUL)
    assert waits == [0.5, 1.0]
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_timeouts_are_retried() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json=ANSWER)

    http = httpx.Client(transport=httpx.MockTransport(handler))
    waits: list[float] = []
    response = DecisionClient("http://x", http_client=http, sleep=waits.append).decide(None, NOUL)
    assert response.noul("q").probability == 0.25
    assert len(calls) == 2
    assert waits == [0.5]


def test_a_200_that_is_not_json_or_not_an_answer_is_a_decode_error() -> None:
    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, text="<html>")))
    with pytest.raises(DecodeError, match="not JSON"):
        DecisionClient("http://x", http_client=http).decide(None, NOUL)
    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"answers": {}})))
    with pytest.raises(DecodeError) as caught:
        DecisionClient("http://x", http_client=http).decide(None, NOUL)
    assert caught.value.question_id == "q"


def test_url_joining_and_retry_after_parsing() -> None:
    assert (
        join_url("https://api.example.com/decisions/", "/v1/systemone")
        == "https://api.example.com/decisions/v1/systemone"
    )
    assert join_url("https://api.example.com/run", "/") == "https://api.example.com/run"
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_the_caller_s_client_is_not_closed() -> None:
    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=ANSWER)))
    with DecisionClient("http://x", http_client=http) as client:
        client.decide(None, NOUL)
    assert not http.is_closed
    own = DecisionClient("http://x")
    own.close()
    assert own._http.is_closed


def test_the_client_package_imports_neither_torch_nor_the_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys, decisiond.client; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('decisiond.') "
        "and not m.startswith('decisiond.client')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_client_on_the_real_default_model(client_minilm_service: Service) -> None:
    from decisiond.app import create_app

    app = create_app(client_minilm_service.settings, service=client_minilm_service)
    request = DecisionRequest(
        "I was charged twice for one order and I need the duplicate refunded today.",
        {
            "department": Choice(
                "Which team should handle this ticket?",
                {"billing": "Payments, invoicing, refunds", "technical": None, "other": "None of the above"},
            )
        },
    )
    http = TestClient(app)  # no lifespan: it would close the session's shared service
    response = DecisionClient("http://testserver", http_client=http).decide("jev-latest", request)
    assert response.model == "minilm-l6"
    assert response.choice("department").choice == "billing"
    assert response.choice("department").confidence > 0.5
    assert sum(response.choice("department").probabilities.values()) == pytest.approx(1.0, abs=1e-3)
