"""The System One wire as pydantic types, and every validation rule of spec/wire.md §2 and §5.

Schema errors (wrong JSON types, a missing or unknown ``type``, a null level, map-form score
criteria, an empty ``questions``) are raised by pydantic and answered 422 in FastAPI's shape.
Limits that depend on server settings are checked by :func:`check_limits`: an empty id or option
key, a noul with nothing to ask and too many questions are 400 ``api_usage_error``; too many options
or levels are 422 in FastAPI's shape (see :class:`~decisiond.errors.LimitError`). A lone surrogate
anywhere is a 422 naming its place (:mod:`decisiond.wire_unicode`). Nothing here knows of tensors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from .errors import ApiUsageError, LimitError
from .wire_unicode import invalid_unicode_at

#: Text the model reads: a string, or an object or array rendered as JSON. Never a number or bool.
Text = StrictStr | dict[str, Any] | list[Any]

QuestionType = Literal["noul", "choice", "score", "box"]


class _Lenient(BaseModel):
    """Unknown fields are ignored (spec §2)."""

    model_config = ConfigDict(extra="ignore")


class NoulCriteria(_Lenient):
    """What a yes and a no mean; either side may be absent or null."""

    true: Text | None = None
    false: Text | None = None


class NoulQuestion(_Lenient):
    """Is this true? Answered with the probability of yes."""

    type: Literal["noul"]
    instructions: Text | None = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(_Lenient):
    """Which one of these options? Option key → description (``null``: the key is read)."""

    type: Literal["choice"]
    instructions: Text | None = None
    criteria: dict[str, Text | None] = Field(min_length=1)


class ScoreQuestion(_Lenient):
    """Where on this ordered scale? Levels lowest first; level i has index i."""

    type: Literal["score"]
    instructions: Text | None = None
    criteria: list[Text] = Field(min_length=1)


class BoxQuestion(_Lenient):
    """Where in the image is this? No criteria: the instructions say what to locate (Jev 1.14; the
    official SDK's ``BoxQuestion``). Only a model that locates things answers it (see
    :attr:`decisiond.backends.Backend.question_types`); any other refuses it with 400."""

    type: Literal["box"]
    instructions: Text | None = None


Question = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion | BoxQuestion, Field(discriminator="type")]


class ImageAsset(_Lenient):
    """One entry of the ``assets`` map: an image placed where its placeholder appears."""

    type: StrictStr
    format: StrictStr
    data_base64: StrictStr


class DecisionRequest(_Lenient):
    """The body of ``POST /v1/systemone``."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """Refuse a lone UTF-16 surrogate anywhere (422 naming the field by its place, never by a key's
        text: :func:`~decisiond.wire_unicode.invalid_unicode_at`), before any field is read: a
        tokenizer or the response encoder would raise on one (a 5xx)."""
        where = invalid_unicode_at(data)
        if where is not None:
            raise PydanticCustomError(
                "string_unicode",
                "invalid Unicode at {field}: a lone UTF-16 surrogate; send text that encodes to UTF-8",
                {"field": where},
            )
        return data

    model: StrictStr | None = Field(default=None, description="absent, jev-latest or an alias: the default model")
    state: Text = Field(description="what the questions are about: a string, an object or an array")
    questions: dict[str, Question] = Field(min_length=1, description="question id → question, answered in order")
    images: list[Any] | None = Field(default=None, description="base64 data URLs of images")
    assets: dict[str, Any] | None = Field(default=None, description="placeholder → {type, format, data_base64}")
    audio: Any = Field(default=None, description="refused unless the model reads audio")
    video: Any = Field(default=None, description="refused unless the model reads video")

    def media_kinds(self) -> list[str]:
        """The kinds of media this request carries (``image``, ``audio``, ``video``)."""
        kinds = []
        if self.images or self.assets:
            kinds.append("image")
        if self.audio not in (None, [], {}):
            kinds.append("audio")
        if self.video not in (None, [], {}):
            kinds.append("video")
        return kinds


class NoulAnswer(BaseModel):
    """The probability that the statement is true."""

    type: Literal["noul"] = "noul"
    noul: float = Field(ge=0, le=1)


class ChoiceAnswer(BaseModel):
    """The winning option, a probability per option in the order asked, and the confidence."""

    type: Literal["choice"] = "choice"
    choice: str
    probabilities: dict[str, float]
    confidence: float = Field(ge=0, le=1)


class ScoreAnswer(BaseModel):
    """The expected level (fractional), the legend, a probability per level, and the confidence."""

    type: Literal["score"] = "score"
    score: float
    legend: dict[str, Any]
    probabilities: dict[str, float]
    confidence: float = Field(ge=0, le=1)


class BoxCoordinates(BaseModel):
    """A box's edges as fractions of the image's height (``top``, ``bottom``) and width (``left``,
    ``right``) from its top-left corner, each in [0, 1] (spec/wire.md §8)."""

    top: float = Field(ge=0, le=1)
    bottom: float = Field(ge=0, le=1)
    left: float = Field(ge=0, le=1)
    right: float = Field(ge=0, le=1)


class BoxAnswer(BaseModel):
    """Where the thing asked for is: each edge the expected value of its predicted position, and a
    confidence (null when the model gives none)."""

    type: Literal["box"] = "box"
    box: BoxCoordinates
    confidence: float | None = Field(ge=0, le=1)


Answer = Annotated[NoulAnswer | ChoiceAnswer | ScoreAnswer | BoxAnswer, Field(discriminator="type")]


class Usage(BaseModel):
    """Tokens the model read for the whole request; a decision model writes none."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(default=0, ge=0)


class DecisionResponse(BaseModel):
    """The 200 body of ``POST /v1/systemone``: one answer per question id, in request order."""

    model: str
    answers: dict[str, Answer]
    usage: Usage
    x_latency_ms: float


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models``."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    release_date: str


class ModelList(BaseModel):
    """The body of ``GET /v1/models``."""

    models: list[ModelCard]


class ErrorDetail(BaseModel):
    """The ``detail`` of every error body other than a 422."""

    error_type: str
    message: str


class ErrorBody(BaseModel):
    """``{"detail": {"error_type", "message"}}``."""

    detail: ErrorDetail


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def describe_id(question_id: str) -> str:
    """A question id as it may appear in a message: quoted, cut to 80 characters."""
    shown = question_id if len(question_id) <= 80 else question_id[:77] + "..."
    return repr(shown)


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value: 0 for a scalar, 1 for a flat array or object (iterative,
    so a deep value costs no recursion).

    Example:
        >>> json_depth({"a": [1, {"b": []}]})
        3
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return deepest


def _check_depth(request: DecisionRequest, max_depth: int) -> None:
    state_depth = json_depth(request.state)
    if state_depth > max_depth:
        raise ApiUsageError(
            f"the state is nested {state_depth} levels deep; the limit is {max_depth} (--max-json-depth)"
        )
    for question_id, question in request.questions.items():
        criteria = getattr(question, "criteria", None)  # a box has none
        if isinstance(criteria, NoulCriteria):
            criteria = [criteria.true, criteria.false]
        if json_depth([question.instructions, criteria]) - 1 > max_depth:
            raise ApiUsageError(
                f"question {describe_id(question_id)} is nested deeper than {max_depth} levels (--max-json-depth)"
            )


def check_limits(
    request: DecisionRequest,
    *,
    max_questions: int,
    max_options: int,
    max_levels: int,
    max_depth: int = 64,
) -> None:
    """Apply the semantic limits of spec/wire.md §2 and §5.

    Args:
        request (DecisionRequest): a schema-valid request.
        max_questions (int): questions per request.
        max_options (int): options per choice (at most 255).
        max_levels (int): levels per score.
        max_depth (int, optional): JSON nesting of the state and of each question's texts.
            Defaults to 64.

    Raises:
        ApiUsageError: an empty id or option key (a key of spaces is not empty: spec/wire.md §2), a
            noul with nothing to ask, too many questions, nesting past ``max_depth`` (400).
        LimitError: too many options or levels (422, as jevcompat requires).
    """
    if len(request.questions) > max_questions:
        raise ApiUsageError(f"{len(request.questions)} questions in one request; the limit is {max_questions}")
    for position, (question_id, question) in enumerate(request.questions.items(), start=1):
        if question_id == "":
            raise ApiUsageError("a question id is empty; ids must be non-empty strings")
        if isinstance(question, ChoiceQuestion) and "" in question.criteria:
            option = list(question.criteria).index("") + 1
            raise ApiUsageError(
                f"an option key is empty (option {option} of question {position}); "
                "option keys must be non-empty strings"
            )
        where = f"question {describe_id(question_id)}"
        loc = ["body", "questions", question_id, "criteria"]
        if isinstance(question, ChoiceQuestion) and len(question.criteria) > max_options:
            raise LimitError(loc, f"{where} has {len(question.criteria)} options; a choice takes 1 to {max_options}")
        if isinstance(question, ScoreQuestion) and len(question.criteria) > max_levels:
            raise LimitError(loc, f"{where} has {len(question.criteria)} levels; a score takes 1 to {max_levels}")
        if isinstance(question, NoulQuestion) and _noul_is_empty(question):
            raise ApiUsageError(f"{where} is a noul with neither instructions nor criteria: there is nothing to ask")
    _check_depth(request, max_depth)


def _noul_is_empty(question: NoulQuestion) -> bool:
    criteria = question.criteria
    no_criteria = criteria is None or (_is_blank(criteria.true) and _is_blank(criteria.false))
    return _is_blank(question.instructions) and no_criteria


def check_request_limits(request: DecisionRequest, settings: Any) -> None:
    """:func:`check_limits` with a :class:`~decisiond.config.Settings`' limits (the one place the
    server's settings meet the wire's limits, for a model and for a replay alike).

    Raises:
        ApiUsageError: see :func:`check_limits`.
        LimitError: see :func:`check_limits`.
    """
    check_limits(
        request,
        max_questions=settings.max_questions,
        max_options=settings.max_options,
        max_levels=settings.max_levels,
        max_depth=settings.max_json_depth,
    )
