"""The box readout against hand-computed values, and properties that must hold for any candidates."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decisiond.readout import BoxCandidates, combine, read, read_boxes


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _candidates(logits: list[float], boxes: list[list[float]], sizes: list[int] | None = None) -> BoxCandidates:
    return BoxCandidates(torch.tensor(logits), torch.tensor(boxes), sizes or [len(logits)])


def test_one_candidate_is_the_answer_and_its_sigmoid_the_confidence() -> None:
    r = read_boxes(_candidates([1.3], [[0.1, 0.2, 0.6, 0.7]]), [1.0])
    assert r.edges == [pytest.approx([0.1, 0.2, 0.6, 0.7], abs=1e-7)]
    assert r.confidence == [pytest.approx(_sigmoid(1.3), abs=1e-7)]  # 0.785835


def test_two_candidates_at_equal_weight_average_their_edges() -> None:
    # p = (0.5, 0.5): top = (0 + 0.2)/2, left = (0 + 0.6)/2, bottom = (0.4 + 0.8)/2, right = (0.4 + 1)/2
    r = read_boxes(_candidates([2.0, 2.0], [[0.0, 0.0, 0.4, 0.4], [0.2, 0.6, 0.8, 1.0]]), [1.0])
    assert r.edges == [pytest.approx([0.1, 0.3, 0.6, 0.7], abs=1e-7)]
    assert r.confidence == [pytest.approx(_sigmoid(2.0), abs=1e-7)]  # the best candidate's score, 0.880797


def test_degenerate_boxes_give_a_degenerate_expectation() -> None:
    # logits (0, ln 3) → p = (1/4, 3/4); two zero-area boxes (points) at 0 and 0.4 → 0.3 on every edge
    r = read_boxes(_candidates([0.0, math.log(3.0)], [[0.0] * 4, [0.4] * 4]), [1.0])
    assert r.edges == [pytest.approx([0.3] * 4, abs=1e-6)]
    assert r.confidence == [pytest.approx(0.75, abs=1e-6)]  # σ(ln 3) = 3/4


def test_edges_are_clipped_to_the_picture() -> None:
    r = read_boxes(_candidates([0.0], [[-0.2, -0.1, 1.3, 0.9]]), [1.0])
    assert r.edges == [pytest.approx([0.0, 0.0, 1.0, 0.9], abs=1e-7)]


def test_temperature_scales_both_the_softmax_and_the_confidence() -> None:
    # T = 2: logits (0, 2) → softmax(0, 1) = (0.268941, 0.731059); confidence σ(2/2) = 0.731059
    r = read_boxes(_candidates([0.0, 2.0], [[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]), [2.0])
    assert r.edges == [pytest.approx([_sigmoid(1.0)] * 4, abs=1e-6)]
    assert r.confidence == [pytest.approx(_sigmoid(1.0), abs=1e-6)]


def test_refusals() -> None:
    with pytest.raises(ValueError, match="at least one candidate"):
        read_boxes(_candidates([], [], [0]), [1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive temperatures"):
        read_boxes(_candidates([1.0], [[0.0] * 4]), [0.0])
    with pytest.raises(ValueError, match="boxes of shape"):
        read_boxes(BoxCandidates(torch.zeros(2), torch.zeros(3, 4), [2]), [1.0])


def test_combine_puts_box_and_slot_questions_back_in_question_order() -> None:
    slots = read(torch.tensor([0.0, 1.0, 2.0, 0.0, 0.0]), [2, 3], [1.0, 1.0])
    boxes = read_boxes(_candidates([0.0, 5.0], [[0.1] * 4, [0.9] * 4], [1, 1]), [1.0, 1.0])
    out = combine([True, False, True, False], slots, boxes)
    assert out.box == [pytest.approx([0.1] * 4), None, pytest.approx([0.9] * 4), None]
    assert out.box_confidence == [pytest.approx(0.5), None, pytest.approx(_sigmoid(5.0)), None]
    assert out.probabilities[1] == slots.probabilities[0] and out.probabilities[3] == slots.probabilities[1]
    assert out.probabilities[0] == [] and out.winner[3] == 0
    assert out.slice(2, 4).box == out.box[2:4]


_logit = st.floats(-30, 30, allow_nan=False, width=32)
_edge = st.floats(-0.5, 1.5, allow_nan=False, width=32)
_question = st.lists(st.tuples(_logit, st.tuples(_edge, _edge, _edge, _edge)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_question, st.floats(0.05, 5.0)), min_size=1, max_size=6))
def test_any_batch_gives_edges_and_confidence_in_range_and_each_question_as_alone(
    questions: list[tuple[list[tuple[float, tuple[float, float, float, float]]], float]],
) -> None:
    def candidates(qs: list[tuple[list[tuple[float, tuple[float, ...]]], float]]) -> BoxCandidates:
        flat = [c for q, _ in qs for c in q]
        return BoxCandidates(
            torch.tensor([c[0] for c in flat]), torch.tensor([list(c[1]) for c in flat]), [len(q) for q, _ in qs]
        )

    batch = read_boxes(candidates(questions), [t for _, t in questions])
    for i, question in enumerate(questions):
        alone = read_boxes(candidates([question]), [question[1]])
        assert batch.edges[i] == pytest.approx(alone.edges[0], abs=1e-6)
        assert batch.confidence[i] == pytest.approx(alone.confidence[0], abs=1e-6)
        assert all(0.0 <= e <= 1.0 for e in batch.edges[i]) and 0.0 <= batch.confidence[i] <= 1.0
        lows = [min(c[1][j] for c in question[0]) for j in range(4)]
        highs = [max(c[1][j] for c in question[0]) for j in range(4)]
        for j in range(4):  # an expectation lies between its candidates (then clipped)
            lo, hi = min(max(lows[j], 0.0), 1.0), min(max(highs[j], 0.0), 1.0)
            assert lo - 1e-5 <= batch.edges[i][j] <= hi + 1e-5
