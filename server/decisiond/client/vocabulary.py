"""The decision vocabulary from the client's side: questions, a request, and answers.

Every type is immutable and checks itself at construction: a value that breaks a rule of the
seed codec (``shared/seeds/000-decision-wire.txt``, "Refusals") raises :class:`ValueError`
naming what is wrong, so a request that reaches the wire is one a server of the class can
answer, and an answer that reaches the caller is one it can read.

The client is stricter than decisiond's own wire in one place, on purpose: a :class:`Score`
needs at least two levels (one level is not a scale). A :class:`Noul` may describe both sides,
one or neither, as the wire allows (spec/wire.md §2); a side left out is read by the model as a
bare ``Yes.``/``No.``.

Text (instructions, option descriptions, levels) is a string, or a JSON object or array that the
server renders as JSON for the model. Nothing here does I/O or imports the server.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeAlias

#: Text the model reads: a string, or a JSON object or array (rendered as JSON by the server).
Text: TypeAlias = "str | Mapping[str, Any] | Sequence[Any]"
Kind = Literal["choice", "noul", "score"]


def _short(value: object, limit: int = 80) -> str:
    """``repr`` of a caller's key or id for a message, cut to ``limit`` characters."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def is_blank(value: object) -> bool:
    """True for None, a string of only whitespace, and an empty object or array."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, Mapping | list | tuple):
        return len(value) == 0
    return False


def check_text(value: object, what: str, *, optional: bool = False) -> Any:
    """Check that ``value`` is text (str, object or array) and not blank; return it frozen-ish.

    Args:
        value (object): the caller's value.
        what (str): how a message names it ("instructions", "level 2", ...).
        optional (bool, optional): None is allowed. Defaults to False.

    Returns:
        Any: the value; a list becomes a tuple, a mapping a read-only copy.

    Raises:
        ValueError: None (unless optional), blank, or a number or boolean where text goes.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool | int | float) or not isinstance(value, str | Mapping | list | tuple | type(None)):
        raise ValueError(f"{what} must be text (a string, or a JSON object or array), not {type(value).__name__}")
    if is_blank(value):
        raise ValueError(f"{what} must not be blank")
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def _check_probability(value: object, what: str) -> float:
    """A probability or confidence: a finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is missing or not a number")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValueError(f"{what} is {number}, outside 0 to 1")
    return number


# -- questions -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=True)
class Choice:
    """Pick one of the options the caller names.

    Args:
        instructions (Text): what to decide, never blank.
        options (Mapping[str, Text | None]): option key → description, or None when the key says
            enough; order kept; at least one option; every key non-blank.

    Raises:
        ValueError: blank instructions, no options, a blank key, a description that is not text.

    Example:
        >>> Choice("Which team?", {"billing": "Payments, refunds", "technical": None}).keys
        ('billing', 'technical')
    """

    kind: ClassVar[Kind] = "choice"
    instructions: Text
    options: Mapping[str, Text | None]

    def __post_init__(self) -> None:
        object.__setattr__(self, "instructions", check_text(self.instructions, "the choice's instructions"))
        if not isinstance(self.options, Mapping):
            raise ValueError("a choice's options must be a mapping of option key to description (or None)")
        if not self.options:
            raise ValueError("a choice needs at least one option")
        options: dict[str, Any] = {}
        for key, description in self.options.items():
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"a choice's option key {_short(key)} is blank or not a string")
            options[key] = check_text(description, f"the description of option {_short(key)}", optional=True)
        object.__setattr__(self, "options", MappingProxyType(options))

    @classmethod
    def of(cls, instructions: Text, *keys: str) -> Choice:
        """A choice of option keys alone (no descriptions)."""
        return cls(instructions, dict.fromkeys(keys))

    @property
    def keys(self) -> tuple[str, ...]:
        """The option keys in the order asked."""
        return tuple(self.options)

    def __hash__(self) -> int:
        return hash((self.kind, repr(self.instructions), tuple((k, repr(v)) for k, v in self.options.items())))


@dataclass(frozen=True, eq=True)
class Noul:
    """The probability that a statement is true; what yes and no mean may be described: both, one or neither.

    Args:
        instructions (Text): the statement or question, never blank.
        yes (Text, optional): what a yes means. Defaults to None.
        no (Text, optional): what a no means. Defaults to None.

    Raises:
        ValueError: blank instructions, or a blank side.
    """

    kind: ClassVar[Kind] = "noul"
    instructions: Text
    yes: Text | None = None
    no: Text | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "instructions", check_text(self.instructions, "the noul's instructions"))
        object.__setattr__(self, "yes", check_text(self.yes, "the noul's yes", optional=True))
        object.__setattr__(self, "no", check_text(self.no, "the noul's no", optional=True))

    @classmethod
    def of(cls, instructions: Text) -> Noul:
        """A noul without criteria."""
        return cls(instructions)

    @property
    def described(self) -> bool:
        """Whether yes or no (or both) is described."""
        return self.yes is not None or self.no is not None

    def __hash__(self) -> int:
        return hash((self.kind, repr(self.instructions), repr(self.yes), repr(self.no)))


@dataclass(frozen=True, eq=True)
class Score:
    """A position on an ordered scale: the levels, lowest first, at least two, every level described.

    Args:
        instructions (Text): what to rate, never blank.
        levels (Sequence[Text]): level texts, lowest first; level i has index i.

    Raises:
        ValueError: blank instructions, fewer than two levels, a blank level.
    """

    kind: ClassVar[Kind] = "score"
    instructions: Text
    levels: Sequence[Text]

    def __post_init__(self) -> None:
        object.__setattr__(self, "instructions", check_text(self.instructions, "the score's instructions"))
        if isinstance(self.levels, str | Mapping) or not isinstance(self.levels, Iterable):
            raise ValueError("a score's levels must be a sequence of level texts, lowest first")
        levels = tuple(check_text(level, f"level {i} of the score") for i, level in enumerate(self.levels))
        if len(levels) < 2:
            raise ValueError(f"a score needs at least two levels, lowest first; {len(levels)} given")
        object.__setattr__(self, "levels", levels)

    @classmethod
    def of(cls, instructions: Text, *levels: Text) -> Score:
        """A score of the given levels, lowest first."""
        return cls(instructions, levels)

    def __hash__(self) -> int:
        return hash((self.kind, repr(self.instructions), repr(self.levels)))


Question: TypeAlias = "Choice | Noul | Score"
QUESTION_TYPES = (Choice, Noul, Score)


@dataclass(frozen=True, eq=True)
class DecisionRequest:
    """A state and the questions asked about it, by id, in order.

    Args:
        state (Any): a string (sent as text) or any JSON value: a dict, a list, a pydantic model
            or a dataclass (sent as JSON). Never None.
        questions (Mapping[str, Question]): question id → question; at least one; every id
            non-blank. The id is the caller's handle and is never shown to the model.

    Raises:
        ValueError: a None state, no question, a blank id, a value that is not a question.
    """

    state: Any
    questions: Mapping[str, Question]

    def __post_init__(self) -> None:
        if self.state is None:
            raise ValueError("a decision request needs a state; None was given")
        if not isinstance(self.questions, Mapping):
            raise ValueError("questions must be a mapping of question id to Choice, Noul or Score")
        if not self.questions:
            raise ValueError("a decision request needs at least one question")
        for question_id, question in self.questions.items():
            if not isinstance(question_id, str) or not question_id.strip():
                raise ValueError(f"a question id {_short(question_id)} is blank or not a string")
            if not isinstance(question, QUESTION_TYPES):
                raise ValueError(
                    f"question {_short(question_id)} is a {type(question).__name__}, not a Choice, Noul or Score"
                )
        object.__setattr__(self, "questions", MappingProxyType(dict(self.questions)))

    def __hash__(self) -> int:
        return hash((repr(self.state), tuple(self.questions.items())))


# -- answers ---------------------------------------------------------------------------------


def ranked_of(probabilities: Mapping[Any, float]) -> list[tuple[Any, float]]:
    """Options from most to least likely (ties keep the order asked)."""
    return sorted(probabilities.items(), key=lambda item: -item[1])


def margin_of(probabilities: Mapping[Any, float]) -> float:
    """The probability gap between the two most likely options (the top one's when alone)."""
    top = sorted(probabilities.values(), reverse=True)
    return top[0] - (top[1] if len(top) > 1 else 0.0)


@dataclass(frozen=True, eq=True)
class ChoiceAnswer:
    """The winning option, a probability per option in the order asked, and the confidence.

    The confidence is arithmetic on the distribution, ``(p_max − 1/n) / (1 − 1/n)`` on decisiond
    (spec/wire.md §4): how far the winner stands above uniform. Probabilities are what the
    endpoint reported, numbers to threshold, never a measured rate of being right.

    Args:
        choice (str): the winner, one of the options.
        probabilities (Mapping[str, float]): option → probability in [0, 1], order asked.
        confidence (float): in [0, 1].

    Raises:
        ValueError: a winner not among the options, no options, a probability or the confidence
            missing or outside 0 to 1.
    """

    kind: ClassVar[Kind] = "choice"
    choice: str
    probabilities: Mapping[str, float]
    confidence: float

    def __post_init__(self) -> None:
        if not isinstance(self.probabilities, Mapping) or not self.probabilities:
            raise ValueError("a choice answer needs a probability per option; none were given")
        checked = {
            key: _check_probability(p, f"the probability of option {_short(key)}")
            for key, p in self.probabilities.items()
        }
        if self.choice not in checked:
            raise ValueError(f"the winner {_short(self.choice)} is not among the options answered")
        object.__setattr__(self, "probabilities", MappingProxyType(checked))
        object.__setattr__(self, "confidence", _check_probability(self.confidence, "the choice's confidence"))

    @property
    def probability(self) -> float:
        """The winner's probability."""
        return self.probabilities[self.choice]

    def ranked(self) -> list[tuple[str, float]]:
        """``(option, probability)`` pairs from most to least likely; ties keep the order asked."""
        return ranked_of(self.probabilities)

    def margin(self) -> float:
        """The probability gap between the top two options: how decisive the choice is."""
        return margin_of(self.probabilities)

    def __hash__(self) -> int:
        return hash((self.choice, tuple(self.probabilities.items()), self.confidence))


@dataclass(frozen=True, eq=True)
class NoulAnswer:
    """The probability that the statement is true (near 0.5: the model could not tell).

    A noul has no separate confidence: the number already is the model's belief.

    Raises:
        ValueError: a probability missing or outside 0 to 1.
    """

    kind: ClassVar[Kind] = "noul"
    probability: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "probability", _check_probability(self.probability, "the noul's probability"))

    def __bool__(self) -> bool:
        """True when yes is more likely than no (probability > 0.5)."""
        return self.probability > 0.5


@dataclass(frozen=True, eq=True)
class ScoreAnswer:
    """A probability per level, their weighted position on the scale, the levels, and the confidence.

    Args:
        score (float): ``Σ i·p_i``, fractional, within ``[0, n − 1]``.
        probabilities (Sequence[float]): one per level, lowest first, each in [0, 1].
        legend (Sequence[Text]): the level texts, lowest first (as the question named them).
        confidence (float): in [0, 1].

    Raises:
        ValueError: a probability count other than the level count, a position off the scale, a
            probability or the confidence missing or outside 0 to 1.
    """

    kind: ClassVar[Kind] = "score"
    score: float
    probabilities: Sequence[float]
    legend: Sequence[Text]
    confidence: float

    def __post_init__(self) -> None:
        legend = tuple(self.legend)
        probabilities = tuple(
            _check_probability(p, f"the probability of level {i}") for i, p in enumerate(self.probabilities)
        )
        if not legend:
            raise ValueError("a score answer needs its levels")
        if len(probabilities) != len(legend):
            raise ValueError(f"a score answer has {len(probabilities)} probabilities for {len(legend)} levels")
        if isinstance(self.score, bool) or not isinstance(self.score, int | float) or not math.isfinite(self.score):
            raise ValueError("the score's position is missing or not a number")
        if not 0.0 <= float(self.score) <= len(legend) - 1:
            raise ValueError(f"the score's position {self.score} is off its scale 0 to {len(legend) - 1}")
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "probabilities", probabilities)
        object.__setattr__(self, "legend", legend)
        object.__setattr__(self, "confidence", _check_probability(self.confidence, "the score's confidence"))

    @property
    def top_level(self) -> int:
        """The index of the most probable level (the first on a tie)."""
        return max(range(len(self.probabilities)), key=lambda i: (self.probabilities[i], -i))

    def level(self) -> int:
        """The nearest whole level to the position (halves round up)."""
        return min(int(math.floor(self.score + 0.5)), len(self.legend) - 1)

    def label(self) -> Text:
        """The text of :meth:`level` from the scale."""
        return self.legend[self.level()]

    def __hash__(self) -> int:
        return hash((self.score, self.probabilities, repr(self.legend), self.confidence))


Answer: TypeAlias = "ChoiceAnswer | NoulAnswer | ScoreAnswer"
