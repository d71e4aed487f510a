"""A Python client for any System One decision server: decisiond, a hosted service, or a replica.

Needs only pydantic and httpx (it never imports torch or the server)::

    from decisiond.client import Choice, DecisionClient, DecisionRequest, Noul, Score

    request = DecisionRequest(
        "I was charged twice for one order and I need the duplicate refunded today.",
        {
            "department": Choice("Which team should handle this ticket?",
                                 {"billing": "Payments, invoicing, refunds", "technical": None, "other": None}),
            "is_urgent": Noul.of("Does the ticket communicate time pressure?"),
            "frustration": Score.of("How frustrated is the customer?", "Calm", "Concerned but civil", "Very angry"),
        },
    )
    with DecisionClient("http://127.0.0.1:8000") as client:
        response = client.decide(None, request)
    response.choice("department").choice      # 'billing'

Modules: :mod:`~decisiond.client.vocabulary` (questions, request, answers),
:mod:`~decisiond.client.codec` (``encode``/``decode``, ``DecisionResponse``),
:mod:`~decisiond.client.http` (the clients), :mod:`~decisiond.client.typed` (typed decisions),
:mod:`~decisiond.client.errors`.
"""

from __future__ import annotations

from . import typed
from .codec import PATH, DecisionResponse, decode, encode, request_from_wire
from .errors import DecisionAPIError, DecisionClientError, DecisionConnectionError, DecodeError, NoAnswerError
from .http import AsyncDecisionClient, DecisionClient, ModelInfo
from .typed import questions_of, read_typed, request_for
from .vocabulary import (
    Answer,
    Choice,
    ChoiceAnswer,
    DecisionRequest,
    Noul,
    NoulAnswer,
    Question,
    Score,
    ScoreAnswer,
)

__all__ = [
    "PATH",
    "Answer",
    "AsyncDecisionClient",
    "Choice",
    "ChoiceAnswer",
    "DecisionAPIError",
    "DecisionClient",
    "DecisionClientError",
    "DecisionConnectionError",
    "DecisionRequest",
    "DecisionResponse",
    "DecodeError",
    "ModelInfo",
    "NoAnswerError",
    "Noul",
    "NoulAnswer",
    "Question",
    "Score",
    "ScoreAnswer",
    "decode",
    "encode",
    "questions_of",
    "read_typed",
    "request_for",
    "request_from_wire",
    "typed",
]
