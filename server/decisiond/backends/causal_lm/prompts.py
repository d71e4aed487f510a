"""A request → the token ids a causal LM reads, rendered by transformers' decision module.

Each question (and, with permutations, each cyclic shift of a choice's options) becomes a System
One question of a request handed to :func:`transformers.decision.prepare_inputs`: the prompts, their
read positions and the option labels are exactly those of ``pipeline("decision")``. What is added
here is the split of every prompt of a request into a *shared prefix* (the token ids common to all
of the request's prompts and to a probe prompt with the same state: the system text and the state)
and one *row* per prompt (its remaining ids). The split is taken on token ids, so prefix + row is
always the pipeline's prompt, token for token, whatever the tokenizer merges at the boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase
from transformers.decision import DecisionConfig, prepare_inputs
from transformers.decision import Question as TemplateQuestion

from ...render import Question
from ..statements import positive_question

#: The probe question whose prompt bounds the shared prefix at the end of the state.
PROBE = {"type": "noul", "instructions": "\x00"}


@dataclass(frozen=True)
class Prompt:
    """One prompt of a request, as transformers renders it.

    Attributes:
        ids (tuple[int, ...]): every token id of the prompt (``L`` tokens).
        reads (tuple[int, ...]): positions whose next-token logits answer, one per question of the prompt.
        questions (tuple[TemplateQuestion, ...]): transformers' questions, in read order.
        inputs (dict[str, Any]): the tensors ``prepare_inputs`` gave (for models with a decision head).
    """

    ids: tuple[int, ...]
    reads: tuple[int, ...]
    questions: tuple[TemplateQuestion, ...]
    inputs: dict[str, Any]


def cyclic_shifts(size: int, permutations: int) -> list[int]:
    """The shifts of an ``size``-option choice read for ``permutations`` averaged readings.

    Shifts are spread evenly over the options (``round(i · size / permutations)``), distinct, and start
    with 0 (the order as sent); never more than ``size`` of them.

    Example:
        >>> cyclic_shifts(4, 2), cyclic_shifts(3, 8)
        ([0, 2], [0, 1, 2])
    """
    count = min(size, permutations)
    return sorted({round(i * size / count) % size for i in range(count)})


def _template_question(question: Question, shift: int) -> dict[str, Any]:
    """A question in the request form of transformers' decision module, options rotated by ``shift``."""
    if question.kind == "noul":
        criteria = {option.key: option.description for option in question.options}
        return {"type": "noul", "instructions": question.instructions, "criteria": criteria}
    options = question.options[shift:] + question.options[:shift]
    if question.kind == "choice":
        return {
            "type": "choice",
            "instructions": question.instructions,
            "criteria": {option.key: option.description for option in options},
        }
    return {"type": "score", "instructions": question.instructions, "criteria": [o.description for o in options]}


def asked_positively(question: Question) -> Question | None:
    """The positive question a negated noul is asked as under ``negation = "complement"``, or None.

    Example:
        >>> from decisiond.render import Option
        >>> sides = (Option("false", None), Option("true", None))
        >>> asked_positively(Question("noul", "Is it not late?", sides)).instructions
        'Is it late?'
    """
    if question.kind != "noul" or not isinstance(question.instructions, str):
        return None
    positive = positive_question(question.instructions)
    return Question("noul", positive.text, question.options) if positive.negated else None


def template_request(
    state: Any,
    questions: Sequence[Question],
    permutations: int,
    *,
    complement_negations: bool = False,
    choices_by_key: bool = False,
) -> tuple[dict[str, Any], dict[str, tuple[int, int]], frozenset[int]]:
    """The request transformers renders, which question and shift each of its names stands for, and
    which nouls were asked positively in place of their negation (their yes and no are swapped back).

    Only choices are read under several shifts: a noul's labels mean yes and no, and a score's
    order is part of its meaning. With ``complement_negations``, a negated noul ("Is it not late?")
    is asked positively ("Is it late?", :func:`~decisiond.backends.statements.positive_question`)
    and answered with the complement, so a question and its negation sum to 1. With
    ``choices_by_key``, a choice's options are shown sorted by key (then shifted), so the order a
    client sends them in changes nothing; answers still map to the options by key.
    """
    entries: dict[str, Any] = {}
    owners: dict[str, tuple[int, int]] = {}
    negated: set[int] = set()
    for index, question in enumerate(questions):
        positive = asked_positively(question) if complement_negations else None
        if positive is not None:
            question = positive
            negated.add(index)
        if choices_by_key and question.kind == "choice":
            question = Question("choice", question.instructions, tuple(sorted(question.options, key=lambda o: o.key)))
        shifts = cyclic_shifts(question.size, permutations) if question.kind == "choice" else [0]
        for shift in shifts:
            name = f"{index}.{shift}"
            entries[name] = _template_question(question, shift)
            owners[name] = (index, shift)
    return {"state": state, "questions": entries}, owners, frozenset(negated)


def render(config: DecisionConfig, tokenizer: PreTrainedTokenizerBase, request: dict[str, Any]) -> list[Prompt]:
    """The prompts of ``request`` through :func:`transformers.decision.prepare_inputs`.

    Raises:
        ValueError: transformers refused the request (e.g. more options than the model has labels).
    """
    prompts = []
    for inputs, questions in prepare_inputs(config, request, tokenizer):
        ids = tuple(inputs["input_ids"][0].tolist())
        marks = torch.as_tensor(inputs["marks"]).reshape(-1).tolist()
        prompts.append(Prompt(ids, tuple(int(m) - 1 for m in marks), tuple(questions), inputs))
    return prompts


def shared_prefix(prompts: Sequence[Prompt], probe: Sequence[int]) -> int:
    """Length of the token prefix common to every prompt and the probe, leaving every read in its row.

    Returns:
        int: ``P`` with ``0 ≤ P ≤ min(first read of each prompt)``.
    """
    limit = min(min(prompt.reads) for prompt in prompts)
    length = 0
    sequences = [prompt.ids for prompt in prompts] + [tuple(probe)]
    while length < limit and all(len(s) > length and s[length] == sequences[0][length] for s in sequences):
        length += 1
    return length


def slot_map(question: Question) -> dict[str, int]:
    """Option key (as transformers names options: ``true``/``false``, a choice key, ``"0"``…) → slot index."""
    return {option.key: index for index, option in enumerate(question.options)}
