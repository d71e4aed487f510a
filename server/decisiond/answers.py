"""Readout → wire answers: the pure mapping from unrounded numbers to the JSON of spec/wire.md §3.

``choice``, ``score`` and ``confidence`` come from the unrounded distribution (the readout); only
the numbers written out are rounded, to :data:`DECIMALS` places. A question's probabilities are
rounded together by :func:`round_distribution`, so that they sum to exactly 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .readout import Readout
from .render import Question

#: Decimal places of every probability, noul, score and confidence on the wire (spec §3).
DECIMALS = 4


#: One unit of the last decimal place: rounded probabilities are whole numbers of 1/UNITS.
UNITS = 10**DECIMALS


def _round(value: float) -> float:
    return round(value, DECIMALS)


def round_distribution(p: Sequence[float], winner: int) -> list[float]:
    """Round a distribution to :data:`DECIMALS` places by the largest remainder method (pure).

    Each value is floored in whole units of 10⁻⁴; the units still missing to make 10⁴ go one each
    to the values with the largest remainders (the winner first on a tie, then the lower index).
    Source: spec/wire.md §3 (Hamilton's largest remainder method, as in apportionment).

    Guarantees: the rounded values, as integers of 10⁻⁴, sum to exactly 10⁴, so the decimals written
    on the wire sum to exactly 1 (a client's float sum is 1 up to binary representation, ~1e-16 per
    value); each differs from its share of ``p`` by less
    than 10⁻⁴; the ``winner`` (an argmax of ``p``) keeps a value no other exceeds; never all zeros.

    Args:
        p (Sequence[float]): ``n ≥ 1`` non-negative numbers with a positive, finite sum (≈ 1; they
            are normalised first).
        winner (int): the index of an argmax of ``p`` (``Readout.winner``).

    Returns:
        list[float]: ``n`` values, each a multiple of 10⁻⁴ in [0, 1].

    Raises:
        ValueError: ``p`` is empty or its sum is not positive and finite.

    Example:
        >>> round_distribution([1 / 3, 1 / 3, 1 / 3], 0)
        [0.3334, 0.3333, 0.3333]
    """
    total = math.fsum(p)
    if not p or not (0 < total < math.inf):
        raise ValueError(f"cannot round a distribution that sums to {total!r}")
    scaled = [value / total * UNITS for value in p]
    units = [math.floor(value) for value in scaled]
    missing = UNITS - sum(units)  # 0 <= missing < n: each floor loses less than one unit
    order = sorted(range(len(p)), key=lambda i: (units[i] - scaled[i], i != winner, i))
    for k in range(missing):
        units[order[k % len(p)]] += 1
    return [unit / UNITS for unit in units]


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
    rounded = round_distribution(p, readout.winner[index])
    probabilities = {option.key: value for option, value in zip(question.options, rounded, strict=True)}
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
