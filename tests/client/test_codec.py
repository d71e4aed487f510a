"""encode and decode: the wire body, every decode rule, and round trips through the real server."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from decisiond import wire
from decisiond.client import (
    Choice,
    ChoiceAnswer,
    DecisionRequest,
    DecisionResponse,
    DecodeError,
    NoAnswerError,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    decode,
    encode,
    request_from_wire,
)
from decisiond.service import Service

STATE = "SECRET-STATE I was charged twice"
REQUEST = DecisionRequest(
    STATE,
    {
        "department": Choice("Which team?", {"billing": "Payments, refunds", "technical": None, "other": None}),
        "is_urgent": Noul("Is it urgent?", yes="Names a deadline", no="No time pressure"),
        "frustration": Score.of("How frustrated?", "Calm", "Concerned but civil", "Very angry"),
        "plain": Noul.of("Is it a question?"),
    },
)
BODY: dict[str, Any] = {
    "model": "minilm-l6",
    "answers": {
        "department": {
            "type": "choice",
            "choice": "billing",
            "probabilities": {"billing": 0.9381, "technical": 0.0391, "other": 0.0228},
            "confidence": 0.9072,
        },
        "is_urgent": {"type": "noul", "noul": 0.81},
        "frustration": {
            "type": "score",
            "score": 1.05,
            "legend": {"0": "Calm", "1": "Concerned but civil", "2": "Very angry"},
            "probabilities": {"0": 0.0, "1": 0.95, "2": 0.05},
            "confidence": 0.925,
        },
        "plain": {"type": "noul", "noul": 0.5},
    },
    "usage": {"input_tokens": 318, "output_tokens": 0},
    "x_latency_ms": 12.4,
}


def test_encode_is_the_wire_body() -> None:
    assert encode("jev-latest", REQUEST) == {
        "model": "jev-latest",
        "state": STATE,
        "questions": {
            "department": {
                "type": "choice",
                "instructions": "Which team?",
                "criteria": {"billing": "Payments, refunds", "technical": None, "other": None},
            },
            "is_urgent": {
                "type": "noul",
                "instructions": "Is it urgent?",
                "criteria": {"true": "Names a deadline", "false": "No time pressure"},
            },
            "frustration": {
                "type": "score",
                "instructions": "How frustrated?",
                "criteria": ["Calm", "Concerned but civil", "Very angry"],
            },
            "plain": {"type": "noul", "instructions": "Is it a question?"},
        },
    }


def test_encode_without_a_model_id_leaves_model_out_and_differs_by_that_field_only() -> None:
    with_model = encode("jev-latest", REQUEST)
    without = encode(None, REQUEST)
    assert "model" not in without
    assert {k: v for k, v in with_model.items() if k != "model"} == without


def test_encode_keeps_question_and_option_order() -> None:
    body = encode(None, REQUEST)
    assert list(body["questions"]) == ["department", "is_urgent", "frustration", "plain"]
    assert list(body["questions"]["department"]["criteria"]) == ["billing", "technical", "other"]


@dataclass
class Ticket:
    text: str
    tier: str


class TicketModel(BaseModel):
    text: str
    tags: tuple[str, ...]


def test_encode_renders_structured_states_as_json() -> None:
    q = {"q": Noul.of("Is it?")}
    assert encode(None, DecisionRequest({"b": 1, "a": [1, 2]}, q))["state"] == {"b": 1, "a": [1, 2]}
    assert encode(None, DecisionRequest(Ticket("hi", "pro"), q))["state"] == {"text": "hi", "tier": "pro"}
    assert encode(None, DecisionRequest(TicketModel(text="hi", tags=("x",)), q))["state"] == {
        "text": "hi",
        "tags": ["x"],
    }
    structured = encode(None, DecisionRequest("s", {"q": Noul({"ask": "Is it?", "why": ["a"]}, yes={"w": 1}, no="n")}))
    assert structured["questions"]["q"] == {
        "type": "noul",
        "instructions": {"ask": "Is it?", "why": ["a"]},
        "criteria": {"true": {"w": 1}, "false": "n"},
    }
    json.dumps(structured)


def test_decode_reads_every_answer_in_the_order_asked() -> None:
    response = decode(BODY, REQUEST)
    assert list(response) == ["department", "is_urgent", "frustration", "plain"]
    assert response.choice("department") == ChoiceAnswer(
        "billing", {"billing": 0.9381, "technical": 0.0391, "other": 0.0228}, 0.9072
    )
    assert response.noul("is_urgent") == NoulAnswer(0.81)
    assert response.score("frustration") == ScoreAnswer(
        1.05, [0.0, 0.95, 0.05], ["Calm", "Concerned but civil", "Very angry"], 0.925
    )
    assert response.model == "minilm-l6"
    assert response.input_tokens == 318
    assert response.ok and response.reason is None
    with pytest.raises(TypeError, match="answered as a choice, not a noul"):
        response.noul("department")


def test_decode_is_lenient_about_extra_fields_anywhere() -> None:
    body = copy.deepcopy(BODY)
    body["x_request"] = "abc"
    body["answers"]["nobody_asked"] = {"type": "noul", "noul": 0.1}
    body["answers"]["department"]["x_debug"] = [1, 2]
    body["answers"]["department"]["probabilities"]["unasked_option"] = 0.0
    body["answers"]["frustration"]["legend"] = "whatever"
    body["usage"]["cost"] = 0.01
    response = decode(body, REQUEST)
    assert list(response) == ["department", "is_urgent", "frustration", "plain"]
    assert dict(response.choice("department").probabilities) == {
        "billing": 0.9381,
        "technical": 0.0391,
        "other": 0.0228,
    }


def test_decode_reads_model_and_tokens_as_none_when_absent() -> None:
    body = {"answers": BODY["answers"]}
    response = decode(body, REQUEST)
    assert response.model is None
    assert response.input_tokens is None
    assert decode({**body, "usage": {"output_tokens": 0}}, REQUEST).input_tokens is None


def _broken(path: list[str], value: Any = ...) -> dict[str, Any]:
    """BODY with the field at ``path`` removed (``...``) or replaced."""
    body = copy.deepcopy(BODY)
    node = body
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "question_id", "field"),
    [
        pytest.param(["not", "an", "object"], None, "body", id="body-not-an-object"),
        pytest.param(_broken(["answers"]), None, "answers", id="no-answers"),
        pytest.param(_broken(["answers"], []), None, "answers", id="answers-not-an-object"),
        pytest.param(_broken(["answers", "plain"]), "plain", "answers", id="missing-answer"),
        pytest.param(
            _broken(["answers", "department", "choice"], "refunds"), "department", "choice", id="winner-not-an-option"
        ),
        pytest.param(_broken(["answers", "department", "choice"]), "department", "choice", id="missing-choice"),
        pytest.param(
            _broken(["answers", "department", "probabilities"]),
            "department",
            "probabilities",
            id="missing-probabilities",
        ),
        pytest.param(
            _broken(["answers", "department", "probabilities", "technical"]),
            "department",
            "probabilities.technical",
            id="missing-option-probability",
        ),
        pytest.param(
            _broken(["answers", "frustration", "probabilities", "2"]),
            "frustration",
            "probabilities.2",
            id="missing-level-probability",
        ),
        pytest.param(_broken(["answers", "is_urgent", "noul"], "0.8"), "is_urgent", "noul", id="noul-not-a-number"),
        pytest.param(_broken(["answers", "is_urgent", "noul"], True), "is_urgent", "noul", id="noul-a-boolean"),
        pytest.param(_broken(["answers", "is_urgent", "noul"]), "is_urgent", "noul", id="noul-missing"),
        pytest.param(_broken(["answers", "frustration", "score"]), "frustration", "score", id="missing-score"),
        pytest.param(
            _broken(["answers", "frustration", "score"], "high"), "frustration", "score", id="score-not-a-number"
        ),
        pytest.param(
            _broken(["answers", "frustration", "score"], 2.5), "frustration", "score", id="score-off-the-scale"
        ),
        pytest.param(
            _broken(["answers", "department", "confidence"]), "department", "confidence", id="choice-without-confidence"
        ),
        pytest.param(
            _broken(["answers", "frustration", "confidence"]),
            "frustration",
            "confidence",
            id="score-without-confidence",
        ),
        pytest.param(
            _broken(["answers", "department", "probabilities", "billing"], 1.2),
            "department",
            "probabilities.billing",
            id="probability-above-1",
        ),
        pytest.param(
            _broken(["answers", "frustration", "probabilities", "0"], -0.1),
            "frustration",
            "probabilities.0",
            id="probability-below-0",
        ),
        pytest.param(_broken(["answers", "is_urgent", "noul"], 1.5), "is_urgent", "noul", id="noul-above-1"),
        pytest.param(
            _broken(["answers", "department", "confidence"], math.nan), "department", "confidence", id="confidence-nan"
        ),
        pytest.param(
            _broken(["answers", "is_urgent", "type"], "choice"), "is_urgent", "type", id="answered-in-another-shape"
        ),
    ],
)
def test_decode_refuses_what_is_not_an_answer(body: Any, question_id: str | None, field: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(body, REQUEST)
    assert caught.value.question_id == question_id
    assert caught.value.field == field
    assert field in str(caught.value)
    if question_id is not None:
        assert question_id in str(caught.value)
    assert "SECRET-STATE" not in str(caught.value)


def test_a_decode_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode({}, REQUEST)


def test_a_response_that_answered_nothing_raises_its_reason_when_an_answer_is_read() -> None:
    response = DecisionResponse.failed("HTTP 503 overloaded_error: queue full")
    assert not response.ok
    assert response.reason == "HTTP 503 overloaded_error: queue full"
    for read in (
        lambda: response.answers,
        lambda: response["department"],
        lambda: response.choice("department"),
        lambda: list(response),
    ):
        with pytest.raises(NoAnswerError, match="queue full"):
            read()


def test_request_from_wire_round_trips_encode() -> None:
    model, request = request_from_wire(encode("jev-latest", REQUEST))
    assert model == "jev-latest"
    assert request == REQUEST
    assert request_from_wire(encode(None, REQUEST))[0] is None


def test_request_from_wire_refuses_what_the_vocabulary_refuses() -> None:
    with pytest.raises(ValueError, match="question 'q'.*at least two levels"):
        request_from_wire(
            {"state": "s", "questions": {"q": {"type": "score", "instructions": "How?", "criteria": ["a"]}}}
        )
    with pytest.raises(ValueError, match="question 'q' has type 'poll'"):
        request_from_wire({"state": "s", "questions": {"q": {"type": "poll"}}})
    with pytest.raises(ValueError, match="needs a state"):
        request_from_wire({"questions": {"q": {"type": "noul", "instructions": "Is it?"}}})


def test_encode_then_server_then_decode_round_trips_with_exact_numbers(fake_service: Service) -> None:
    """The body encode writes is what the server reads, and what it answers decodes against the request."""
    request = DecisionRequest(
        "billing billing true furious",
        {
            "team": Choice.of("Which team?", "billing", "technical"),
            "yes": Noul.of("Is it?"),
            "anger": Score.of("How angry?", "calm", "annoyed", "furious"),
        },
    )
    decision = asyncio.run(fake_service.decide(wire.DecisionRequest.model_validate(encode("fake-1", request))))
    response = decode(json.loads(json.dumps(decision.body)), request)
    e = math.e
    assert response.model == "fake-1"
    assert response.choice("team").choice == "billing"
    assert response.choice("team").probability == round(e**2 / (e**2 + 1), 4)
    assert response.noul("yes").probability == round(e / (e + 1), 4)
    anger = response.score("anger")
    # 0.21194, 0.21194, 0.57612 floor to 0.2119 + 0.2119 + 0.5761 = 0.9999; the missing unit goes to the
    # first of the two largest remainders (largest remainder rounding, spec/wire.md §3)
    assert anger.probabilities == (0.212, 0.2119, 0.5761)
    assert anger.score == round((1 + 2 * e) / (2 + e), 4)
    assert anger.label() == "annoyed"
    assert response.input_tokens == decision.input_tokens
