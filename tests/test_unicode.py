"""Any Unicode in any text field, lone UTF-16 surrogates included, never gets a 5xx: a surrogate
anywhere is a 422 naming the field, before a tokenizer or the response encoder can raise on it."""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from decisiond.app import create_app
from decisiond.config import Settings
from decisiond.logs import JsonFormatter, TextFormatter

from .conftest import fake_service

#: Any code point, surrogates included (hypothesis leaves them out unless asked).
ANY_TEXT = st.text(st.characters(exclude_categories=[]), max_size=20)
SURROGATE = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])


def _placements() -> dict[str, Callable[[str], dict[str, Any]]]:
    def noul(**fields: Any) -> dict[str, Any]:
        return {"type": "noul", "instructions": "Refund?", **fields}

    return {
        "state": lambda t: {"state": t, "questions": {"q": noul()}},
        "state key": lambda t: {"state": {t: "x"}, "questions": {"q": noul()}},
        "nested state": lambda t: {"state": ["a", {"b": [t]}], "questions": {"q": noul()}},
        "question id": lambda t: {"state": "s", "questions": {t: noul()}},
        "instructions": lambda t: {"state": "s", "questions": {"q": noul(instructions=t)}},
        "noul criteria": lambda t: {"state": "s", "questions": {"q": noul(criteria={"true": t})}},
        "option key": lambda t: {"state": "s", "questions": {"q": {"type": "choice", "criteria": {t: None}}}},
        "option text": lambda t: {"state": "s", "questions": {"q": {"type": "choice", "criteria": {"a": t}}}},
        "level": lambda t: {"state": "s", "questions": {"q": {"type": "score", "criteria": ["low", t]}}},
        "model": lambda t: {"model": t, "state": "s", "questions": {"q": noul()}},
        "box": lambda t: {"state": "s", "questions": {"q": {"type": "box", "instructions": t}}},
        "asset key": lambda t: {"state": "s", "questions": {"q": noul()}, "assets": {t: {"type": "image"}}},
        "unknown field": lambda t: {"state": "s", "questions": {"q": noul()}, "x_note": t},
    }


PLACEMENTS = _placements()


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = Settings(max_wait_ms=0)
    service = fake_service(settings)
    with TestClient(create_app(settings, service=service)) as client:
        yield client
    service.close()


def _post(client: TestClient, body: dict[str, Any]) -> Any:
    # ensure_ascii writes a lone surrogate as the \ud800 escape, as a JSON client sends it
    return client.post("/v1/systemone", content=json.dumps(body), headers={"content-type": "application/json"})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ANY_TEXT, where=st.sampled_from(sorted(PLACEMENTS)))
def test_any_text_anywhere_never_gets_a_5xx(client: TestClient, text: str, where: str) -> None:
    resp = _post(client, PLACEMENTS[where](text))
    assert resp.status_code < 500, (where, resp.text)
    resp.json()  # always a JSON body that decodes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=ANY_TEXT, surrogate=SURROGATE, where=st.sampled_from(sorted(PLACEMENTS)))
def test_a_lone_surrogate_anywhere_is_a_422_naming_the_field(
    client: TestClient, before: str, surrogate: str, where: str
) -> None:
    resp = _post(client, PLACEMENTS[where](before + surrogate))
    assert resp.status_code == 422, (where, resp.text)
    detail = resp.json()["detail"]
    assert detail[0]["type"] == "string_unicode" and "lone UTF-16 surrogate" in detail[0]["msg"]
    resp.content.decode("utf-8")  # strict: the message shows the field escaped, never the surrogate


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("state", "at state:"),
        ("question id", "at questions, the id of question 1:"),
        ("option key", "at questions[question 1].criteria, the key of option 1:"),
        ("option text", "at questions[question 1].criteria[option 1]:"),
        ("level", "at questions[question 1].criteria[1]:"),
        ("nested state", "at state[1][entry 1][0]:"),
        ("state key", "at state, the key of entry 1:"),
        ("noul criteria", "at questions[question 1].criteria.true:"),
        ("asset key", "at assets, the placeholder of asset 1:"),
        ("unknown field", "at body[field 3]:"),
    ],
)
def test_the_422_names_the_field(client: TestClient, where: str, field: str) -> None:
    """Regression: a lone surrogate in the state or an option key reached the tokenizer (500), and one
    in a question id made the response fail to serialise (500). The wire's own field names are shown
    as they are; a key the caller chose is shown by its position, never by its text."""
    resp = _post(client, PLACEMENTS[where]("q\ud800x"))
    assert resp.status_code == 422
    assert field in resp.json()["detail"][0]["msg"]


MARKER = st.text(string.ascii_uppercase, min_size=12, max_size=24)


def _nested(marker: str, depth: int, leaf: dict[str, Any]) -> Any:
    """``leaf`` under ``depth`` objects and arrays whose keys all hold ``marker``."""
    value: Any = leaf
    for level in range(depth):
        value = {f"{marker}{level}": value} if level % 2 else [{f"{marker}{level}": value}]
    return value


def _key_placements() -> dict[str, Callable[[str, str, int], dict[str, Any]]]:
    """Bodies with ``bad`` (the marker and a lone surrogate) in a key, or in a value under keys that
    hold the marker, at the given depth."""

    def noul(**fields: Any) -> dict[str, Any]:
        return {"type": "noul", "instructions": "Refund?", **fields}

    def asset() -> dict[str, Any]:
        return {"type": "image", "format": "png", "data_base64": "AA"}

    return {
        "state key": lambda m, bad, d: {"state": _nested(m, d, {m: 1, bad: 1}), "questions": {m: noul()}},
        "state value": lambda m, bad, d: {"state": _nested(m, d, {m: bad}), "questions": {m: noul()}},
        "question id": lambda m, bad, d: {"state": "s", "questions": {m: noul(), bad: noul()}},
        "option key": lambda m, bad, d: {
            "state": "s",
            "questions": {m: {"type": "choice", "criteria": {m: None, bad: _nested(m, d, {m: "x"})}}},
        },
        "option text": lambda m, bad, d: {
            "state": "s",
            "questions": {m: {"type": "choice", "criteria": {m: _nested(m, d, {m: bad})}}},
        },
        "instructions key": lambda m, bad, d: {
            "state": "s",
            "questions": {m: {"type": "noul", "instructions": _nested(m, d, {bad: "x"})}},
        },
        "noul criteria key": lambda m, bad, d: {
            "state": "s",
            "questions": {m: noul(criteria={"true": _nested(m, d, {m: "x"}), bad: "x"})},
        },
        "question field": lambda m, bad, d: {"state": "s", "questions": {m: noul(**{bad: _nested(m, d, {})})}},
        "asset key": lambda m, bad, d: {"state": "s", "questions": {m: noul()}, "assets": {m: asset(), bad: asset()}},
        "body field": lambda m, bad, d: {"state": "s", "questions": {m: noul()}, m: 1, bad: _nested(m, d, {})},
        "body field value": lambda m, bad, d: {"state": "s", "questions": {m: noul()}, m: _nested(m, d, {m: bad})},
    }


KEY_PLACEMENTS = _key_placements()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    marker=MARKER,
    surrogate=SURROGATE,
    depth=st.integers(0, 4),
    where=st.sampled_from(sorted(KEY_PLACEMENTS)),
)
def test_a_surrogate_in_a_key_is_refused_without_echoing_any_key(
    client: TestClient, caplog: pytest.LogCaptureFixture, marker: str, surrogate: str, depth: int, where: str
) -> None:
    """The wire's rule: an error never echoes the state or a key. Bug: a lone surrogate in a key (a
    state key, a question id, an option key) was reported with the key's text, and a surrogate in a
    value with the text of every key on its path."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        resp = _post(client, KEY_PLACEMENTS[where](marker, marker + surrogate, depth))
    assert resp.status_code == 422, (where, resp.text)
    assert resp.json()["detail"][0]["type"] == "string_unicode"
    assert marker not in resp.text, (where, resp.text)
    assert any(record.name == "decisiond.access" for record in caplog.records)  # the log was captured
    for record in caplog.records:
        for line in (JsonFormatter().format(record), TextFormatter().format(record)):
            assert marker not in line, (where, line)


def test_400_questions_in_one_request_are_answered(client: TestClient) -> None:
    """Regression: the default cap was 128 questions; the hosted service answers 512."""
    questions = {f"q{i}": {"type": "noul", "instructions": f"Is it {i}?"} for i in range(400)}
    resp = _post(client, {"state": "s", "questions": questions})
    assert resp.status_code == 200, resp.text
    assert list(resp.json()["answers"]) == list(questions)
    assert Settings().max_questions >= 512
