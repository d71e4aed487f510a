"""Readout → wire answers: rounding, winners and confidences from unrounded numbers."""

from __future__ import annotations

from decisiond.answers import to_answers
from decisiond.readout import Readout
from decisiond.render import Option, Question


def test_winner_and_confidence_come_from_unrounded_numbers() -> None:
    # two options within rounding of each other: the winner is the unrounded larger one
    q = Question("choice", None, (Option("a", None), Option("b", None)))
    r = Readout([[0.49999, 0.50001]], [1], [0.50001], [0.00002], [0.0])
    answer = to_answers(["q"], [q], r)["q"]
    assert answer == {"type": "choice", "choice": "b", "probabilities": {"a": 0.5, "b": 0.5}, "confidence": 0.0}


def test_noul_and_score_shapes() -> None:
    noul = Question("noul", "?", (Option("false", None), Option("true", None)))
    score = Question("score", None, (Option("0", "Calm"), Option("1", {"x": 1})))
    r = Readout([[0.123456, 0.876544], [0.25, 0.75]], [1, 1], [0.876544, 0.75], [0.0, 0.0], [0.0, 0.5])
    answers = to_answers(["n", "s"], [noul, score], r)
    assert answers["n"] == {"type": "noul", "noul": 0.8765}
    assert answers["s"] == {
        "type": "score",
        "score": 0.75,
        "legend": {"0": "Calm", "1": {"x": 1}},
        "probabilities": {"0": 0.25, "1": 0.75},
        "confidence": 0.5,
    }
