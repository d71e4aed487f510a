"""A deterministic backend for tests: exact, hand-computable logits, no model.

The logit of a slot is the number of times its option key occurs in the state's text
(case-insensitive, as whole words). A noul's slots are keyed ``false`` and ``true``; a score's
levels are keyed by their own text. So ``state = "billing billing"`` with options
``billing / technical`` gives logits ``[2, 0]``. Tokens are whitespace-separated words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from ..render import Question, to_text
from .base import Backend, Prepared, TokenLimits, Work

if TYPE_CHECKING:
    from ..config import Settings
    from ..manifest import Manifest


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
        delay_ms (float, optional): simulated model time per forward call (ms), for shutdown and
            load tests of a real server process. Defaults to 0.
    """

    family = "fake"

    def __init__(
        self,
        *,
        temperature: float = 1.0,
        read_images: bool = False,
        delay_ms: float = 0.0,
        **kwargs: object,
    ) -> None:
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {delay_ms!r}")
        modalities = frozenset({"text", "image"}) if read_images else frozenset({"text"})
        super().__init__(temperature=temperature, modalities=modalities, **kwargs)  # type: ignore[arg-type]
        self.delay_s = delay_ms / 1000.0
        self.calls: list[int] = []  # batch sizes seen by forward, for tests

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> FakeBackend:
        """A fake backend from a manifest (``backend = "fake"``): its temperature, whether its
        ``modalities`` include ``image``, and an optional top-level ``delay_ms``. No weights are read.

        Raises:
            ValueError: ``delay_ms`` is not a non-negative number.
        """
        delay = manifest.backend_options.get("delay_ms", 0.0)
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise ValueError(f"{manifest.name}: delay_ms must be a number of ms, got {delay!r}")
        return cls(
            temperature=manifest.temperature,
            read_images="image" in manifest.modalities,
            delay_ms=float(delay),
            device=device,
            dtype=dtype,
            limits=limits,
        )

    def prepare(self, work: Work) -> Prepared:
        state_text = to_text(work.state)
        state_tokens = _word_count(state_text)
        slot_tokens = sum(_word_count(to_text(q.instructions)) + q.size for q in work.questions)
        total = state_tokens + slot_tokens + len(work.images)
        self.limits.check(state_tokens, total)
        return Prepared(
            work, input_tokens=total, cost=max(total, 1), features=keyword_logits(state_text, work.questions)
        )

    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        self.calls.append(len(batch))
        if self.delay_s:
            time.sleep(self.delay_s)
        flat = [logit for prepared in batch for logit in prepared.features]
        return torch.tensor(flat, dtype=torch.float32)
