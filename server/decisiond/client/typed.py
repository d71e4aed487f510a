"""Typed decisions: a question set declared as a pydantic model, answered into an instance of it.

Each field of the model is one question; its type is the kind of question and the answer that
lands in it, and its ``description`` is the question's instructions. The question id is the
field's alias, else its name. The Python counterpart of the Genkit plugin's decision types
(``shared/seeds/001-genkit-systemone-plugin.txt``)::

    class Dept(StrEnum):                      # a choice's options: the enum's values, in order
        BILLING = "billing"
        TECHNICAL = "technical"
        OTHER = "other"

        @classmethod
        def criteria(cls) -> dict[Dept, str]:  # optional: a description per option
            return {cls.BILLING: "Payments, invoicing, refunds", cls.OTHER: "None of the above"}

    class Anger(Enum):                        # a score's levels: the enum's values, lowest first
        CALM = "Calm"
        CIVIL = "Concerned but civil"
        ANGRY = "Very angry"

    class Triage(BaseModel):
        department: Choice[Dept] = Field(description="Which team should handle this ticket?")
        is_urgent: Noul = Field(description="Does the ticket communicate time pressure?")
        frustration: Score[Anger] = Field(description="How frustrated is the customer?")

    triage = client.decide_as(None, Triage, "I was charged twice ...")
    triage.department.choice is Dept.BILLING

Where the options and levels come from:

- ``Choice[E]``: ``E`` is an :class:`~enum.Enum` whose values are strings: each member is an
  option, keyed by its value, in definition order. A ``criteria()`` classmethod on ``E``, when
  present, returns a mapping of member (or value) to description; members it leaves out are
  sent without one (the key says enough).
- ``Score[L]``: ``L`` has a ``levels()`` classmethod returning the level texts, lowest first; or
  ``L`` is an :class:`~enum.Enum` whose values are the level texts, lowest first.
- ``Noul``: no criteria. ``NoulOf[C]``: ``C.criteria()`` returns ``(yes, no)``, what each side means.

These answer types are distinct from the vocabulary's question types of the same names
(:class:`decisiond.client.Choice` is a question; :class:`decisiond.client.typed.Choice` is a
typed answer field), as in the two seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from . import vocabulary as v
from .codec import DecisionResponse

E = TypeVar("E", bound=Enum)
L = TypeVar("L")
C = TypeVar("C")
T = TypeVar("T", bound=BaseModel)


class Choice(BaseModel, Generic[E]):
    """The answer to a choice over the members of ``E``.

    Attributes:
        choice (E): the winning member.
        probabilities (dict[E, float]): a probability per member, in definition order.
        confidence (float): how far the winner stands above uniform, in [0, 1].
    """

    model_config = ConfigDict(frozen=True)

    choice: E
    probabilities: dict[E, float]
    confidence: float = Field(ge=0, le=1)

    @property
    def probability(self) -> float:
        """The winner's probability."""
        return self.probabilities[self.choice]

    def ranked(self) -> list[tuple[E, float]]:
        """``(member, probability)`` pairs from most to least likely; ties keep definition order."""
        return v.ranked_of(self.probabilities)

    def margin(self) -> float:
        """The probability gap between the top two members: how decisive the choice is."""
        return v.margin_of(self.probabilities)


class Noul(BaseModel):
    """The answer to a yes/no question: the probability of yes (near 0.5: the model could not tell)."""

    model_config = ConfigDict(frozen=True)

    probability: float = Field(ge=0, le=1)

    def __bool__(self) -> bool:
        """True when yes is more likely than no."""
        return self.probability > 0.5


class NoulOf(Noul, Generic[C]):
    """A :class:`Noul` whose yes and no are described by ``C.criteria() -> (yes, no)``."""


class Score(BaseModel, Generic[L]):
    """The answer to a score on the levels of ``L``.

    Attributes:
        score (float): the expected level, fractional, within ``[0, n − 1]``.
        probabilities (tuple[float, ...]): one per level, lowest first.
        legend (tuple[Any, ...]): the level texts, lowest first.
        confidence (float): in [0, 1].
    """

    model_config = ConfigDict(frozen=True)

    score: float
    probabilities: tuple[float, ...]
    legend: tuple[Any, ...]
    confidence: float = Field(ge=0, le=1)

    @property
    def top_level(self) -> int:
        """The index of the most probable level (the first on a tie)."""
        return max(range(len(self.probabilities)), key=lambda i: (self.probabilities[i], -i))

    def level(self) -> int:
        """The nearest whole level to the position (halves round up)."""
        return min(int(self.score + 0.5), len(self.legend) - 1)

    def label(self) -> Any:
        """The text of :meth:`level` from the rubric."""
        return self.legend[self.level()]


# -- reading the declaration -----------------------------------------------------------------


def _generic(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(origin, args)`` of a parametrised pydantic generic (``Choice[Dept]``), else ``(annotation, ())``."""
    meta = getattr(annotation, "__pydantic_generic_metadata__", None)
    if meta and meta.get("origin") is not None:
        return meta["origin"], tuple(meta["args"])
    return annotation, ()


def options_of(enum_cls: type[Enum]) -> dict[str, Any]:
    """The options of ``Choice[enum_cls]``: value → description (None when not described).

    Raises:
        ValueError: not an Enum, a value that is not a string, or criteria naming no member.
    """
    if not (isinstance(enum_cls, type) and issubclass(enum_cls, Enum)):
        raise ValueError(f"Choice[...] takes an Enum of option keys, not {enum_cls!r}")
    criteria = getattr(enum_cls, "criteria", None)
    described: Mapping[Any, Any] = dict(criteria()) if callable(criteria) else {}
    options: dict[str, Any] = {}
    for member in enum_cls:
        if not isinstance(member.value, str):
            raise ValueError(f"{enum_cls.__name__}.{member.name} must have a string value: it is the option key")
        options[member.value] = described.get(member, described.get(member.value))
    unknown = [key for key in described if key not in enum_cls.__members__.values() and key not in options]
    if unknown:
        raise ValueError(f"{enum_cls.__name__}.criteria() describes {unknown[0]!r}, which is not a member")
    return options


def levels_of(levels_cls: Any) -> list[Any]:
    """The levels of ``Score[levels_cls]``, lowest first: ``levels_cls.levels()`` or an Enum's values.

    Raises:
        ValueError: neither a ``levels()`` classmethod nor an Enum.
    """
    levels = getattr(levels_cls, "levels", None)
    if callable(levels):
        return list(levels())
    if isinstance(levels_cls, type) and issubclass(levels_cls, Enum):
        return [member.value for member in levels_cls]
    raise ValueError(f"Score[...] takes an Enum of levels or a class with a levels() classmethod, not {levels_cls!r}")


def _question(name: str, annotation: Any, instructions: str | None) -> v.Question:
    if not instructions or not instructions.strip():
        raise ValueError(f"field {name!r} has no description: its description is the question's instructions")
    origin, args = _generic(annotation)
    try:
        if origin is Choice and args:
            return v.Choice(instructions, options_of(args[0]))
        if origin is Score and args:
            return v.Score(instructions, levels_of(args[0]))
        if origin is NoulOf and args:
            criteria = getattr(args[0], "criteria", None)
            if not callable(criteria):
                raise ValueError(
                    f"NoulOf[...] takes a class with a criteria() -> (yes, no) classmethod, not {args[0]!r}"
                )
            yes, no = criteria()
            return v.Noul(instructions, yes=yes, no=no)
        if origin is Noul:
            return v.Noul(instructions)
    except ValueError as exc:
        raise ValueError(f"field {name!r}: {exc}") from exc
    raise ValueError(f"field {name!r} is a {annotation!r}; a decision field is Choice[E], Score[L], Noul or NoulOf[C]")


@lru_cache(maxsize=256)
def questions_of(output: type[BaseModel]) -> dict[str, v.Question]:
    """The questions a typed decision declares, by question id (field alias, else name), in field order.

    Raises:
        ValueError: a field that is not a decision field, or that has no description.
    """
    if not (isinstance(output, type) and issubclass(output, BaseModel)):
        raise ValueError(f"a typed decision is a pydantic model class, not {output!r}")
    if not output.model_fields:
        raise ValueError(f"{output.__name__} declares no question")
    return {
        (info.alias or name): _question(name, info.annotation, info.description)
        for name, info in output.model_fields.items()
    }


def request_for(output: type[BaseModel], state: Any) -> v.DecisionRequest:
    """The request asking ``output``'s questions about ``state``."""
    return v.DecisionRequest(state, questions_of(output))


def _typed_answer(annotation: Any, answer: v.Answer) -> BaseModel:
    origin, args = _generic(annotation)
    if isinstance(answer, v.ChoiceAnswer):
        enum_cls = args[0]
        by_value = {member.value: member for member in enum_cls}
        return annotation(  # type: ignore[no-any-return]
            choice=by_value[answer.choice],
            probabilities={by_value[key]: p for key, p in answer.probabilities.items()},
            confidence=answer.confidence,
        )
    if isinstance(answer, v.ScoreAnswer):
        return annotation(  # type: ignore[no-any-return]
            score=answer.score,
            probabilities=tuple(answer.probabilities),
            legend=tuple(answer.legend),
            confidence=answer.confidence,
        )
    return annotation(probability=answer.probability)  # type: ignore[no-any-return]


def read_typed(output: type[T], response: DecisionResponse) -> T:
    """An instance of ``output`` with every answer of ``response`` in its field.

    Raises:
        NoAnswerError: the response answered nothing.
        KeyError: the response lacks a question ``output`` declares.
    """
    questions_of(output)
    values = {
        (info.alias or name): _typed_answer(info.annotation, response[info.alias or name])
        for name, info in output.model_fields.items()
    }
    return output.model_validate(values)
