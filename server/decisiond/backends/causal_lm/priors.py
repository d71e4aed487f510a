"""Contextual calibration: what a causal LM answers a question about no state at all, kept per question.

A causal LM read by its label logits favours some options whatever the state: among moderation actions
"warn", among languages "english", among what a shell command does "only reads files". Zhao et al.
(2021, "Calibrate Before Use", §5) remove that prior by reading each question once more about a
*content-free* state such as ``N/A`` and dividing it out: ``p ∝ p(option | state) / p(option | N/A)``.
On slot logits that is a subtraction, ``l − l_free``; with permutations both are means over the same
cyclic shifts, so the subtraction is the mean of the per-shift corrections. A negated noul answered
as a complement is corrected by its complemented content-free reading, so the pair still sums to 1.

The content-free reading depends on the question only, so it is computed once per distinct question,
alone in its own forward (the same bits whatever else a batch holds), and kept in a bounded LRU.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import torch

from ...cache import TensorLRU, digest
from ...render import Question


def question_key(question: Question) -> bytes:
    """The digest a question's content-free reading is kept under: its type, instructions and options
    (keys and descriptions, in order)."""
    options = [[option.key, option.description] for option in question.options]
    text = json.dumps([question.kind, question.instructions, options], ensure_ascii=False, sort_keys=True, default=str)
    return digest(text)


class ContentFreePriors:
    """Each question's slot logits about a content-free state, read once and cached.

    Args:
        read (Callable[[Question], torch.Tensor]): the backend's uncorrected ``[size]`` float32 slot
            logits of one question about the content-free state.
        kinds (frozenset[str]): the question types corrected (others get zeros).
        max_entries (int): questions kept.
        max_bytes (int): bytes kept (keys included).
    """

    def __init__(
        self,
        read: Callable[[Question], torch.Tensor],
        kinds: frozenset[str],
        max_entries: int = 4096,
        max_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self._read = read
        self.kinds = kinds
        self.cache: TensorLRU[bytes] = TensorLRU(max_entries, max_bytes)

    def of(self, questions: Sequence[Question]) -> torch.Tensor:
        """``[N]`` content-free slot logits of ``questions``, question after question (zeros for types not
        corrected), to subtract from the state's slot logits."""
        parts = []
        for question in questions:
            if question.kind not in self.kinds:
                parts.append(torch.zeros(question.size, dtype=torch.float32))
                continue
            key = question_key(question)
            prior = self.cache.get(key)
            if prior is None:
                prior = self._read(question).float().cpu()
                self.cache.put(key, prior)
            parts.append(prior)
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float32)
