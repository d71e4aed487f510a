"""Any Unicode in any text field, lone UTF-16 surrogates included, never gets a 5xx: a surrogate
anywhere is a 422 naming the field, before a tokenizer or the response encoder can raise on it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from decisiond.app import create_app
from decisiond.config import Settings

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
        ("question id", "at questions.'q\\ud800x' (a key)"),
        ("option key", "at questions.q.criteria.'q\\ud800x' (a key)"),
        ("level", "at questions.q.criteria[1]"),
        ("nested state", "at state[1].b[0]"),
    ],
)
def test_the_422_names_the_field(client: TestClient, where: str, field: str) -> None:
    """Regression: a lone surrogate in the state or an option key reached the tokenizer (500), and one
    in a question id made the response fail to serialise (500)."""
    resp = _post(client, PLACEMENTS[where]("q\ud800x"))
    assert resp.status_code == 422
    assert field in resp.json()["detail"][0]["msg"]


def test_400_questions_in_one_request_are_answered(client: TestClient) -> None:
    """Regression: the default cap was 128 questions; the hosted service answers 512."""
    questions = {f"q{i}": {"type": "noul", "instructions": f"Is it {i}?"} for i in range(400)}
    resp = _post(client, {"state": "s", "questions": questions})
    assert resp.status_code == 200, resp.text
    assert list(resp.json()["answers"]) == list(questions)
    assert Settings().max_questions >= 512
