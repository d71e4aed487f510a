"""Batched readout: slot logits of many questions → distributions, winners, positions, confidences.

Every formula of spec/wire.md §4 lives here, once, as tensor arithmetic over a whole batch of
questions (all requests of a micro-batch together). The module knows nothing of models or of the
wire: it takes a flat logit per slot, the number of slots of each question and a temperature per
question, and gives back plain Python lists, synced from the device once.

Shapes used below: ``N`` slots in all, ``Q`` questions, ``K`` the largest slot count of a question.

A ``box`` question has no slots: its backend gives candidate boxes and a logit per candidate
(:class:`BoxCandidates`), and :func:`read_boxes` turns them into the expected edges and a
confidence; :func:`combine` lays both readouts out in question order again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
        box (list[list[float] | None]): the expected ``[top, left, bottom, right]`` of each box
            question (see :func:`read_boxes`), None for the other questions.
        box_confidence (list[float | None]): the confidence of each box question, None elsewhere.

    A box question's entries in the first five lists are placeholders (no probabilities, winner 0).
    """

    probabilities: list[list[float]]
    winner: list[int]
    position: list[float]
    choice_confidence: list[float]
    score_confidence: list[float]
    box: list[list[float] | None] = field(default_factory=list)
    box_confidence: list[float | None] = field(default_factory=list)

    def slice(self, start: int, stop: int) -> Readout:
        """The readout of questions ``start`` to ``stop - 1`` (one request's share of a batch)."""
        return Readout(
            probabilities=self.probabilities[start:stop],
            winner=self.winner[start:stop],
            position=self.position[start:stop],
            choice_confidence=self.choice_confidence[start:stop],
            score_confidence=self.score_confidence[start:stop],
            box=self.box[start:stop],
            box_confidence=self.box_confidence[start:stop],
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
        box=[None] * len(rows),
        box_confidence=[None] * len(rows),
    )


# ---------------------------------------------------------------- box questions


@dataclass(frozen=True)
class BoxCandidates:
    """The candidate boxes of every box question of a batch, question after question.

    Attributes:
        logits (torch.Tensor): ``[C]`` one logit per candidate, all box questions' candidates
            concatenated (a detector's class logit of that box for the question's text).
        boxes (torch.Tensor): ``[C, 4]`` each candidate's ``top, left, bottom, right`` as fractions
            of the image's height and width from its top-left corner (may fall outside [0, 1]).
        sizes (list[int]): ``Q`` candidate counts, one per box question, each ≥ 1, summing to ``C``.
    """

    logits: torch.Tensor
    boxes: torch.Tensor
    sizes: list[int]


@dataclass(frozen=True)
class BoxReadout:
    """The readout of ``Q`` box questions, unrounded.

    Attributes:
        edges (list[list[float]]): ``Q`` lists ``[top, left, bottom, right]``, each in [0, 1].
        confidence (list[float]): ``Q`` confidences in [0, 1].
    """

    edges: list[list[float]]
    confidence: list[float]


def expected_edges(p: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Each edge's expected position under the candidate distribution, clipped to [0, 1].

    E[edge] = Σ_k p_k · edge_k (the SDK's "expected value of its edge's predicted position"); the
    clip keeps a box that a candidate pushes past the border inside the picture.

    Args:
        p (torch.Tensor): ``[Q, K]`` probabilities, zero-padded.
        boxes (torch.Tensor): ``[Q, K, 4]`` candidate edges (padding rows may hold anything finite).

    Returns:
        torch.Tensor: ``[Q, 4]`` ``top, left, bottom, right`` in [0, 1].
    """
    return torch.einsum("qk,qkc->qc", p, boxes).clamp(0.0, 1.0)


def box_confidence(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """σ(max_k ℓ_k / T): the detection probability of the best candidate, temperature-scaled.

    Source: OWL-ViT and OWLv2 are trained with a per-box sigmoid (focal) loss, and their
    ``post_process_object_detection`` reports σ(logit) as a box's score; Grounding DINO does the
    same. The best candidate's score says how sure the model is that the thing is in the picture
    at all; it does not depend on how many candidates the checkpoint proposes (576 to 3,600), and
    it equals the ``noul`` answer to "is there …?" about the same text and image. The manifest's
    temperature scales it as it scales the softmax, so one setting calibrates both. It does not
    measure the spread between candidates (two dogs far apart give a confident box between them).

    Args:
        logits (torch.Tensor): ``[Q, K]`` candidate logits, ``-inf``-padded.
        temperature (torch.Tensor): ``[Q]``, each > 0.

    Returns:
        torch.Tensor: ``[Q]`` in [0, 1].
    """
    return torch.sigmoid(logits.max(dim=1).values / temperature)


def read_boxes(candidates: BoxCandidates, temperature: Sequence[float]) -> BoxReadout:
    """Every box question of a batch in batched tensor operations, synced to Python once.

    p = softmax(ℓ / T) over each question's candidates (``-inf`` padding weighs nothing); the
    edges are :func:`expected_edges`; the confidence is :func:`box_confidence`.

    Args:
        candidates (BoxCandidates): ``C`` candidates of ``Q`` box questions.
        temperature (Sequence[float]): ``Q`` temperatures, each > 0.

    Returns:
        BoxReadout: in question order.

    Raises:
        ValueError: a question without candidates, a temperature not above 0, mismatched counts.

    Example:
        >>> c = BoxCandidates(torch.tensor([0.0, 0.0]), torch.tensor([[0.0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]]), [2])
        >>> read_boxes(c, [1.0]).edges
        [[0.25, 0.25, 0.75, 0.75]]
    """
    sizes = candidates.sizes
    if any(s < 1 for s in sizes):
        raise ValueError(f"every box question needs at least one candidate, got sizes {sizes}")
    if any(not t > 0 for t in temperature) or len(temperature) != len(sizes):
        raise ValueError(f"need {len(sizes)} positive temperatures, got {list(temperature)}")
    if candidates.boxes.shape != (candidates.logits.numel(), 4):
        raise ValueError(f"{candidates.logits.numel()} logits but boxes of shape {tuple(candidates.boxes.shape)}")
    if not sizes:
        return BoxReadout([], [])
    device = candidates.logits.device
    size_t = torch.tensor(sizes, dtype=torch.int64, device=device)  # [Q]
    temp_t = torch.tensor(list(temperature), dtype=torch.float32, device=device)  # [Q]
    logits = pad_segments(candidates.logits.float(), size_t)  # [Q, K]
    p = torch.softmax(logits / temp_t.unsqueeze(1), dim=1)  # [Q, K]
    mask = torch.isfinite(logits)  # [Q, K]
    boxes = torch.zeros((*mask.shape, 4), dtype=torch.float32, device=device)  # [Q, K, 4]
    boxes[mask] = candidates.boxes.float()
    rows = torch.cat([expected_edges(p, boxes), box_confidence(logits, temp_t).unsqueeze(1)], dim=1).cpu().tolist()
    return BoxReadout([row[:4] for row in rows], [row[4] for row in rows])


def combine(is_box: Sequence[bool], slots: Readout, boxes: BoxReadout) -> Readout:
    """Interleave the readout of the slot questions and of the box questions back into question order.

    Args:
        is_box (Sequence[bool]): per question of the batch, whether it is a box question.
        slots (Readout): the readout of the other questions, in their order.
        boxes (BoxReadout): the readout of the box questions, in their order.

    Returns:
        Readout: one entry per question; see :class:`Readout` for what a box question holds.
    """
    out = Readout([], [], [], [], [], [], [])
    s = b = 0
    for box in is_box:
        if box:
            row = ([], 0, 0.0, 0.0, 0.0, boxes.edges[b], boxes.confidence[b])
            b += 1
        else:
            row = (
                slots.probabilities[s],
                slots.winner[s],
                slots.position[s],
                slots.choice_confidence[s],
                slots.score_confidence[s],
                None,
                None,
            )
            s += 1
        for column, value in zip(_COLUMNS, row, strict=True):
            getattr(out, column).append(value)
    return out


_COLUMNS = ("probabilities", "winner", "position", "choice_confidence", "score_confidence", "box", "box_confidence")
