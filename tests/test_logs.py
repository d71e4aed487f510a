"""Logging: the JSON formatter and one access line per request with only the allowed fields."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from decisiond import logs

from .reliability_support import VALID, served_app


def test_the_json_formatter_writes_one_object_with_the_fields() -> None:
    record = logging.LogRecord("decisiond.access", logging.INFO, __file__, 1, "request", None, None)
    record.fields = {"id": "abc", "status": 200}
    line = json.loads(logs.JsonFormatter().format(record))
    assert line["level"] == "info" and line["logger"] == "decisiond.access" and line["msg"] == "request"
    assert line["id"] == "abc" and line["status"] == 200 and line["ts"].endswith("Z")


def test_access_keeps_only_the_allowed_fields(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="decisiond.access"):
        logs.access(id="abc", status=200, state="the state", key="sk-123")
    assert caplog.records[-1].fields == {"id": "abc", "status": 200}


def test_configure_refuses_an_unknown_format() -> None:
    with pytest.raises(ValueError, match="xml"):
        logs.configure("info", "xml")


def test_one_access_line_per_request_with_id_model_questions_tokens_status_ms(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> str:
        async with served_app() as (_, client):
            response = await client.post("/v1/systemone", json=VALID, headers={"x-request-id": "req-42"})
            await client.post("/v1/systemone", json={"state": "x"})
            return response.headers["x-request-id"]

    with caplog.at_level(logging.INFO, logger="decisiond.access"):
        request_id = asyncio.run(run())
    lines = [r.fields for r in caplog.records if r.name == "decisiond.access"]
    assert request_id == "req-42"
    assert len(lines) == 2
    assert lines[0] == {
        "id": "req-42",
        "method": "POST",
        "route": "/v1/systemone",
        "model": "fake-model",
        "questions": 3,
        "tokens": lines[0]["tokens"],
        "status": 200,
        "ms": lines[0]["ms"],
    }
    assert lines[0]["tokens"] > 0 and lines[0]["ms"] > 0
    assert lines[1]["status"] == 422 and lines[1]["model"] == "fake-model"  # no model named: the default, as a 200


def test_the_access_line_of_a_refusal_names_the_model_the_body_named(caplog: pytest.LogCaptureFixture) -> None:
    """Bug: the access line of a refused request (400, 422, 529) said ``"model": null`` even when the
    body named a model. It names the served model the body's ``model`` resolves to (an alias too; no
    model: the default, as a 200 does); null when it names none or the body is not an object, so
    the caller's own text never reaches the log."""
    noul = {"type": "noul", "instructions": "Urgent?"}
    bodies = [
        {"model": "jev-latest", "state": "s", "questions": {"": noul}},  # 400: a limit, before the model
        {"model": "fake-model", "state": "s", "questions": {"q": {"type": "box", "instructions": "Where?"}}},  # 400
        {"model": "fake-model", "state": 1, "questions": {"q": noul}},  # 422: a schema error
        {"model": "fake-model", "state": "s\ud800", "questions": {"q": noul}},  # 422: a lone surrogate
        {"state": "s", "questions": {}},  # 422: no model named, so the default
        {"model": "NO-SUCH-MODEL", "state": "s", "questions": {"q": noul}},  # 400: names no served model
        {"model": 7, "state": "s", "questions": {"q": noul}},  # 422: not a name
        ["not", "an", "object"],  # 422: no model to name
    ]

    async def run() -> list[int]:
        headers = {"content-type": "application/json"}  # json.dumps: the surrogate as a \ud800 escape
        async with served_app() as (_, client):
            answers = [await client.post("/v1/systemone", content=json.dumps(b), headers=headers) for b in bodies]
        return [answer.status_code for answer in answers]

    with caplog.at_level(logging.INFO, logger="decisiond.access"):
        statuses = asyncio.run(run())
    lines = [r.fields for r in caplog.records if r.name == "decisiond.access"]
    assert statuses == [400, 400, 422, 422, 422, 400, 422, 422]
    assert [line["status"] for line in lines] == statuses
    assert [line["model"] for line in lines] == ["fake-model"] * 5 + [None] * 3
