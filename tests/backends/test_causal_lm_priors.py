"""Contextual calibration (``content_free``) on a tiny random Llama in float32: a corrected question is its
uncorrected reading less its reading about the content-free state, read once per question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from decisiond.backends.base import Work
from decisiond.backends.causal_lm import CausalLMBackend, CausalLMOptions
from decisiond.readout import read
from decisiond.render import Option, Question
from decisiond.testing.tiny_causal_lm import build_tiny_causal_lm
from tests.tolerance import TINY_REDUCTION, logit_atol

SIDES = (Option("false", None), Option("true", None))
NOUL = Question("noul", "Is a refund asked for?", SIDES)
NEGATED = Question("noul", "Is a refund not asked for?", SIDES)
CHOICE = Question(
    "choice", "Which team?", (Option("billing", "Payments"), Option("technical", None), Option("x", None))
)
SCORE = Question("score", "How angry?", (Option("0", "Calm"), Option("1", "Civil"), Option("2", "Very")))
STATE = "I was charged twice, please refund me."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama-priors"))


def _backend(model: Path, **options: Any) -> CausalLMBackend:
    return CausalLMBackend(
        AutoModelForCausalLM.from_pretrained(model),
        AutoTokenizer.from_pretrained(model),
        options=CausalLMOptions(**options),
    )


def assert_difference_close(actual: torch.Tensor, expected: torch.Tensor, *parts: torch.Tensor) -> None:
    """A logit difference against its reference: each of the two terms may be off by its own float32 bound."""
    atol = 2 * logit_atol(torch.cat([p.reshape(-1) for p in parts]), TINY_REDUCTION)
    torch.testing.assert_close(actual.double(), expected.double(), rtol=0, atol=atol)


def _logits(backend: CausalLMBackend, state: Any, questions: tuple[Question, ...]) -> torch.Tensor:
    return backend.forward([backend.prepare(Work(state, questions))])


def test_a_choice_is_corrected_by_its_content_free_reading_and_other_types_are_not(tiny: Path) -> None:
    plain = _backend(tiny, permutations=3)
    corrected = _backend(tiny, permutations=3, content_free="N/A")
    questions = (NOUL, CHOICE, SCORE)
    uncorrected = _logits(plain, STATE, questions)
    free = _logits(plain, "N/A", (CHOICE,))
    expected = uncorrected.clone()
    expected[2:5] -= free
    assert_difference_close(_logits(corrected, STATE, questions), expected, uncorrected, free)
    assert not torch.allclose(free, torch.zeros(3))  # the correction is not a no-op on this model


def test_the_content_free_reading_is_read_once_per_question(tiny: Path) -> None:
    backend = _backend(tiny, content_free="N/A")
    first = _logits(backend, STATE, (CHOICE,))
    again = _logits(backend, "Another state entirely.", (CHOICE, CHOICE))
    stats = backend.cache_stats()["content_free"]
    assert stats["entries"] == 1 and stats["misses"] == 1 and stats["hits"] == 2
    renamed = Question(
        "choice", "Which team?", (Option("billing", "Payments"), Option("tech", None), Option("x", None))
    )
    _logits(backend, STATE, (renamed,))
    assert backend.cache_stats()["content_free"]["entries"] == 2  # another question, another reading
    assert first.shape == (3,) and again.shape == (6,)


def test_a_corrected_answer_does_not_depend_on_its_batch(tiny: Path) -> None:
    backend = _backend(tiny, content_free="N/A", permutations=2)
    alone = _logits(backend, STATE, (CHOICE,))
    fresh = _backend(tiny, content_free="N/A", permutations=2)
    batch = fresh.forward(
        [fresh.prepare(Work("Something else.", (SCORE, CHOICE))), fresh.prepare(Work(STATE, (CHOICE,)))]
    )
    assert_difference_close(batch[6:], alone, alone)


def test_a_negated_noul_still_sums_to_one_with_its_affirmative_when_nouls_are_corrected(tiny: Path) -> None:
    backend = _backend(tiny, content_free="N/A", content_free_types=("noul",), negation="complement")
    logits = _logits(backend, STATE, (NOUL, NEGATED))
    yes = [p[1] for p in read(logits, [2, 2], [1.0, 1.0]).probabilities]
    assert yes[0] + yes[1] == pytest.approx(1.0, abs=1e-5)
    plain = _backend(tiny, negation="complement")
    state, free = _logits(plain, STATE, (NOUL,)), _logits(plain, "N/A", (NOUL,))
    assert_difference_close(logits[:2], state - free, state, free)


def test_a_bad_content_free_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="content_free_types"):
        CausalLMOptions(content_free="N/A", content_free_types=("box",))
