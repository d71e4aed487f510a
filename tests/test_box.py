"""The ``box`` question on the wire (spec/wire.md §8): understood, validated, and refused with 400 by a
model that cannot locate things, before any inference; a backend that declares ``box`` gets past the check."""

from __future__ import annotations

from typing import ClassVar

import httpx
import pytest

from decisiond.backends.fake import FakeBackend
from decisiond.errors import ApiUsageError
from decisiond.service import ServedModel, Service, start_engine
from decisiond.wire import BoxAnswer, DecisionRequest, DecisionResponse

from .conftest import fake_manifest, fake_service

BOX = {"type": "box", "instructions": "the cat"}
NOUL = {"type": "noul", "instructions": "Is there a cat?"}


async def test_a_box_on_a_model_that_cannot_locate_things_is_400_naming_the_question(
    fake_client: httpx.AsyncClient,
) -> None:
    resp = await fake_client.post("/v1/systemone", json={"state": "a photo", "questions": {"q": NOUL, "where": BOX}})
    assert resp.status_code == 400, resp.text
    detail = resp.json()["detail"]
    assert detail["error_type"] == "api_usage_error"
    assert "'where'" in detail["message"] and "box" in detail["message"] and "fake-1" in detail["message"]


@pytest.mark.parametrize(
    "question",
    [
        {"type": "box", "instructions": 5},
        {"type": "box", "instructions": True},
        {"type": "boxes", "instructions": "the cat"},
    ],
)
async def test_a_malformed_box_is_a_422(fake_client: httpx.AsyncClient, question: dict[str, object]) -> None:
    resp = await fake_client.post("/v1/systemone", json={"state": "a photo", "questions": {"where": question}})
    assert resp.status_code == 422, resp.text


def test_box_questions_and_answers_parse_as_the_official_sdk_writes_them() -> None:
    request = DecisionRequest.model_validate({"state": "s", "questions": {"w": {"type": "box"}, "x": BOX}})
    assert [q.type for q in request.questions.values()] == ["box", "box"]
    answer = {"type": "box", "box": {"top": 0.2, "bottom": 0.66, "left": 0.19, "right": 0.68}, "confidence": None}
    response = DecisionResponse.model_validate(
        {"model": "m", "answers": {"w": answer}, "usage": {"input_tokens": 1}, "x_latency_ms": 1.0}
    )
    assert isinstance(response.answers["w"], BoxAnswer) and response.answers["w"].confidence is None


class _Locating(FakeBackend):
    question_types: ClassVar[frozenset[str]] = frozenset({"noul", "choice", "score", "box"})


def test_a_backend_that_declares_box_passes_the_check_and_models_list_it() -> None:
    service = fake_service()
    locating = _Locating()
    both = Service(
        [service.default, ServedModel(fake_manifest("locator"), locating, start_engine(locating, service.settings))],
        service.settings,
    )
    try:
        request = DecisionRequest.model_validate({"state": "s", "questions": {"where": BOX}})
        both.check_question_types(request, both.resolve("locator"))
        with pytest.raises(ApiUsageError, match="'where' is a box question"):
            both.check_question_types(request, both.resolve("fake-1"))
        cards = {card["name"]: card for card in (m.card() for m in both.models)}
        assert "box" in cards["locator"]["question_types"] and "box" not in cards["fake-1"]["question_types"]
    finally:
        both.close()
