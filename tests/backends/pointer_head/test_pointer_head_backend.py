"""Isolation and caching: every form gives a question the hidden states it has when asked alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from tests.tolerance import PROBABILITY_ATOL, assert_logits_close

from decisiond.backends import Work
from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.errors import MaxTokensExceeded
from decisiond.readout import read
from decisiond.render import Option, Question

STATE = {"ticket": "the customer was charged twice for one order", "priority": "high", "seats": 3}
NOUL = Question("noul", "is it urgent ?", (Option("false", "calm"), Option("true", "deadline today")))
CHOICE = Question(
    "choice",
    "which team should handle it",
    (Option("billing", "refunds"), Option("technical", None), Option("other", "none of the above")),
)
SCORE = Question(
    "score", "how angry", (Option("0", "calm"), Option("1", "concerned but civil"), Option("2", "very angry"))
)
QUESTIONS = (NOUL, CHOICE, SCORE)


def logits(backend: PointerHeadBackend, *works: Work) -> torch.Tensor:
    return backend.forward([backend.prepare(w) for w in works])


def split(flat: torch.Tensor, questions: tuple[Question, ...]) -> list[torch.Tensor]:
    return list(flat.split([q.size for q in questions]))


@pytest.mark.parametrize("name", ["kev", "wev", "strands"])
def test_packed_and_rows_agree(name: str, backends: Callable[..., PointerHeadBackend]) -> None:
    work = Work(STATE, QUESTIONS)
    packed = logits(backends(name, isolation="packed"), work)
    rows = logits(backends(name, isolation="rows"), work)
    assert packed.shape == (8,)
    assert_logits_close(packed, rows)
    assert packed.std() > 0.1  # the comparison is not between constants


@pytest.mark.parametrize("name", ["kev", "kev_hybrid", "strands_hybrid"])
def test_cached_prefix_equals_uncached_rows(name: str, backends: Callable[..., PointerHeadBackend]) -> None:
    prefix = backends(name, isolation="prefix")
    rows = backends(name, isolation="rows")
    work = Work(STATE, QUESTIONS)
    hits = prefix.prefix_hits
    first = logits(prefix, work)
    second = logits(prefix, work)  # the state's cache comes from the LRU; it must not have been mutated
    assert prefix.prefix_hits == hits + 1
    uncached = logits(rows, work)
    assert_logits_close(first, uncached)
    torch.testing.assert_close(second, first, rtol=0, atol=0)


def test_hybrid_defaults_to_prefix_and_refuses_packed(backends: Callable[..., PointerHeadBackend]) -> None:
    assert backends("kev_hybrid").isolation == "prefix"
    assert backends("kev").isolation == "packed"
    with pytest.raises(ValueError, match="hybrid"):
        backends("kev_hybrid", isolation="packed")


@pytest.mark.parametrize(
    "name,isolation", [("kev", "packed"), ("kev_hybrid", "prefix"), ("strands", "packed"), ("wev", "rows")]
)
def test_answers_do_not_move_when_other_questions_change(
    name: str, isolation: str, backends: Callable[..., PointerHeadBackend]
) -> None:
    backend = backends(name, isolation=isolation)
    alone = {q: logits(backend, Work(STATE, (q,))) for q in QUESTIONS}
    for order in [(SCORE, NOUL, CHOICE), (CHOICE, SCORE), (NOUL, CHOICE, SCORE, CHOICE)]:
        for question, got in zip(order, split(logits(backend, Work(STATE, order)), order), strict=True):
            assert_logits_close(got, alone[question])


@pytest.mark.parametrize("name", ["kev", "kev_hybrid"])
def test_a_micro_batch_equals_each_request_alone(name: str, backends: Callable[..., PointerHeadBackend]) -> None:
    backend = backends(name)
    a, b = Work(STATE, (NOUL, CHOICE)), Work("short state", (SCORE,))
    together = logits(backend, a, b)
    assert_logits_close(together, torch.cat([logits(backend, a), logits(backend, b)]))


def test_the_state_changes_the_answer(backends: Callable[..., PointerHeadBackend]) -> None:
    backend = backends("kev")
    assert not torch.allclose(logits(backend, Work("calm", (CHOICE,))), logits(backend, Work(STATE, (CHOICE,))))


def test_temperatures_per_kind_come_from_the_checkpoint(backends: Callable[..., PointerHeadBackend]) -> None:
    assert [backends("kev").temperature(k) for k in ("noul", "choice", "score")] == [2.35, 2.35, 2.35]
    assert [backends("wev").temperature(k) for k in ("noul", "choice", "score")] == [1.7, 1.7, 1.7]
    assert [backends("strands").temperature(k) for k in ("noul", "choice", "score")] == [1.2, 0.9, 1.1]
    overridden = backends("strands", temperature_by_kind={"choice": 3.0})
    assert [overridden.temperature(k) for k in ("noul", "choice", "score")] == [1.2, 3.0, 1.1]


def test_readout_gives_valid_distributions(backends: Callable[..., PointerHeadBackend]) -> None:
    backend = backends("kev")
    flat = logits(backend, Work(STATE, QUESTIONS))
    readout = read(flat, [q.size for q in QUESTIONS], [backend.temperature(q.kind) for q in QUESTIONS])
    for p in readout.probabilities:
        assert abs(sum(p) - 1.0) < PROBABILITY_ATOL and all(0 < x < 1 for x in p)


def test_checkpoint_token_limits_are_enforced(backends: Callable[..., PointerHeadBackend]) -> None:
    backend = backends("wev", max_state_tokens=8)
    with pytest.raises(MaxTokensExceeded, match="at most 8"):
        backend.prepare(Work(STATE, (NOUL,)))
    assert backends("wev").family_limits == {"max_state_tokens": 512, "max_branch_tokens": 256}
    assert backends("strands").family_limits == {"max_prompt_tokens": 3072}
