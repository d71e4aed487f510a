"""Calibration: per-type temperatures (and a noul offset) fitted on labelled examples.

A manifest's ``[calibration]`` table holds one temperature multiplier per question type and an
offset for nouls. They act on the logits as the backend reads them, after the backend's own
temperature ``T_b``: a choice or score is ``softmax(l / (T_b · T_type))``; a noul is
``p(true) = sigmoid((l_true − l_false) / (T_b · T_noul) + noul_offset)`` (Platt scaling,
Platt 1999; temperature scaling, Guo et al. 2017). The identity (all 1, offset 0) changes nothing.
A noul the backend answers as the complement of its affirmative (``Backend.complements``) takes the
offset on its false side, ``p(true) = sigmoid((l_true − l_false) / T − noul_offset)``: the offset
belongs to the question the model read, so "Is X?" and "Is X not?" still sum to 1.

:func:`fit_temperature` and :func:`fit_platt` minimise the negative log-likelihood of the labels
with torch's LBFGS on plain tensors; :func:`ece` and :func:`brier` are the usual reliability
measures (Naeini et al. 2015; Brier 1950).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from .render import Kind, Question

if TYPE_CHECKING:
    import torch


class Calibration(BaseModel):
    """A manifest's ``[calibration]`` table.

    Attributes:
        noul: temperature multiplier of nouls (> 0; 1/slope of Platt scaling).
        choice: temperature multiplier of choices.
        score: temperature multiplier of scores.
        noul_offset: added to a noul's true-side logit after the temperature (Platt's offset).
    """

    model_config = ConfigDict(extra="forbid")

    noul: float = Field(default=1.0, gt=0)
    choice: float = Field(default=1.0, gt=0)
    score: float = Field(default=1.0, gt=0)
    noul_offset: float = 0.0

    def temperature(self, kind: Kind) -> float:
        """The multiplier of ``kind``."""
        return float(getattr(self, kind))

    def apply(
        self,
        logits: torch.Tensor,
        questions: Sequence[Question],
        temperatures: Sequence[float],
        complemented: Sequence[bool] | None = None,
    ) -> tuple[torch.Tensor, list[float]]:
        """Fold the calibration into a batch's logits and temperatures for :func:`decisiond.readout.read`.

        Args:
            logits: ``[N]`` slot logits, question after question (a noul's slots: false, true).
            questions: the ``Q`` questions.
            temperatures: ``Q`` backend temperatures.
            complemented: per question, whether the backend answered it as the complement of its
                affirmative (``Backend.complements``); its offset then goes to the false slot.

        Returns:
            tuple: ``[N]`` logits (each noul's true slot raised by ``noul_offset · T``, or a
            complemented noul's false slot) and ``Q`` temperatures ``T = T_b · T_type``.
        """
        import torch  # lazily: the CLI must not import torch before its thread policy

        scaled = [t * self.temperature(q.kind) for q, t in zip(questions, temperatures, strict=True)]
        if self.noul_offset == 0.0:
            return logits, scaled
        flipped = complemented if complemented is not None else [False] * len(questions)
        shift = torch.zeros(logits.shape[0], dtype=torch.float32)
        start = 0
        for question, t, flip in zip(questions, scaled, flipped, strict=True):
            if question.kind == "noul":
                shift[start + (0 if flip else 1)] = self.noul_offset * t
            start += question.size
        return logits.float() + shift.to(logits.device), scaled


def _lbfgs(params: list[torch.Tensor], loss_fn: object, steps: int = 200) -> None:
    import torch  # lazily: the CLI must not import torch before its thread policy

    optimiser = torch.optim.LBFGS(params, lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = loss_fn()  # type: ignore[operator]
        loss.backward()
        return loss

    optimiser.step(closure)


def fit_temperature(logits: Sequence[torch.Tensor], labels: Sequence[int]) -> float:
    """The temperature ``T`` minimising the mean NLL of ``softmax(l / T)[label]``.

    A golden-section search over ``log T`` in [log 0.01, log 100] (the NLL of temperature scaling is
    unimodal in ``1/T``: Guo et al. 2017), to 1e-4 in ``log T``.

    Args:
        logits: one ``[n_i]`` tensor per example (the logits as read, any number of options).
        labels: the right option's index per example.

    Returns:
        float: ``T`` in [0.01, 100].

    Raises:
        ValueError: no examples, or as many labels as logits not given.
    """
    import torch  # lazily: the CLI must not import torch before its thread policy

    if not logits or len(logits) != len(labels):
        raise ValueError(f"need as many labels as examples, got {len(logits)} and {len(labels)}")
    width = max(int(x.numel()) for x in logits)
    padded = torch.full((len(logits), width), -1e9, dtype=torch.float64)  # finite: no 0·inf in the NLL
    for i, x in enumerate(logits):
        padded[i, : x.numel()] = x.double()
    target = torch.tensor(labels)

    def nll(log_t: float) -> float:
        return float(torch.nn.functional.cross_entropy(padded / math.exp(log_t), target))

    low, high = math.log(0.01), math.log(100.0)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    fa, fb = nll(a), nll(b)
    while high - low > 1e-4:
        if fa <= fb:
            high, b, fb = b, a, fa
            a = high - ratio * (high - low)
            fa = nll(a)
        else:
            low, a, fa = a, b, fb
            b = low + ratio * (high - low)
            fb = nll(b)
    return math.exp((low + high) / 2)


def fit_platt(margins: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Slope ``a`` and offset ``b`` minimising the NLL of ``sigmoid(a · margin + b)`` (Platt 1999).

    Args:
        margins: ``[M]`` noul logit differences (true minus false, after the backend temperature).
        labels: ``[M]`` 1 for true, 0 for false.

    Returns:
        tuple[float, float]: ``(a, b)``; ``a`` is clamped to at least 0.01 (a temperature of at most 100).
    """
    import torch  # lazily: the CLI must not import torch before its thread policy

    if margins.numel() == 0:
        raise ValueError("need at least one noul example")
    a = torch.ones((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    x, y = margins.float(), labels.float()

    def loss() -> torch.Tensor:
        return torch.nn.functional.binary_cross_entropy_with_logits(a * x + b, y)

    _lbfgs([a, b], loss)
    return max(float(a.detach()), 0.01), float(b.detach())


def ece(confidence: torch.Tensor, correct: torch.Tensor, bins: int = 10) -> float:
    """Expected calibration error: Σ_bins |bin| / M · |accuracy − mean confidence| (Naeini et al. 2015).

    Args:
        confidence: ``[M]`` the probability given to the predicted answer, in [0, 1].
        correct: ``[M]`` 1 where the predicted answer is right.
        bins: equal-width bins over [0, 1].
    """
    import torch  # lazily: the CLI must not import torch before its thread policy

    confidence, correct = confidence.float(), correct.float()
    index = (confidence * bins).long().clamp(max=bins - 1)
    total = torch.zeros(())
    for b in range(bins):
        mask = index == b
        if mask.any():
            total = total + mask.float().sum() * (correct[mask].mean() - confidence[mask].mean()).abs()
    return float(total / max(1, confidence.numel()))


def brier(probabilities: Sequence[torch.Tensor], labels: Sequence[int]) -> float:
    """Mean over examples of Σ_i (p_i − [i = label])² (Brier 1950; multi-class form)."""
    import torch  # lazily: the CLI must not import torch before its thread policy

    scores = []
    for p, label in zip(probabilities, labels, strict=True):
        onehot = torch.zeros_like(p, dtype=torch.float32)
        onehot[label] = 1.0
        scores.append(((p.float() - onehot) ** 2).sum())
    return float(torch.stack(scores).mean()) if scores else float("nan")
