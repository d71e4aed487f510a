"""From wire questions to what a model reads: internal questions, their slots, and model text.

A *slot* is one thing the model scores for a question: each option of a choice, each level of a
score, and the two sides (false, true) of a noul, in that order. :func:`to_questions` turns the
validated wire request into frozen :class:`Question` records (the id is dropped: it is the
caller's handle and never shown to a model). :func:`to_text` turns structured text into the
string a model reads, and :class:`SlotTemplates` builds the per-slot texts that bi- and
cross-encoders score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .wire import BoxQuestion, ChoiceQuestion, DecisionRequest, NoulQuestion, ScoreQuestion

Kind = Literal["noul", "choice", "score", "box"]
#: The two sides of a noul, in slot order (false first, then true: ``noul`` = p[true]).
NOUL_SIDES = ("false", "true")


@dataclass(frozen=True)
class Option:
    """One slot of a question, as the caller wrote it.

    Attributes:
        key (str): the option key; ``"false"``/``"true"`` for a noul; ``"0"``..``"n-1"`` for a score.
        description (Any): the description text (str, dict or list), or None when absent or null.
        given (bool): whether the caller wrote the description at all; False for a noul side left
            out of ``criteria`` (an explicit ``null`` is given). Defaults to True. Only backends that
            read the two apart (strands-decider) look at it.
    """

    key: str
    description: Any
    given: bool = True


@dataclass(frozen=True)
class Question:
    """One question, stripped of its id.

    Attributes:
        kind (Kind): noul, choice, score or box.
        instructions (Any): text (str, dict or list) or None.
        options (tuple[Option, ...]): the slots in order (none for a box: the backend that locates
            things decides how it reads one).
        image (int | None): for a box question, the index of the image it is about (set by
            :func:`decisiond.box_images.with_box_images`); None otherwise.
    """

    kind: Kind
    instructions: Any
    options: tuple[Option, ...]
    image: int | None = None

    @property
    def size(self) -> int:
        """Number of slots."""
        return len(self.options)


def to_question(question: NoulQuestion | ChoiceQuestion | ScoreQuestion | BoxQuestion) -> Question:
    """Map one validated wire question to its internal form (pure)."""
    if isinstance(question, BoxQuestion):
        return Question("box", question.instructions, ())
    if isinstance(question, NoulQuestion):
        criteria = question.criteria
        sides = tuple(
            Option(side, getattr(criteria, side), side in criteria.model_fields_set)
            if criteria is not None
            else Option(side, None, False)
            for side in NOUL_SIDES
        )
        return Question("noul", question.instructions, sides)
    if isinstance(question, ChoiceQuestion):
        options = tuple(Option(key, text) for key, text in question.criteria.items())
        return Question("choice", question.instructions, options)
    levels = tuple(Option(str(i), level) for i, level in enumerate(question.criteria))
    return Question("score", question.instructions, levels)


def to_questions(request: DecisionRequest) -> tuple[Question, ...]:
    """The request's questions in request order, ids dropped (pure)."""
    return tuple(to_question(q) for q in request.questions.values())


def to_text(value: Any) -> str:
    """Structured text → the string a model reads.

    A string is read as is; an object or array as compact JSON with keys in the order given and
    non-ASCII characters kept (spec/wire.md §2); None as the empty string.

    Example:
        >>> to_text({"b": 1, "a": [True, None]})
        '{"b": 1, "a": [true, null]}'
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class SlotTemplates:
    """How a question's slots become the texts a bi- or cross-encoder scores.

    Each template is a ``str.format`` pattern over ``{instructions}`` (the question's text) and
    ``{option}`` (the slot's own text: ``key: description``, the key alone when the description is
    null, the level text for a score, and for a noul side its description or ``yes_text`` /
    ``no_text`` when that side is not described). Defaults suit embedding and NLI models.
    """

    choice: str = "{instructions} {option}"
    score: str = "{instructions} {option}"
    noul: str = "{instructions} {option}"
    yes_text: str = "Yes."
    no_text: str = "No."

    def option_text(self, question: Question, option: Option) -> str:
        """The text of one slot before it is placed in its template."""
        if question.kind == "noul":
            if option.description is not None and to_text(option.description).strip():
                return to_text(option.description)
            return self.yes_text if option.key == "true" else self.no_text
        if question.kind == "score" or option.description is None:
            return to_text(option.description) if question.kind == "score" else option.key
        return f"{option.key}: {to_text(option.description)}"

    def slot_texts(self, question: Question) -> tuple[str, ...]:
        """The text of every slot of ``question``, in slot order (length ``question.size``)."""
        pattern = getattr(self, question.kind)
        instructions = to_text(question.instructions)
        return tuple(
            pattern.format(instructions=instructions, option=self.option_text(question, option)).strip()
            for option in question.options
        )
