"""Typed decisions: questions read from a pydantic model, answers landing in its fields."""

from __future__ import annotations

import asyncio
import math
from enum import Enum, StrEnum
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from decisiond.client import (
    AsyncDecisionClient,
    Choice,
    DecisionClient,
    DecisionResponse,
    NoAnswerError,
    Noul,
    Score,
    questions_of,
    read_typed,
    request_for,
    typed,
)
from decisiond.service import Service

E = math.e


class Dept(StrEnum):
    BILLING = "billing"
    TECHNICAL = "technical"
    OTHER = "other"

    @classmethod
    def criteria(cls) -> dict[Dept, str]:
        return {cls.BILLING: "Payments, invoicing, refunds", cls.OTHER: "None of the above"}


class Anger(Enum):
    CALM = "Calm"
    CIVIL = "Concerned but civil"
    ANGRY = "Very angry"


class Urgent:
    @classmethod
    def criteria(cls) -> tuple[str, str]:
        return "Names a deadline, or says now or today", "No time pressure is expressed"


class Rubric:
    @classmethod
    def levels(cls) -> list[str]:
        return ["calm", "annoyed", "furious"]


class Triage(BaseModel):
    department: typed.Choice[Dept] = Field(description="Which team should handle this ticket?")
    is_urgent: typed.NoulOf[Urgent] = Field(description="Does the ticket explicitly communicate time pressure?")
    frustration: typed.Score[Anger] = Field(description="How frustrated is the customer?")


TICKET = "I was charged twice for one order and I need the duplicate refunded today."


def test_questions_are_read_from_the_fields_in_order() -> None:
    assert questions_of(Triage) == {
        "department": Choice(
            "Which team should handle this ticket?",
            {"billing": "Payments, invoicing, refunds", "technical": None, "other": "None of the above"},
        ),
        "is_urgent": Noul(
            "Does the ticket explicitly communicate time pressure?",
            yes="Names a deadline, or says now or today",
            no="No time pressure is expressed",
        ),
        "frustration": Score.of("How frustrated is the customer?", "Calm", "Concerned but civil", "Very angry"),
    }
    assert request_for(Triage, TICKET).state == TICKET


def test_aliases_are_question_ids_and_plain_nouls_and_levels_classes_work() -> None:
    class Aliased(BaseModel):
        team: typed.Choice[Dept] = Field(alias="which-team", description="Which team?")
        plain: typed.Noul = Field(description="Is it a question?")
        anger: typed.Score[Rubric] = Field(description="How angry?")

    questions = questions_of(Aliased)
    assert list(questions) == ["which-team", "plain", "anger"]
    assert questions["plain"] == Noul.of("Is it a question?")
    assert questions["anger"] == Score.of("How angry?", "calm", "annoyed", "furious")


def test_a_field_without_a_description_is_refused() -> None:
    class NoWords(BaseModel):
        team: typed.Choice[Dept]

    with pytest.raises(ValueError, match="field 'team' has no description"):
        questions_of(NoWords)


def test_a_field_that_is_not_a_decision_field_is_refused() -> None:
    class Wrong(BaseModel):
        team: str = Field(description="Which team?")

    with pytest.raises(ValueError, match="field 'team' is a .*Choice\\[E\\], Score\\[L\\], Noul or NoulOf\\[C\\]"):
        questions_of(Wrong)


def test_enums_that_cannot_name_options_or_levels_are_refused() -> None:
    class Numbered(Enum):
        ONE = 1
        TWO = 2

    class BadChoice(BaseModel):
        team: typed.Choice[Numbered] = Field(description="Which?")

    class OneLevel(Enum):
        ONLY = "only"

    class BadScore(BaseModel):
        anger: typed.Score[OneLevel] = Field(description="How angry?")

    with pytest.raises(ValueError, match="Numbered.ONE must have a string value"):
        questions_of(BadChoice)
    with pytest.raises(ValueError, match="field 'anger': a score needs at least two levels"):
        questions_of(BadScore)


def _body(department: dict[str, float], urgent: float, anger: list[float], score: float) -> dict[str, Any]:
    winner = max(department, key=lambda k: department[k])
    return {
        "model": "m",
        "answers": {
            "department": {"type": "choice", "choice": winner, "probabilities": department, "confidence": 0.5},
            "is_urgent": {"type": "noul", "noul": urgent},
            "frustration": {
                "type": "score",
                "score": score,
                "probabilities": {str(i): p for i, p in enumerate(anger)},
                "confidence": 0.3,
            },
        },
    }


def test_every_answer_lands_in_its_field_with_the_plugin_helpers() -> None:
    body = _body({"billing": 0.7, "technical": 0.2, "other": 0.1}, 0.81, [0.1, 0.3, 0.6], 1.5)
    from decisiond.client import decode

    triage = read_typed(Triage, decode(body, request_for(Triage, TICKET)))
    assert isinstance(triage, Triage)
    assert triage.department.choice is Dept.BILLING
    assert triage.department.probability == 0.7
    assert triage.department.ranked() == [(Dept.BILLING, 0.7), (Dept.TECHNICAL, 0.2), (Dept.OTHER, 0.1)]
    assert triage.department.margin() == pytest.approx(0.5)
    assert triage.is_urgent.probability == 0.81 and triage.is_urgent
    assert triage.frustration.top_level == 2
    assert triage.frustration.level() == 2
    assert triage.frustration.label() == "Very angry"
    assert triage.frustration.legend == ("Calm", "Concerned but civil", "Very angry")


def test_reading_a_response_that_answered_nothing_raises_its_reason() -> None:
    with pytest.raises(NoAnswerError, match="overloaded"):
        read_typed(Triage, DecisionResponse.failed("overloaded"))


class Keywords(BaseModel):
    team: typed.Choice[Dept] = Field(description="Which team?")
    anger: typed.Score[Rubric] = Field(description="How angry?")


def test_decide_as_on_the_fake_backend_gives_exact_numbers(fake_app: FastAPI) -> None:
    with TestClient(fake_app) as http:
        result = DecisionClient("http://testserver", http_client=http).decide_as("fake", Keywords, "billing furious")
    assert result.team.choice is Dept.BILLING
    assert result.team.probabilities[Dept.BILLING] == round(E / (E + 2), 4)
    # 0.21194, 0.21194, 0.57612 rounded together (largest remainder) so they sum to exactly 1
    assert result.anger.probabilities == (0.212, 0.2119, 0.5761)
    assert result.anger.label() == "annoyed"  # the position (1 + 2e)/(2 + e) = 1.36 is nearest level 1


def test_async_decide_as_on_the_fake_backend(fake_app: FastAPI) -> None:
    async def run() -> Keywords:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fake_app)) as http:
            return await AsyncDecisionClient("http://test", http_client=http).decide_as(None, Keywords, "technical")

    result = asyncio.run(run())
    assert result.team.choice is Dept.TECHNICAL
    assert result.anger.score == 1.0  # no level named: uniform


@pytest.mark.slow
def test_triage_on_the_real_default_model(client_minilm_service: Service) -> None:
    from decisiond.app import create_app

    app = create_app(client_minilm_service.settings, service=client_minilm_service)
    http = TestClient(app)  # no lifespan: it would close the session's shared service
    triage = DecisionClient("http://testserver", http_client=http).decide_as(None, Triage, TICKET)
    assert triage.department.choice is Dept.BILLING
    assert triage.department.confidence > 0.5
    assert triage.department.ranked()[0][0] is Dept.BILLING
    assert 0.0 <= triage.is_urgent.probability <= 1.0
    assert triage.frustration.label() in ("Calm", "Concerned but civil", "Very angry")
