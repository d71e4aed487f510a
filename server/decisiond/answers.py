"""Readout → wire answers: the pure mapping from unrounded numbers to the JSON of spec/wire.md §3.

``choice``, ``score`` and ``confidence`` come from the unrounded distribution (the readout); only
the numbers written out are rounded, to :data:`DECIMALS` places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .readout import Readout
from .render import Question

#: Decimal places of every probability, noul, score and confidence on the wire (spec §3).
DECIMALS = 4


def _round(value: float) -> float:
    return round(value, DECIMALS)


def to_answer(question: Question, readout: Readout, index: int) -> dict[str, Any]:
    """The wire answer of question ``index`` of ``readout`` (pure).

    Args:
        question (Question): the question, for its kind, option keys and levels.
        readout (Readout): the unrounded readout the question belongs to.
        index (int): the question's position in ``readout``.

    Returns:
        dict[str, Any]: ``{"type": "noul", "noul"}``, ``{"type": "choice", "choice",
        "probabilities", "confidence"}``, ``{"type": "score", "score", "legend",
        "probabilities", "confidence"}`` or ``{"type": "box", "box": {"top", "bottom", "left",
        "right"}, "confidence"}`` (spec/wire.md §8).
    """
    if question.kind == "box":
        top, left, bottom, right = (_round(edge) for edge in readout.box[index] or ())
        confidence = readout.box_confidence[index]
        return {
            "type": "box",
            "box": {"top": top, "bottom": bottom, "left": left, "right": right},
            "confidence": None if confidence is None else _round(confidence),
        }
    p = readout.probabilities[index]
    if question.kind == "noul":
        return {"type": "noul", "noul": _round(p[1])}
    probabilities = {option.key: _round(value) for option, value in zip(question.options, p, strict=True)}
    if question.kind == "choice":
        return {
            "type": "choice",
            "choice": question.options[readout.winner[index]].key,
            "probabilities": probabilities,
            "confidence": _round(readout.choice_confidence[index]),
        }
    return {
        "type": "score",
        "score": _round(readout.position[index]),
        "legend": {option.key: option.description for option in question.options},
        "probabilities": probabilities,
        "confidence": _round(readout.score_confidence[index]),
    }


def to_answers(ids: Sequence[str], questions: Sequence[Question], readout: Readout) -> dict[str, dict[str, Any]]:
    """Every answer of one request, keyed by question id in request order (pure)."""
    return {qid: to_answer(q, readout, i) for i, (qid, q) in enumerate(zip(ids, questions, strict=True))}
