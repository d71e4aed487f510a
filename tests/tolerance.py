"""Tolerances of the suite, each derived from float32 arithmetic, so that the suite passes on any
x86-64 or ARM CPU (with or without AVX-512 or AMX), whatever order its kernels sum in.

Two computations of one value that differ only in the order of their float32 sums (a batch, padding,
packing, another SIMD width) differ by at most about ``K · eps32 · Σ|terms|`` for a sum of ``K``
terms (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2: ``|error| ≤ γ_K
Σ|x_i|`` with ``γ_K ≈ K·u``). Logits are therefore compared relatively to their size, and
probabilities (bounded by 1) absolutely.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: float32 machine epsilon, 2**-23 ≈ 1.19e-7.
EPS32 = float(torch.finfo(torch.float32).eps)

#: Two float32 computations of one probability (at most 1) that differ only in summation order.
#: A probability is a softmax of logits; its error is about eps32 times the number of operations on
#: its way, far below 1e-5 for the test models, whose measured differences are about 1e-7.
PROBABILITY_ATOL = 1e-5

#: The wire rounds every probability, noul, score and confidence to 4 decimals (spec/wire.md §3):
#: two values a float32 rounding apart can round one step apart.
WIRE_STEP = 1e-4

#: The longest reduction on the way to a logit in the tiny test models (decisiond.testing): attention
#: over a window of at most 256 positions; their other inner dimensions (hidden 32 to 64,
#: intermediate 64 to 128, head dim 16) are shorter.
TINY_REDUCTION = 256

#: The longest reduction in all-MiniLM-L6-v2: its intermediate size (1536; hidden 384, window 256).
MINILM_REDUCTION = 1536


def logit_atol(expected: torch.Tensor | Sequence[float], reduction: int) -> float:
    """The absolute difference allowed between two float32 computations of the same logits.

    ``eps32 · reduction · max(1, max|logit|)``: the terms summed on the way to a logit are of the
    size of the logit itself, and at least of order 1 (hidden states are layer-normed).

    Args:
        expected (torch.Tensor | Sequence[float]): the reference logits, any shape.
        reduction (int): the longest sum (dot-product length) on the way to a logit.

    Returns:
        float: the bound, e.g. 5.7e-4 for a logit of 18.8 and a reduction of 256.
    """
    values = torch.as_tensor(expected, dtype=torch.float64)
    scale = max(1.0, float(values.abs().max())) if values.numel() else 1.0
    return EPS32 * reduction * scale


def assert_logits_close(actual: torch.Tensor, expected: torch.Tensor, reduction: int = TINY_REDUCTION) -> None:
    """Assert two float32 computations of the same logits agree within :func:`logit_atol`."""
    torch.testing.assert_close(
        actual.to(torch.float64), expected.to(torch.float64), rtol=0, atol=logit_atol(expected, reduction)
    )


def position_atol(got: Sequence[float], expected: Sequence[float]) -> float:
    """The difference allowed between the positions ``Σ i·p_i`` of two close distributions.

    ``|Σ i·(p_i − q_i)| ≤ (n − 1) · Σ|p_i − q_i|`` (each weight i is at most n − 1), plus the float32
    rounding of each sum of n products of at most n − 1: ``n · (n − 1) · eps32`` per sum, two sums.
    On a 40-option question a position near 18.8 may thus move by more than a probability does.
    """
    n = len(expected)
    spread = sum(abs(a - b) for a, b in zip(got, expected, strict=True))
    return (n - 1) * spread + 2 * n * (n - 1) * EPS32
