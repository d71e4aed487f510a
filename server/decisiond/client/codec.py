"""The codec every server of the class speaks: :func:`encode` a request, :func:`decode` a response.

``encode(model_id, request)`` is the body of ``POST /v1/systemone`` (spec/wire.md §2): the state
as given (a string as text, anything else as JSON), each question under its id in its shape (a
choice's criteria an object of option → description, a noul's optional ``{"true", "false"}``
criteria, a score's criteria an array of levels). A None model id leaves ``model`` out.

``decode(body, request)`` reads the answers back strictly against what was asked and leniently
about everything else, the rule of the seed codec (``shared/seeds/000-decision-wire.txt``):
unknown fields anywhere are ignored; a missing answer, a winner not among the options, a missing
probability, a noul or a score that is not a number, a missing confidence, a probability outside
0 to 1 raise :class:`DecodeError` naming the question id and the field, never quoting the state.

:func:`request_from_wire` reads a wire-shaped request body back into a :class:`DecisionRequest`
(``decisiond ask --request``, recorded requests).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from .errors import DecodeError, NoAnswerError
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

A = TypeVar("A", ChoiceAnswer, NoulAnswer, ScoreAnswer)

#: The request path of the class.
PATH = "/v1/systemone"


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON types: strings stay strings; pydantic models, dataclasses, enums,
    tuples and read-only mappings become what pydantic's serializer writes."""
    if isinstance(value, str):
        return value
    return to_jsonable_python(value, fallback=_fallback)


def _fallback(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise ValueError(f"a {type(value).__name__} cannot be sent as JSON")


def encode_question(question: Question) -> dict[str, Any]:
    """One question in its wire shape (pure)."""
    body: dict[str, Any] = {"type": question.kind, "instructions": to_json_value(question.instructions)}
    if isinstance(question, Choice):
        body["criteria"] = {key: to_json_value(value) for key, value in question.options.items()}
    elif isinstance(question, Score):
        body["criteria"] = [to_json_value(level) for level in question.levels]
    elif question.described:  # a side not described is left out, as the wire allows (spec/wire.md §2)
        sides = {"true": question.yes, "false": question.no}
        body["criteria"] = {side: to_json_value(text) for side, text in sides.items() if text is not None}
    return body


def encode(model_id: str | None, request: DecisionRequest) -> dict[str, Any]:
    """The request body every endpoint of the class reads.

    Args:
        model_id (str | None): the server's model id; None leaves ``model`` out (the body as
            counted before the model is resolved).
        request (DecisionRequest): the state and questions.

    Returns:
        dict[str, Any]: ``{"model"?, "state", "questions"}``, JSON-ready.

    Example:
        >>> encode(None, DecisionRequest("hi", {"q": Noul.of("Is it a greeting?")}))
        {'state': 'hi', 'questions': {'q': {'type': 'noul', 'instructions': 'Is it a greeting?'}}}
    """
    body: dict[str, Any] = {} if model_id is None else {"model": model_id}
    body["state"] = to_json_value(request.state)
    body["questions"] = {question_id: encode_question(q) for question_id, q in request.questions.items()}
    return body


@dataclass(frozen=True)
class DecisionResponse:
    """The answers to one request, by question id in the order asked, and what came beside them.

    A response whose call answered nothing (see :meth:`failed`) raises its reason, a
    :class:`NoAnswerError`, when an answer is read; ``ok`` and ``reason`` say so without raising.

    Attributes:
        model (str | None): the model that answered, when the server said.
        input_tokens (int | None): ``usage.input_tokens``, when the server said.
        body (Mapping[str, Any]): the body as the server sent it (raw answers, extra fields).
        reason (str | None): why the call answered nothing; None when it answered.
    """

    _answers: Mapping[str, Answer] = field(default_factory=dict, repr=False)
    model: str | None = None
    input_tokens: int | None = None
    body: Mapping[str, Any] = field(default_factory=dict, repr=False)
    reason: str | None = None

    @classmethod
    def failed(cls, reason: str) -> DecisionResponse:
        """A response to a call that answered nothing; reading an answer raises ``reason``."""
        return cls(reason=reason)

    @property
    def ok(self) -> bool:
        """Whether the call answered."""
        return self.reason is None

    @property
    def answers(self) -> Mapping[str, Answer]:
        """Question id → answer, in the order asked.

        Raises:
            NoAnswerError: the call answered nothing.
        """
        if self.reason is not None:
            raise NoAnswerError(self.reason)
        return MappingProxyType(dict(self._answers))

    def __getitem__(self, question_id: str) -> Answer:
        return self.answers[question_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.answers)

    def __len__(self) -> int:
        return len(self.answers)

    def choice(self, question_id: str) -> ChoiceAnswer:
        """The answer to a choice question. Raises KeyError, TypeError or :class:`NoAnswerError`."""
        return _kind(self[question_id], ChoiceAnswer, question_id)

    def noul(self, question_id: str) -> NoulAnswer:
        """The answer to a noul question. Raises KeyError, TypeError or :class:`NoAnswerError`."""
        return _kind(self[question_id], NoulAnswer, question_id)

    def score(self, question_id: str) -> ScoreAnswer:
        """The answer to a score question. Raises KeyError, TypeError or :class:`NoAnswerError`."""
        return _kind(self[question_id], ScoreAnswer, question_id)


def _kind(answer: Answer, cls: type[A], question_id: str) -> A:
    if not isinstance(answer, cls):
        raise TypeError(f"question {question_id!r} was answered as a {answer.kind}, not a {cls.kind}")
    return answer


# -- decoding --------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite JSON number as float, else None (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _probability(answer: Mapping[str, Any], name: str, question_id: str, where: str | None = None) -> float:
    """``answer[name]`` as a probability in [0, 1], or a :class:`DecodeError` at ``where``."""
    where = where or name
    if name not in answer:
        raise DecodeError("missing", question_id=question_id, field=where)
    number = _number(answer[name])
    if number is None:
        raise DecodeError("not a number", question_id=question_id, field=where)
    if not 0.0 <= number <= 1.0:
        raise DecodeError(f"{number} is outside 0 to 1", question_id=question_id, field=where)
    return number


def _probabilities(answer: Mapping[str, Any], keys: list[str], question_id: str) -> dict[str, float]:
    table = answer.get("probabilities")
    if not isinstance(table, Mapping):
        raise DecodeError("missing or not an object", question_id=question_id, field="probabilities")
    return {key: _probability(table, key, question_id, f"probabilities.{key}") for key in keys}


def _decode_choice(answer: Mapping[str, Any], question: Choice, question_id: str) -> ChoiceAnswer:
    winner = answer.get("choice")
    if not isinstance(winner, str):
        raise DecodeError("missing or not a string", question_id=question_id, field="choice")
    if winner not in question.options:
        raise DecodeError("the winner is not among the options asked", question_id=question_id, field="choice")
    probabilities = _probabilities(answer, list(question.keys), question_id)
    confidence = _probability(answer, "confidence", question_id)
    return ChoiceAnswer(winner, probabilities, confidence)


def _decode_noul(answer: Mapping[str, Any], question_id: str) -> NoulAnswer:
    return NoulAnswer(_probability(answer, "noul", question_id))


def _decode_score(answer: Mapping[str, Any], question: Score, question_id: str) -> ScoreAnswer:
    position = _number(answer.get("score"))
    if position is None:
        raise DecodeError("missing or not a number", question_id=question_id, field="score")
    top = len(question.levels) - 1
    if not 0.0 <= position <= top:
        raise DecodeError(f"position {position} is off the scale 0 to {top}", question_id=question_id, field="score")
    table = _probabilities(answer, [str(i) for i in range(len(question.levels))], question_id)
    confidence = _probability(answer, "confidence", question_id)
    return ScoreAnswer(position, list(table.values()), question.levels, confidence)


def decode_answer(answer: Any, question: Question, question_id: str) -> Answer:
    """One answer read strictly against its question.

    Raises:
        DecodeError: the answer is missing, of another type, or lacks a field (see the module).
    """
    if not isinstance(answer, Mapping):
        raise DecodeError("no answer to this question", question_id=question_id, field="answers")
    sent_type = answer.get("type")
    if sent_type is not None and sent_type != question.kind:
        raise DecodeError(
            f"answered as {str(sent_type)[:20]!r}, asked as {question.kind!r}", question_id=question_id, field="type"
        )
    if isinstance(question, Choice):
        return _decode_choice(answer, question, question_id)
    if isinstance(question, Score):
        return _decode_score(answer, question, question_id)
    return _decode_noul(answer, question_id)


def decode(body: Any, request: DecisionRequest) -> DecisionResponse:
    """Read a response body back strictly against ``request``.

    Args:
        body (Any): the parsed JSON of the response.
        request (DecisionRequest): what was asked.

    Returns:
        DecisionResponse: an answer per question id in the order asked; ``model`` and
        ``input_tokens`` when the body carries them, else None.

    Raises:
        DecodeError: a body that is not an object, has no ``answers`` object, or does not answer a
            question in its shape; names the question id and the field, never the state.
    """
    if not isinstance(body, Mapping):
        raise DecodeError("the body is not a JSON object", field="body")
    answers = body.get("answers")
    if not isinstance(answers, Mapping):
        raise DecodeError("the body has no answers object", field="answers")
    decoded = {qid: decode_answer(answers.get(qid), question, qid) for qid, question in request.questions.items()}
    model = body.get("model")
    usage = body.get("usage")
    tokens = usage.get("input_tokens") if isinstance(usage, Mapping) else None
    return DecisionResponse(
        _answers=MappingProxyType(decoded),
        model=model if isinstance(model, str) else None,
        input_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        body=MappingProxyType(dict(body)),
    )


# -- reading a wire request ------------------------------------------------------------------


def question_from_wire(question_id: str, body: Any) -> Question:
    """A wire-shaped question (spec/wire.md §2) as a :class:`Choice`, :class:`Noul` or :class:`Score`.

    Raises:
        ValueError: an unknown type or a shape the vocabulary refuses, naming the question id.
    """
    if not isinstance(body, Mapping):
        raise ValueError(f"question {question_id!r} is not an object")
    kind = body.get("type")
    instructions: Any = body.get("instructions")
    criteria = body.get("criteria")
    try:
        if kind == "choice":
            if not isinstance(criteria, Mapping):
                raise ValueError("a choice's criteria must be an object of option key to description")
            return Choice(instructions, criteria)
        if kind == "score":
            if not isinstance(criteria, list):
                raise ValueError("a score's criteria must be an array of levels, lowest first")
            return Score(instructions, criteria)
        if kind == "noul":
            sides = criteria if isinstance(criteria, Mapping) else {}
            return Noul(instructions, yes=sides.get("true"), no=sides.get("false"))
    except ValueError as exc:
        raise ValueError(f"question {question_id!r}: {exc}") from exc
    raise ValueError(f"question {question_id!r} has type {str(kind)[:20]!r}; expected choice, noul or score")


def request_from_wire(body: Any) -> tuple[str | None, DecisionRequest]:
    """A wire-shaped request body as ``(model id or None, DecisionRequest)``.

    Raises:
        ValueError: not an object, no state, no questions, or a question the vocabulary refuses.
    """
    if not isinstance(body, Mapping):
        raise ValueError("a request must be a JSON object with state and questions")
    questions = body.get("questions")
    if not isinstance(questions, Mapping):
        raise ValueError("a request needs a questions object: question id to question")
    model = body.get("model")
    parsed = {qid: question_from_wire(qid, q) for qid, q in questions.items()}
    return (model if isinstance(model, str) else None), DecisionRequest(body.get("state"), parsed)
