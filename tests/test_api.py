"""The wire over HTTP on the fake backend: every refusal of spec/wire.md §5, exact answers, round trips."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from decisiond.app import create_app
from decisiond.config import Settings

from .conftest import fake_service

TICKET = "billing billing technical"
CHOICE = {
    "type": "choice",
    "instructions": "Which team?",
    "criteria": {"billing": None, "technical": "Bugs", "other": None},
}
NOUL = {"type": "noul", "instructions": "Refund?", "criteria": {"true": "Asks for money back"}}
SCORE = {"type": "score", "instructions": "How angry?", "criteria": ["calm", "angry"]}


def body(questions: dict[str, Any], state: Any = TICKET, **extra: Any) -> dict[str, Any]:
    return {"state": state, "questions": questions, **extra}


async def test_exact_answers_in_request_order(fake_client: httpx.AsyncClient) -> None:
    state = "billing billing technical true angry"
    resp = await fake_client.post("/v1/systemone", json=body({"z": CHOICE, "a": NOUL, "m": SCORE}, state=state))
    assert resp.status_code == 200, resp.text
    data = resp.json()
    assert list(data["answers"]) == ["z", "a", "m"]
    assert data["model"] == "fake-1"
    # choice logits (2, 1, 0): softmax by hand
    z = math.exp(2) + math.exp(1) + 1
    choice = data["answers"]["z"]
    assert choice == {
        "type": "choice",
        "choice": "billing",
        # 0.66524, 0.24473, 0.09003: floored to 0.6652 + 0.2447 + 0.0900 = 0.9999, the missing
        # unit goes to the largest remainder (billing), so they sum to exactly 1
        "probabilities": {"billing": 0.6653, "technical": 0.2447, "other": 0.09},
        "confidence": round((math.exp(2) / z - 1 / 3) / (2 / 3), 4),
    }
    # noul logits (false 0, true 1)
    assert data["answers"]["a"] == {"type": "noul", "noul": round(math.e / (1 + math.e), 4)}
    # score logits (calm 0, angry 1): p = (1/(1+e), e/(1+e)); score = p1; mode 1; D = 1/2
    p1 = math.e / (1 + math.e)
    score = data["answers"]["m"]
    assert score["score"] == round(p1, 4)
    assert score["legend"] == {"0": "calm", "1": "angry"}
    assert score["confidence"] == round(1 - (1 - p1) / 0.5, 4)
    assert data["usage"] == {"input_tokens": data["usage"]["input_tokens"], "output_tokens": 0}
    assert isinstance(data["usage"]["input_tokens"], int) and data["usage"]["input_tokens"] > 0
    assert set(data) == {"model", "answers", "usage", "x_latency_ms"}


@pytest.mark.parametrize(
    ("label", "payload"),
    [
        ("missing state", {"questions": {"q": NOUL}}),
        ("missing questions", {"state": "x"}),
        ("empty questions", {"state": "x", "questions": {}}),
        ("number state", {"state": 3, "questions": {"q": NOUL}}),
        ("bool state", {"state": True, "questions": {"q": NOUL}}),
        ("null state", {"state": None, "questions": {"q": NOUL}}),
        ("missing type", {"state": "x", "questions": {"q": {"instructions": "Refund?"}}}),
        ("unknown type", {"state": "x", "questions": {"q": {"type": "boolean", "instructions": "Refund?"}}}),
        ("null level", {"state": "x", "questions": {"q": {"type": "score", "criteria": ["a", None]}}}),
        ("map score", {"state": "x", "questions": {"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}}}),
        ("empty levels", {"state": "x", "questions": {"q": {"type": "score", "criteria": []}}}),
        ("no options", {"state": "x", "questions": {"q": {"type": "choice", "criteria": {}}}}),
        ("number instructions", {"state": "x", "questions": {"q": {"type": "noul", "instructions": 5}}}),
        ("bool description", {"state": "x", "questions": {"q": {"type": "choice", "criteria": {"a": True}}}}),
        ("choice without criteria", {"state": "x", "questions": {"q": {"type": "choice", "instructions": "?"}}}),
        ("questions a list", {"state": "x", "questions": [NOUL]}),
        ("256 options", body({"q": {"type": "choice", "criteria": {f"o{i}": None for i in range(256)}}})),
        ("11 levels", body({"q": {"type": "score", "criteria": [f"l{i}" for i in range(11)]}})),
    ],
)
async def test_schema_errors_are_422_in_fastapi_shape(fake_client: httpx.AsyncClient, label: str, payload: Any) -> None:
    resp = await fake_client.post("/v1/systemone", json=payload)
    assert resp.status_code == 422, (label, resp.text)
    detail = resp.json()["detail"]
    assert isinstance(detail, list) and detail
    for error in detail:
        assert set(error) == {"loc", "msg", "type"}
        assert error["loc"][0] == "body"


async def test_body_not_json_is_422(fake_client: httpx.AsyncClient) -> None:
    resp = await fake_client.post(
        "/v1/systemone", content=b'{"state": "x", "questions": {', headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["type"] == "json_invalid"


@pytest.mark.parametrize(
    ("label", "payload", "words"),
    [
        ("empty id", body({"": NOUL}), "empty"),
        ("noul with nothing", body({"q": {"type": "noul"}}), "nothing to ask"),
        (
            "noul with blank sides",
            body({"q": {"type": "noul", "instructions": " ", "criteria": {"true": None}}}),
            "'q'",
        ),
        ("unknown model", body({"q": NOUL}, model="no-such-model"), "unknown model"),
        ("images to a text model", body({"q": NOUL}, images=["data:image/png;base64,AAAA"]), "image"),
        (
            "assets to a text model",
            body({"q": NOUL}, assets={"<img>": {"type": "image", "format": "png", "data_base64": "AA"}}),
            "image",
        ),
        ("audio", body({"q": NOUL}, audio=["data:audio/wav;base64,AAAA"]), "audio"),
        ("video", body({"q": NOUL}, video=["x"]), "video"),
    ],
)
async def test_semantic_limits_are_400_api_usage_error(
    fake_client: httpx.AsyncClient, label: str, payload: Any, words: str
) -> None:
    resp = await fake_client.post("/v1/systemone", json=payload)
    assert resp.status_code == 400, (label, resp.text)
    detail = resp.json()["detail"]
    assert detail["error_type"] == "api_usage_error"
    assert words in detail["message"]


@pytest.mark.parametrize(
    "questions",
    [
        {"": NOUL},
        {"team": {"type": "choice", "criteria": {"": "x", "technical": "bugs"}}},
        {"urgent": NOUL, "team": {"type": "choice", "criteria": {"billing": None, "": None}}},
    ],
)
async def test_an_empty_option_key_is_refused_as_an_empty_id_is(
    fake_client: httpx.AsyncClient, questions: dict[str, Any]
) -> None:
    """Bug: an empty option key was answered (200, with a probability keyed ``""``) while an empty
    question id is a 400. Both are refused alike, naming where the empty key is."""
    resp = await fake_client.post("/v1/systemone", json=body(questions))
    assert resp.status_code == 400, resp.text
    detail = resp.json()["detail"]
    assert detail["error_type"] == "api_usage_error"
    if "" in questions:
        assert detail["message"] == "a question id is empty; ids must be non-empty strings"
    else:
        position = list(questions).index("team") + 1
        option = list(questions["team"]["criteria"]).index("") + 1
        assert detail["message"] == (
            f"an option key is empty (option {option} of question {position}); option keys must be non-empty strings"
        )


async def test_a_blank_option_key_is_answered_as_a_blank_id_is(fake_client: httpx.AsyncClient) -> None:
    """A key of spaces is a non-empty string, for question ids and option keys alike (spec/wire.md §2)."""
    blank = {"type": "choice", "criteria": {" ": "x", "b": None}}
    resp = await fake_client.post("/v1/systemone", json=body({" ": blank}))
    assert resp.status_code == 200, resp.text
    assert list(resp.json()["answers"][" "]["probabilities"]) == [" ", "b"]


async def test_token_budget_is_400_max_tokens_exceeded() -> None:
    settings = Settings(max_wait_ms=0, max_state_tokens=20)
    app = create_app(settings, service=fake_service(settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        resp = await client.post("/v1/systemone", json=body({"q": NOUL}, state="word " * 21))
    assert resp.status_code == 400
    assert resp.json()["detail"]["error_type"] == "max_tokens_exceeded"
    assert "20" in resp.json()["detail"]["message"]


async def test_body_over_the_limit_is_413() -> None:
    settings = Settings(max_wait_ms=0, max_body_bytes=2048)
    app = create_app(settings, service=fake_service(settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        resp = await client.post("/v1/systemone", json=body({"q": NOUL}, state="x" * 4096))
    assert resp.status_code == 413
    assert resp.json()["detail"]["error_type"] == "request_too_large"


async def test_unknown_fields_are_ignored(fake_client: httpx.AsyncClient) -> None:
    plain = await fake_client.post("/v1/systemone", json=body({"q": CHOICE}))
    extra = await fake_client.post(
        "/v1/systemone",
        json=body({"q": {**CHOICE, "weight": 3, "x_note": "hi"}}, x_trace_id="t", seed=7, temperature=0.1),
    )
    assert extra.status_code == 200
    assert extra.json()["answers"] == plain.json()["answers"]


@pytest.mark.parametrize(
    "qid", ["환불 요청", "🙂 emoji id", "with spaces and.dots", "x" * 1000, 'ünïcødé/\\"quotes"', " "]
)
async def test_ids_and_option_keys_round_trip(fake_client: httpx.AsyncClient, qid: str) -> None:
    options = {"환불 요청": None, "🙂 기타": "그 외", "a b.c": None, "k" * 1000: None}
    resp = await fake_client.post("/v1/systemone", json=body({qid: {"type": "choice", "criteria": options}}))
    assert resp.status_code == 200, resp.text
    answers = resp.json()["answers"]
    assert list(answers) == [qid]
    assert list(answers[qid]["probabilities"]) == list(options)


async def test_255_options_and_10_levels_are_accepted(fake_client: httpx.AsyncClient) -> None:
    many = {f"queue {i:03d}": None for i in range(255)}
    levels = [f"level {i}" for i in range(10)]
    resp = await fake_client.post(
        "/v1/systemone",
        json=body({"c": {"type": "choice", "criteria": many}, "s": {"type": "score", "criteria": levels}}),
    )
    assert resp.status_code == 200, resp.text
    answers = resp.json()["answers"]
    assert len(answers["c"]["probabilities"]) == 255
    assert list(answers["s"]["legend"]) == [str(i) for i in range(10)]


async def test_one_option_and_one_level_answer_with_confidence_one(fake_client: httpx.AsyncClient) -> None:
    resp = await fake_client.post(
        "/v1/systemone",
        json=body({"c": {"type": "choice", "criteria": {"only": None}}, "s": {"type": "score", "criteria": ["one"]}}),
    )
    answers = resp.json()["answers"]
    assert answers["c"] == {"type": "choice", "choice": "only", "probabilities": {"only": 1.0}, "confidence": 1.0}
    assert answers["s"]["score"] == 0.0 and answers["s"]["confidence"] == 1.0


async def test_structured_state_and_texts(fake_client: httpx.AsyncClient) -> None:
    state = {"ticket": "billing please", "tags": ["billing", {"n": 1}]}
    q = {"type": "choice", "instructions": {"ask": "team?"}, "criteria": {"billing": {"what": "money"}, "sales": ["x"]}}
    levels = [{"name": "calm"}, ["angry"]]
    resp = await fake_client.post(
        "/v1/systemone", json=body({"c": q, "s": {"type": "score", "criteria": levels}}, state=state)
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["answers"]["c"]["choice"] == "billing"
    assert resp.json()["answers"]["s"]["legend"] == {"0": {"name": "calm"}, "1": ["angry"]}


async def test_array_state(fake_client: httpx.AsyncClient) -> None:
    resp = await fake_client.post("/v1/systemone", json=body({"c": CHOICE}, state=["technical", "technical"]))
    assert resp.json()["answers"]["c"]["choice"] == "technical"


async def test_model_aliases_resolve_to_the_default(fake_client: httpx.AsyncClient) -> None:
    for name in (None, "jev-latest", "default", "fake-1"):
        payload = body({"q": NOUL}) if name is None else body({"q": NOUL}, model=name)
        resp = await fake_client.post("/v1/systemone", json=payload)
        assert resp.status_code == 200 and resp.json()["model"] == "fake-1"


async def test_the_official_sdk_headers_are_accepted_and_never_required(fake_client: httpx.AsyncClient) -> None:
    sdk = {
        "X-TypeSafe-SDK": "typesafe-sdk/0.7.5",
        "X-TypeSafe-Runtime": "python/3.14.0 (linux; x86_64)",
        "X-TypeSafe-Retry-Count": "2",
        "TypeSafe-Danger-Zone-Images": "true",
        "Authorization": "Bearer anything",
    }
    with_headers = await fake_client.post("/v1/systemone", json=body({"q": NOUL}), headers=sdk)
    without = await fake_client.post("/v1/systemone", json=body({"q": NOUL}))
    assert with_headers.status_code == without.status_code == 200
    assert with_headers.json()["answers"] == without.json()["answers"]


async def test_request_id_is_echoed_or_made(fake_client: httpx.AsyncClient) -> None:
    """Both headers carry the one id: x-request-id, and x-typesafe-request-id, which the official SDKs read."""
    mine = await fake_client.post("/v1/systemone", json=body({"q": NOUL}), headers={"x-request-id": "abc-123"})
    assert mine.headers["x-request-id"] == mine.headers["x-typesafe-request-id"] == "abc-123"
    made = await fake_client.post("/v1/systemone", json={"state": 1})
    assert made.status_code == 422 and len(made.headers["x-request-id"]) >= 16
    assert made.headers["x-typesafe-request-id"] == made.headers["x-request-id"]
    missing = await fake_client.get("/no/such/route")
    assert missing.status_code == 404 and missing.headers["x-request-id"] == missing.headers["x-typesafe-request-id"]
    assert missing.headers["content-type"].startswith("application/json")


async def test_errors_never_echo_the_state(fake_client: httpx.AsyncClient) -> None:
    marker = "SECRET-STATE-MARKER-7f3a"
    for payload in (
        {"state": marker, "questions": {"q": {"type": "boolean"}}},
        {"state": marker, "questions": {"q": {"type": "score", "criteria": {"0": marker}}}},
        {"state": [marker], "questions": {"": NOUL}},
        {"state": {"k": marker}, "questions": {"q": NOUL}, "model": "nope"},
    ):
        resp = await fake_client.post("/v1/systemone", json=payload)
        assert 400 <= resp.status_code < 500
        assert marker not in resp.text


async def test_models_and_health(fake_client: httpx.AsyncClient) -> None:
    models = (await fake_client.get("/v1/models")).json()["models"]
    assert models[0]["name"] == "fake-1"
    assert models[0]["release_date"] == "2026-01-01"
    assert {"description", "backend", "device", "dtype", "aliases"} <= set(models[0])
    health = (await fake_client.get("/health")).json()
    assert health["status"] == "ok" and health["model"] == "fake-1"
    assert health["device"] == "cpu" and health["dtype"] == "float32"


async def test_health_says_loading_until_the_model_is_ready(tmp_path: Any) -> None:
    from decisiond.app import Runtime

    settings = Settings(max_wait_ms=0)
    app = create_app(settings, service=None, manifests=[])
    runtime: Runtime = app.state.runtime  # not started: nothing loaded yet
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.get("/health")).json() == {"status": "loading"}
        refused = await client.post("/v1/systemone", json=body({"q": NOUL}))
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert refused.json()["detail"]["error_type"] == "overloaded_error"
        runtime.service = fake_service(settings)
        runtime.status = "ok"
        assert (await client.get("/health")).json()["status"] == "ok"
