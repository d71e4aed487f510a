"""Scripted answers for exact application tests: rules in a TOML or YAML file, no model.

A rules file (``decisiond serve --scripted rules.toml``, or a manifest with ``backend =
"scripted"`` whose ``weights.path`` is the rules file) says which probabilities to give::

    model = "jev-scripted"            # the model name answers carry (default "scripted")

    [default]                         # questions no rule matches
    mode = "uniform"                  # uniform | fixed | refuse (404 naming the question)
    # yes = 0.2                       # fixed: p(yes) of a noul
    # probabilities = {other = 0.7}   # fixed: named options or levels; the rest share what is left

    [[rules]]                         # the first rule that matches a question answers it
    question = "department"           # the question id (exact)
    # instructions = "Which team?"    # or its instructions (exact text)
    # type = "choice"                 # or its type
    state = "(?i)charged|refund"      # a regular expression searched in the state's text
    probabilities = {billing = 0.9, technical = 0.05}   # "other" gets the 0.05 left

    [[rules]]
    question = "is_urgent"
    yes = 0.85                        # a noul's probability of yes

    [[rules]]
    question = "frustration"
    answer = "Very angry"             # probability 1 for one option or level (or true/false)

Score levels are named by their text or their index (``"0"``). Named probabilities that add up to
more than 1 are refused when the file is read; when every option is named they are normalised.
The backend returns ``log(p)`` as logits (``-inf`` for 0) at temperature 1, so the shared readout
gives back exactly ``p``, and confidences and scores follow spec/wire.md §4. A rule that matches a
question but names an option it lacks is a 400 naming the rule.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..config import Settings
from ..errors import ApiUsageError, NotFound
from ..manifest import Manifest, Weights
from ..render import Kind, Question, to_text
from .base import Backend, Prepared, TokenLimits, Work

#: Probabilities may add up to 1 within this much rounding.
SUM_TOLERANCE = 1e-6


class RulesError(ValueError):
    """A rules file cannot be read; the message names the file and the rule."""


class Distribution(BaseModel):
    """What to answer: exactly one of ``yes``, ``probabilities`` or ``answer`` (all optional in a default)."""

    model_config = ConfigDict(extra="forbid")

    yes: float | None = Field(default=None, ge=0.0, le=1.0, description="a noul's probability of yes")
    probabilities: dict[str, float] | None = Field(default=None, description="option key or level → probability")
    answer: str | bool | None = Field(default=None, description="one option or level (or true/false) gets 1")

    @field_validator("probabilities")
    @classmethod
    def _in_range(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return value
        if not value:
            raise ValueError("probabilities name no option")
        if any(not 0.0 <= p <= 1.0 for p in value.values()):
            raise ValueError("every probability must be in [0, 1]")
        if sum(value.values()) > 1.0 + SUM_TOLERANCE:
            raise ValueError(f"probabilities add up to {sum(value.values()):.6g}, more than 1")
        return value

    def kinds(self) -> frozenset[Kind]:
        """The question types this distribution can answer."""
        if self.yes is not None or isinstance(self.answer, bool):
            return frozenset({"noul"})
        return frozenset({"noul", "choice", "score"})


class Rule(Distribution):
    """One rule: matchers (all given ones must hold) and a distribution."""

    question: str | None = Field(default=None, description="question id, exact")
    instructions: str | None = Field(default=None, description="question instructions, exact text")
    type: Kind | None = None
    state: str | None = Field(default=None, description="regular expression searched in the state's text")

    @field_validator("state")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"state is not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_answer(self) -> Rule:
        given = [name for name in ("yes", "probabilities", "answer") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"a rule gives exactly one of yes, probabilities or answer (got {given or 'none'})")
        if self.question is None and self.instructions is None and self.type is None and self.state is None:
            raise ValueError("a rule needs at least one of question, instructions, type or state to match on")
        return self

    def matches(self, question_id: str | None, question: Question, state_text: str) -> bool:
        """Whether every matcher given holds for this question and state."""
        if question.kind not in self.kinds() or (self.type is not None and question.kind != self.type):
            return False
        if self.question is not None and question_id != self.question:
            return False
        if self.instructions is not None and to_text(question.instructions).strip() != self.instructions.strip():
            return False
        return self.state is None or re.search(self.state, state_text) is not None


class Default(Distribution):
    """What questions no rule matches get."""

    mode: Literal["uniform", "fixed", "refuse"] = "uniform"


class Rules(BaseModel):
    """A whole rules file."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="scripted", min_length=1, description="the model name answers carry")
    description: str = "scripted answers for tests"
    default: Default = Field(default_factory=Default)
    rules: list[Rule] = Field(default_factory=list)


def read_rules(path: Path) -> Rules:
    """Read a ``.toml``, ``.yaml`` or ``.yml`` rules file.

    Raises:
        RulesError: the file is missing, unparsable, or a rule is invalid (naming the rule number, from 1).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise RulesError(f"no rules file at {path}") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml  # type: ignore[import-untyped]  # a dependency of transformers, declared too

            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # tomllib and yaml raise their own error types
        raise RulesError(f"{path} is not valid {path.suffix.lstrip('.').upper() or 'TOML'}: {exc}") from None
    try:
        return Rules.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_where(e["loc"]) + e["msg"] for e in exc.errors())
        raise RulesError(f"{path}: {problems}") from None


def _where(loc: tuple[Any, ...]) -> str:
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        rest = ".".join(str(part) for part in loc[2:] if not str(part).startswith("function"))
        return f"rule {loc[1] + 1}{' ' + rest if rest else ''}: "
    return ".".join(map(str, loc)) + ": " if loc else ""


def _slot_names(question: Question) -> list[tuple[str, ...]]:
    """The names each slot answers to: key (noul, choice); level text and index (score)."""
    if question.kind == "score":
        return [(to_text(option.description), option.key) for option in question.options]
    return [(option.key,) for option in question.options]


def _named(question: Question, named: dict[str, float], *, lenient: bool, who: str) -> list[float | None]:
    names = _slot_names(question)
    slots: list[float | None] = [None] * question.size
    for name, p in named.items():
        index = next((i for i, aliases in enumerate(names) if aliases[0] == name), None)  # text first, then index
        index = next((i for i, aliases in enumerate(names) if name in aliases), None) if index is None else index
        if index is None:
            if lenient:
                continue
            known = ", ".join(aliases[0] for aliases in names)
            raise ApiUsageError(
                f"{who} names {name[:80]!r}, which this {question.kind} question does not have ({known[:300]})"
            )
        slots[index] = p
    return slots


def _spread(slots: list[float | None]) -> list[float]:
    """Named probabilities kept, what is left shared by the unnamed; normalised when all are named."""
    named = sum(p for p in slots if p is not None)
    unnamed = sum(1 for p in slots if p is None)
    if unnamed == 0:
        return [p / named for p in slots] if named > 0 else [1.0 / len(slots)] * len(slots)  # type: ignore[operator]
    share = max(0.0, 1.0 - named) / unnamed
    return [share if p is None else p for p in slots]


def distribution(question: Question, given: Distribution, *, lenient: bool = False, who: str = "a rule") -> list[float]:
    """The probabilities of ``question``'s slots that ``given`` asks for (pure).

    Args:
        question (Question): the question (slots: noul (false, true), choice options, score levels).
        given (Distribution): ``yes``, ``probabilities`` or ``answer``; none of them means uniform.
        lenient (bool, optional): ignore names the question lacks (a default). Defaults to False.
        who (str, optional): how to name ``given`` in an error. Defaults to "a rule".

    Returns:
        list[float]: ``question.size`` probabilities adding up to 1.

    Raises:
        ApiUsageError: ``given`` names an option or level the question lacks (unless lenient).
    """
    if question.kind == "noul" and given.yes is not None:
        return [1.0 - given.yes, given.yes]
    if question.kind == "noul" and isinstance(given.answer, bool):
        return [0.0, 1.0] if given.answer else [1.0, 0.0]
    if given.answer is not None:
        return _spread(
            [
                1.0 if p is not None else 0.0
                for p in _named(question, {str(given.answer): 1.0}, lenient=lenient, who=who)
            ]
        )
    if given.probabilities is not None:
        return _spread(_named(question, given.probabilities, lenient=lenient, who=who))
    return [1.0 / question.size] * question.size


def to_logits(probabilities: Sequence[float]) -> list[float]:
    """``log(p)`` per slot, ``-inf`` for 0: a softmax at temperature 1 gives back ``p`` (pure)."""
    return [math.log(p) if p > 0 else -math.inf for p in probabilities]


class ScriptedBackend(Backend):
    """Answers from :class:`Rules` (see the module docstring). Tokens are whitespace-separated words.

    Args:
        rules (Rules): the rules.
        source (str, optional): the rules file, for messages. Defaults to "the rules".
    """

    family = "scripted"

    def __init__(self, rules: Rules, *, source: str = "the rules", **kwargs: Any) -> None:
        kwargs["temperature"] = 1.0  # logits are log-probabilities: any other temperature would bend them
        super().__init__(**kwargs)
        self.rules = rules
        self.source = source

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, *, device: torch.device, dtype: torch.dtype, limits: TokenLimits, settings: Settings
    ) -> ScriptedBackend:
        """Read the rules file the manifest's ``weights.path`` names.

        Raises:
            RulesError: the rules file is missing or invalid.
        """
        path = manifest.weights_path()
        return cls(read_rules(path), source=path.name, device="cpu", limits=limits)

    def answer(self, question_id: str | None, question: Question, state_text: str) -> list[float]:
        """The probabilities of one question: the first matching rule's, else the default's.

        Raises:
            ApiUsageError: the matching rule names an option the question lacks.
            NotFound: no rule matches and the default mode is ``refuse``.
        """
        for number, rule in enumerate(self.rules.rules, 1):
            if rule.matches(question_id, question, state_text):
                return distribution(question, rule, who=f"rule {number} of {self.source}")
        default = self.rules.default
        if default.mode == "refuse":
            shown = repr(question_id[:80]) if question_id is not None else "a question"
            raise NotFound(
                f"no rule of {self.source} matches question {shown} ({question.kind}) and the default is refuse"
            )
        if default.mode == "uniform":
            return [1.0 / question.size] * question.size
        return distribution(question, default, lenient=True)

    def prepare(self, work: Work) -> Prepared:
        state_text = to_text(work.state)
        ids: Sequence[str | None] = work.question_ids or [None] * len(work.questions)
        logits = [
            logit
            for question_id, question in zip(ids, work.questions, strict=True)
            for logit in to_logits(self.answer(question_id, question, state_text))
        ]
        state_tokens = len(state_text.split())
        total = state_tokens + sum(len(to_text(q.instructions).split()) + q.size for q in work.questions)
        self.limits.check(state_tokens, total)
        return Prepared(work, input_tokens=total, cost=max(total, 1), features=logits)

    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        return torch.tensor([logit for prepared in batch for logit in prepared.features], dtype=torch.float32)


def scripted_manifest(rules_path: Path) -> Manifest:
    """A manifest serving ``rules_path`` with the scripted backend, named by the file's ``model``.

    Raises:
        RulesError: the rules file is missing or invalid (read now, before any port is bound).
    """
    path = rules_path.expanduser().resolve()
    rules = read_rules(path)
    return Manifest(
        name=rules.model,
        description=rules.description,
        backend="scripted",
        weights=Weights(path=str(path)),
        temperature=1.0,
        source=path,
    )
