"""Batched readout: slot logits of many questions → distributions, winners, positions, confidences.

Every formula of spec/wire.md §4 lives here, once, as tensor arithmetic over a whole batch of
questions (all requests of a micro-batch together). The module knows nothing of models or of the
wire: it takes a flat logit per slot, the number of slots of each question and a temperature per
question, and gives back plain Python lists, synced from the device once.

Shapes used below: ``N`` slots in all, ``Q`` questions, ``K`` the largest slot count of a question.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Readout:
    """What the readout gives for ``Q`` questions, unrounded, in question order.

    Attributes:
        probabilities (list[list[float]]): ``Q`` lists, question ``q`` holding ``sizes[q]`` numbers
            that sum to 1.
        winner (list[int]): the first index of the largest probability of each question.
        position (list[float]): Σ i·p_i of each question (the score position; 0 ≤ position ≤ n−1).
        choice_confidence (list[float]): (p_max − 1/n) / (1 − 1/n) clipped to [0, 1]; 1 when n = 1.
        score_confidence (list[float]): max(0, 1 − Σ p_i·|i − k| / D), D = ⌊n²/4⌋ / n; 1 when n = 1.
    """

    probabilities: list[list[float]]
    winner: list[int]
    position: list[float]
    choice_confidence: list[float]
    score_confidence: list[float]

    def slice(self, start: int, stop: int) -> Readout:
        """The readout of questions ``start`` to ``stop - 1`` (one request's share of a batch)."""
        return Readout(
            probabilities=self.probabilities[start:stop],
            winner=self.winner[start:stop],
            position=self.position[start:stop],
            choice_confidence=self.choice_confidence[start:stop],
            score_confidence=self.score_confidence[start:stop],
        )


def pad_segments(logits: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Lay a flat tensor of segment values out as rows, padding with ``-inf``.

    Args:
        logits (torch.Tensor): ``[N]`` values, segment after segment.
        sizes (torch.Tensor): ``[Q]`` int64 segment lengths, each ≥ 1, summing to ``N``.

    Returns:
        torch.Tensor: ``[Q, K]`` with row ``q`` holding segment ``q`` left-aligned, ``-inf`` after.

    Raises:
        ValueError: when ``sizes`` does not add up to the number of logits.
    """
    if int(sizes.sum()) != logits.numel():
        raise ValueError(f"segment sizes add up to {int(sizes.sum())}, but there are {logits.numel()} logits")
    width = int(sizes.max()) if sizes.numel() else 0
    mask = torch.arange(width, device=logits.device).unsqueeze(0) < sizes.unsqueeze(1)  # [Q, K]
    padded = torch.full(mask.shape, float("-inf"), dtype=logits.dtype, device=logits.device)
    padded[mask] = logits  # row-major order of the mask is the flat segment order
    return padded


def segment_softmax(logits: torch.Tensor, sizes: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """Softmax within each question's segment, after dividing by that question's temperature.

    Args:
        logits (torch.Tensor): ``[N]`` slot logits (any float dtype; computed in float32).
        sizes (torch.Tensor): ``[Q]`` slot counts.
        temperature (torch.Tensor): ``[Q]`` temperatures, each > 0.

    Returns:
        torch.Tensor: ``[Q, K]`` float32 probabilities, zero in the padding.
    """
    padded = pad_segments(logits.float(), sizes)  # [Q, K]
    scaled = padded / temperature.float().unsqueeze(1)  # [Q, K] / [Q, 1]
    return torch.softmax(scaled, dim=1)


def choice_confidence(p: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """How far each winner stands above uniform: (p_max − 1/n) / (1 − 1/n), clipped to [0, 1].

    Source: spec/wire.md §4. Check values: (0.88, 0.12, 0) → 0.82; (0.90, 0.06, 0.04) → 0.85.

    Args:
        p (torch.Tensor): ``[Q, K]`` probabilities, zero-padded.
        sizes (torch.Tensor): ``[Q]`` option counts.

    Returns:
        torch.Tensor: ``[Q]``, 1 where n = 1.
    """
    n = sizes.to(p.dtype)
    uniform = 1.0 / n
    denominator = torch.where(n > 1, 1.0 - uniform, torch.ones_like(n))
    raw = (p.max(dim=1).values - uniform) / denominator
    return torch.where(n > 1, raw.clamp(0.0, 1.0), torch.ones_like(n))


def score_position(p: torch.Tensor) -> torch.Tensor:
    """Σ i·p_i per row: the fractional position on a scale whose level i has index i.

    Args:
        p (torch.Tensor): ``[Q, K]`` probabilities, zero-padded.

    Returns:
        torch.Tensor: ``[Q]``.
    """
    index = torch.arange(p.shape[1], dtype=p.dtype, device=p.device)  # [K]
    return p @ index


def score_confidence(p: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """max(0, 1 − Σ p_i·|i − k| / D) with k the first mode and D = ⌊n²/4⌋ / n.

    Source: spec/wire.md §4 (D is the largest mean distance from a mode a distribution over n
    levels can have). Check value: (0, 0.95, 0.05) → 0.925.

    Args:
        p (torch.Tensor): ``[Q, K]`` probabilities, zero-padded.
        sizes (torch.Tensor): ``[Q]`` level counts.

    Returns:
        torch.Tensor: ``[Q]``, 1 where n = 1.
    """
    n = sizes.to(p.dtype)
    mode = p.argmax(dim=1).to(p.dtype)  # [Q]; argmax gives the first maximum
    index = torch.arange(p.shape[1], dtype=p.dtype, device=p.device)  # [K]
    spread = (p * (index.unsqueeze(0) - mode.unsqueeze(1)).abs()).sum(dim=1)  # [Q]
    d = torch.floor(n * n / 4.0) / n
    raw = 1.0 - spread / torch.where(n > 1, d, torch.ones_like(d))
    return torch.where(n > 1, raw.clamp(min=0.0), torch.ones_like(n))


def read(logits: torch.Tensor, sizes: list[int], temperature: list[float]) -> Readout:
    """Run the whole readout for a batch of questions and sync it to Python once.

    Args:
        logits (torch.Tensor): ``[N]`` slot logits, question after question, on any device.
        sizes (list[int]): ``Q`` slot counts (noul 2, choice n options, score n levels), each ≥ 1.
        temperature (list[float]): ``Q`` temperatures, each > 0.

    Returns:
        Readout: unrounded, in question order.

    Raises:
        ValueError: on a size below 1, a temperature not above 0, or sizes that miss the logits.

    Example:
        >>> r = read(torch.tensor([0.0, 0.0, 2.0, 1.0, 0.0]), [2, 3], [1.0, 1.0])
        >>> r.winner
        [0, 0]
    """
    if any(s < 1 for s in sizes):
        raise ValueError(f"every question needs at least one slot, got sizes {sizes}")
    if any(not t > 0 for t in temperature):
        raise ValueError(f"temperatures must be positive, got {temperature}")
    if len(sizes) != len(temperature):
        raise ValueError(f"{len(sizes)} sizes but {len(temperature)} temperatures")
    if not sizes:
        return Readout([], [], [], [], [])
    device = logits.device
    size_t = torch.tensor(sizes, dtype=torch.int64, device=device)  # [Q]
    temp_t = torch.tensor(temperature, dtype=torch.float32, device=device)  # [Q]
    p = segment_softmax(logits, size_t, temp_t)  # [Q, K]
    extras = torch.stack(
        [
            p.argmax(dim=1).to(p.dtype),
            score_position(p),
            choice_confidence(p, size_t),
            score_confidence(p, size_t),
        ],
        dim=1,
    )  # [Q, 4]
    rows = torch.cat([p, extras], dim=1).cpu().tolist()  # the one device sync of a batch
    return Readout(
        probabilities=[row[:n] for row, n in zip(rows, sizes, strict=True)],
        winner=[int(row[-4]) for row in rows],
        position=[row[-3] for row in rows],
        choice_confidence=[row[-2] for row in rows],
        score_confidence=[row[-1] for row in rows],
    )
