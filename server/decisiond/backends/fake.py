"""A deterministic backend for tests: exact, hand-computable logits, no model.

The logit of a slot is the number of times its option key occurs in the state's text
(case-insensitive, as whole words). A noul's slots are keyed ``false`` and ``true``; a score's
levels are keyed by their own text. So ``state = "billing billing"`` with options
``billing / technical`` gives logits ``[2, 0]``. Tokens are whitespace-separated words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from ..render import Question, to_text
from .base import Backend, Prepared, Work


def _word_count(text: str) -> int:
    return len(text.split())


def _slot_keys(question: Question) -> list[str]:
    if question.kind == "score":
        return [to_text(option.description) for option in question.options]
    return [option.key for option in question.options]


def keyword_logits(state_text: str, questions: Sequence[Question]) -> list[float]:
    """Occurrences of each slot key in ``state_text`` as whole words, ignoring case (pure).

    Example:
        >>> from decisiond.render import Question, Option
        >>> keyword_logits("Billing, billing!", [Question("choice", None, (Option("billing", None),))])
        [2.0]
    """
    lowered = state_text.lower()
    logits: list[float] = []
    for question in questions:
        for key in _slot_keys(question):
            pattern = r"(?<!\w)" + re.escape(key.lower()) + r"(?!\w)"
            logits.append(float(len(re.findall(pattern, lowered))) if key else 0.0)
    return logits


class FakeBackend(Backend):
    """Keyword-count logits (see the module docstring); optionally reads images.

    Args:
        temperature (float, optional): applied by the readout. Defaults to 1.0.
        read_images (bool, optional): accept image media; each image counts as one token and
            does not move a logit. Defaults to False.
    """

    family = "fake"

    def __init__(self, *, temperature: float = 1.0, read_images: bool = False, **kwargs: object) -> None:
        modalities = frozenset({"text", "image"}) if read_images else frozenset({"text"})
        super().__init__(temperature=temperature, modalities=modalities, **kwargs)  # type: ignore[arg-type]
        self.calls: list[int] = []  # batch sizes seen by forward, for tests

    def prepare(self, work: Work) -> Prepared:
        state_text = to_text(work.state)
        state_tokens = _word_count(state_text)
        slot_tokens = sum(_word_count(to_text(q.instructions)) + q.size for q in work.questions)
        total = state_tokens + slot_tokens + len(work.images)
        self.limits.check(state_tokens, total)
        return Prepared(work, input_tokens=total, cost=max(total, 1), features=keyword_logits(state_text, work.questions))

    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        self.calls.append(len(batch))
        flat = [logit for prepared in batch for logit in prepared.features]
        return torch.tensor(flat, dtype=torch.float32)
