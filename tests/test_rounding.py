"""Rounding a question's probabilities (spec/wire.md §3): largest remainder in units of 10⁻⁴, so the
rounded values sum to exactly 1, the winner keeps the largest value and nothing rounds to all zeros;
property-tested for 1 to 255 options, and end to end on the fake backend."""

from __future__ import annotations

import math
from decimal import Decimal

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from decisiond.answers import UNITS, round_distribution

weights = st.lists(
    st.one_of(st.floats(min_value=0, max_value=1e6), st.just(0.0), st.floats(min_value=0, max_value=1e-6)),
    min_size=1,
    max_size=255,
)


@settings(max_examples=150, deadline=None)
@given(weights)
def test_rounded_probabilities_sum_to_exactly_one_and_keep_the_winner(raw: list[float]) -> None:
    total = math.fsum(raw)
    assume(total > 0 and math.isfinite(total))
    p = [w / total for w in raw]
    winner = max(range(len(p)), key=lambda i: (p[i], -i))  # first argmax, as the readout picks it
    rounded = round_distribution(p, winner)
    units = [round(value * UNITS) for value in rounded]
    assert all(abs(value * UNITS - unit) < 1e-9 for value, unit in zip(rounded, units, strict=True))  # 4 decimals
    assert sum(units) == UNITS  # exactly 1 in decimals
    assert sum(Decimal(repr(value)) for value in rounded) == 1  # the JSON text sums to exactly 1
    assert abs(sum(rounded) - 1.0) < 1e-12  # a client's float sum: 1 up to binary representation
    assert max(rounded) == rounded[winner]  # the winner keeps the largest rounded value
    assert any(rounded)  # never all zeros
    assert all(0.0 <= value <= 1.0 for value in rounded)
    assert all(abs(r - q) < 1.0 / UNITS for r, q in zip(rounded, p, strict=True))  # within one unit


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        ([1 / 3, 1 / 3, 1 / 3], [0.3334, 0.3333, 0.3333]),  # one by one: 0.9999
        ([1 / 7] * 7, [0.1429] * 4 + [0.1428] * 3),  # one by one: 1.0003
        ([1e-9] * 3 + [1 - 3e-9], [0.0, 0.0, 0.0, 1.0]),
        ([1.0], [1.0]),
    ],
)
def test_known_cases(p: list[float], expected: list[float]) -> None:
    winner = max(range(len(p)), key=lambda i: (p[i], -i))
    assert round_distribution(p, winner) == expected


def test_a_distribution_that_cannot_be_rounded_is_refused() -> None:
    with pytest.raises(ValueError):
        round_distribution([0.0, 0.0], 0)
    with pytest.raises(ValueError):
        round_distribution([], 0)


async def test_choices_over_http_sum_to_one_for_every_option_count(fake_client: httpx.AsyncClient) -> None:
    """Regression: probabilities rounded one by one summed to 1.0001 or 0.9999, which strict clients refuse."""
    for n in (1, 2, 3, 7, 255):
        criteria = {f"o{i}": None for i in range(n)}
        state = " ".join(f"o{i}" for i in range(0, n, 2))  # several options tie
        resp = await fake_client.post(
            "/v1/systemone", json={"state": state, "questions": {"q": {"type": "choice", "criteria": criteria}}}
        )
        assert resp.status_code == 200, resp.text
        answer = resp.json()["answers"]["q"]
        units = [round(v * UNITS) for v in answer["probabilities"].values()]
        assert sum(units) == UNITS, n
        assert answer["probabilities"][answer["choice"]] == max(answer["probabilities"].values())
