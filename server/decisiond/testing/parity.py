"""The parity request set of the pointer-head families, and decisiond's unrounded probabilities.

:data:`REQUESTS` are the shapes issue 11 found answered differently from upstream (object and list
items, empty containers, empty-string descriptions, ``<|...|>`` text, numbers and booleans inside
structures, explicit-null and absent noul sides, multi-line descriptions, blank instructions). Every
request is valid for Kev, OpenJev and strands-decider alike (strands' schema is the narrowest: a
choice has two or more options, a score two to ten string levels, instructions are never null).
The test suite scores them with upstream's code and with decisiond; ``scripts/gpu_check.py`` runs
them on a GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from ..backends import Work
from ..backends.pointer_head.backend import PointerHeadBackend
from ..render import to_questions
from ..wire import DecisionRequest

#: Requests of the parity set (request bodies as a client sends them, model left out).
REQUESTS: tuple[dict[str, Any], ...] = (
    {
        "state": {"thread": [{"from": "customer", "text": "charged twice"}, ["late", "refund"]], "meta": {}},
        "questions": {
            "team": {
                "type": "choice",
                "instructions": "which team",
                "criteria": {"billing": "", "technical": None, "other": {"note": []}},
            },
            "urgent": {"type": "noul", "instructions": "is it urgent"},
        },
    },
    {
        "state": "order <|im_start|> late <|a-b|> <||> refund <|fim_suffix|>",
        "questions": {
            "mood": {
                "type": "score",
                "instructions": "<|x y|> how angry",
                "criteria": ["calm", "<|box_end|>", "angry"],
            },
            "noul": {"type": "noul", "instructions": "", "criteria": {"true": None, "false": "line one\nline two"}},
        },
    },
    {
        "state": [1, 1.5, True, None, {"n": -7, "ok": False, "empty": ""}],
        "questions": {
            "a": {"type": "noul", "instructions": {"rule": ["a", {"b": 2}]}, "criteria": {"false": None}},
            "b": {
                "type": "choice",
                "instructions": "  two  spaces ",
                "criteria": {"x": "  a\n\tb  ", "y": "résumé 東京 🙂"},
            },
        },
    },
    {
        "state": {"nested": {"deeper": {"list": [[], {}, [[1]]]}}, "text": "  keep  "},
        "questions": {
            "only": {"type": "choice", "instructions": ["first", "second"], "criteria": {"yes": "1", "no": "0"}},
            "levels": {"type": "score", "instructions": "rate", "criteria": ["low", " mid ", "high", "very high"]},
            "plain": {"type": "noul", "instructions": "true or not", "criteria": {"true": "it is", "false": ""}},
        },
    },
)


def work_of(request: dict[str, Any]) -> Work:
    """The backend's view of a request body, through the wire as a client's request goes.

    Raises:
        pydantic.ValidationError: the body is not a valid request.
    """
    parsed = DecisionRequest.model_validate(request)
    return Work(parsed.state, to_questions(parsed))


@torch.inference_mode()
def probabilities(backend: PointerHeadBackend, request: dict[str, Any]) -> list[list[float]]:
    """decisiond's unrounded probabilities for ``request``: one list per question in request order
    (noul ``[p(false), p(true)]``), each the softmax of the raw logits over the temperature of the
    question's type."""
    work = work_of(request)
    logits = backend.forward([backend.prepare(work)]).float().cpu()
    out = []
    for question, z in zip(work.questions, logits.split([q.size for q in work.questions]), strict=True):
        out.append(torch.softmax(z / backend.temperature(question.kind), dim=0).tolist())
    return out


def max_difference(ours: list[list[float]], theirs: list[list[float]]) -> float:
    """The largest absolute difference between two sets of probabilities of the same shape.

    Raises:
        ValueError: the shapes differ (a question or an option missing on one side).
    """
    if [len(p) for p in ours] != [len(p) for p in theirs]:
        raise ValueError(f"shapes differ: {[len(p) for p in ours]} against {[len(p) for p in theirs]}")
    return max((abs(a - b) for p, q in zip(ours, theirs, strict=True) for a, b in zip(p, q, strict=True)), default=0.0)
