"""The readout against hand-computed values (spec/wire.md §4) and properties that must always hold."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decisiond.readout import choice_confidence, pad_segments, read, score_confidence, score_position

from .tolerance import EPS32


def _p(*rows: list[float]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0.0] * (width - len(r)) for r in rows], dtype=torch.float64)


def test_choice_confidence_check_values() -> None:
    p = _p([0.88, 0.12, 0.0], [0.90, 0.06, 0.04], [1 / 3, 1 / 3, 1 / 3])
    got = choice_confidence(p, torch.tensor([3, 3, 3])).tolist()
    assert got == pytest.approx([0.82, 0.85, 0.0], abs=1e-9)


def test_choice_confidence_one_option_is_one() -> None:
    assert choice_confidence(_p([1.0]), torch.tensor([1])).tolist() == [1.0]


def test_choice_confidence_two_options() -> None:
    # (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert choice_confidence(_p([0.3, 0.7]), torch.tensor([2])).tolist() == pytest.approx([0.4])


def test_score_check_value() -> None:
    p = _p([0.0, 0.95, 0.05])
    assert score_position(p).tolist() == pytest.approx([1.05])
    # mode 1; spread = 0.05 * 1; D = floor(9/4)/3 = 2/3; 1 - 0.05 / (2/3) = 0.925
    assert score_confidence(p, torch.tensor([3])).tolist() == pytest.approx([0.925])


def test_score_confidence_even_levels_and_floor_at_zero() -> None:
    # n = 4: D = floor(16/4)/4 = 1. p = (0.5, 0, 0, 0.5): mode 0, spread = 0.5*3 = 1.5 -> max(0, -0.5) = 0
    assert score_confidence(_p([0.5, 0.0, 0.0, 0.5]), torch.tensor([4])).tolist() == [0.0]
    # p = (0.1, 0.8, 0.1, 0): mode 1, spread = 0.1 + 0.1 = 0.2 -> 0.8
    assert score_confidence(_p([0.1, 0.8, 0.1, 0.0]), torch.tensor([4])).tolist() == pytest.approx([0.8])


def test_score_one_level() -> None:
    r = read(torch.tensor([3.0]), [1], [1.0])
    assert r.probabilities == [[1.0]]
    assert r.position == [0.0]
    assert r.score_confidence == [1.0]
    assert r.choice_confidence == [1.0]


def test_tie_takes_the_first_option() -> None:
    r = read(torch.tensor([1.0, 2.0, 2.0, 0.5, 0.5]), [3, 2], [1.0, 1.0])
    assert r.winner == [1, 0]
    assert r.choice_confidence[1] == 0.0


def test_segment_softmax_by_hand() -> None:
    # question 1: logits (0, ln 3) at T=1 -> (0.25, 0.75); question 2: logits (2, 0) at T=2 -> softmax(1, 0)
    r = read(torch.tensor([0.0, math.log(3.0), 2.0, 0.0]), [2, 2], [1.0, 2.0])
    assert r.probabilities[0] == pytest.approx([0.25, 0.75], abs=1e-6)
    e = math.e
    assert r.probabilities[1] == pytest.approx([e / (e + 1), 1 / (e + 1)], abs=1e-6)
    assert r.winner == [1, 0]


def test_temperature_never_moves_the_winner() -> None:
    logits = torch.tensor([0.3, 1.2, -0.4])
    cold, hot = read(logits, [3], [0.1]), read(logits, [3], [10.0])
    assert cold.winner == hot.winner == [1]
    assert cold.probabilities[0][1] > hot.probabilities[0][1]


def test_pad_segments_layout() -> None:
    padded = pad_segments(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1, 3]))
    assert padded[0, 0] == 1.0 and torch.isinf(padded[0, 1:]).all()
    assert padded[1].tolist() == [2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    ("sizes", "temps", "n"),
    [([2, 0], [1.0, 1.0], 2), ([2], [0.0], 2), ([2, 2], [1.0], 4), ([3], [1.0], 2)],
)
def test_bad_arguments_are_refused(sizes: list[int], temps: list[float], n: int) -> None:
    with pytest.raises(ValueError):
        read(torch.zeros(n), sizes, temps)


_logit = st.floats(min_value=-30, max_value=30, allow_nan=False)
_question = st.lists(_logit, min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(questions=st.lists(_question, min_size=1, max_size=8), temperature=st.floats(0.05, 5.0))
def test_properties(questions: list[list[float]], temperature: float) -> None:
    flat = torch.tensor([x for q in questions for x in q])
    sizes = [len(q) for q in questions]
    r = read(flat, sizes, [temperature] * len(sizes))
    for probs, n, pos, cc, sc, w in zip(
        r.probabilities, sizes, r.position, r.choice_confidence, r.score_confidence, r.winner, strict=True
    ):
        assert len(probs) == n
        assert sum(probs) == pytest.approx(1.0, abs=1e-5)
        assert all(0.0 <= p <= 1.0 for p in probs)
        assert 0.0 <= cc <= 1.0 and 0.0 <= sc <= 1.0
        rounding = n * (n - 1) * EPS32  # Σ i·p_i: n float32 products of at most n − 1, summed
        assert -rounding <= pos <= n - 1 + rounding
        assert probs[w] == max(probs)


@settings(max_examples=100, deadline=None)
@given(logits=st.lists(_logit, min_size=2, max_size=10), data=st.data())
def test_permuting_options_permutes_probabilities(logits: list[float], data: st.DataObject) -> None:
    perm = data.draw(st.permutations(range(len(logits))))
    a = read(torch.tensor(logits), [len(logits)], [1.0])
    b = read(torch.tensor([logits[i] for i in perm]), [len(logits)], [1.0])
    # The softmax's sum of n exponentials is taken in another order: relative error n·eps32, plus the
    # exponential's and the division's own rounding.
    bound = (len(logits) + 2) * EPS32
    assert [b.probabilities[0][j] for j in range(len(perm))] == pytest.approx(
        [a.probabilities[0][i] for i in perm], abs=bound
    )
    # confidence = (p_max − 1/n) / (1 − 1/n): the error of p_max grows by at most n / (n − 1) ≤ 2
    assert a.choice_confidence[0] == pytest.approx(b.choice_confidence[0], abs=2 * bound + EPS32)


def test_one_question_alone_or_in_a_batch_reads_the_same() -> None:
    alone = read(torch.tensor([0.2, 0.9, -1.0]), [3], [0.5])
    batch = read(torch.tensor([5.0, -5.0, 0.2, 0.9, -1.0, 1.0]), [2, 3, 1], [1.0, 0.5, 2.0])
    assert batch.slice(1, 2).probabilities == alone.probabilities
    assert batch.slice(1, 2).winner == alone.winner
