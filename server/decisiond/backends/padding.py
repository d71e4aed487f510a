"""Length-sorted, token-budgeted padding for encoder backends.

Sorting sequences by length before padding cuts the padded tokens a batch wastes (the
``length-sort, then restore with argsort`` of sentence-transformers' ``predict``); chunking by a
budget of padded tokens bounds the memory of one forward call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def length_chunks(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices sorted by length, cut into chunks whose padded size stays within ``max_tokens`` (pure).

    Args:
        lengths (Sequence[int]): the length of each sequence, in tokens.
        max_tokens (int): ``longest × rows`` of one chunk; a single longer sequence is its own chunk.

    Returns:
        list[list[int]]: chunks of indices into ``lengths``; every index appears once.

    Example:
        >>> length_chunks([5, 1, 3, 1], max_tokens=6)
        [[1, 3], [2], [0]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    chunks: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and lengths[index] * (len(current) + 1) > max_tokens:  # sorted: index is the longest
            chunks.append(current)
            current = []
        current.append(index)
    if current:
        chunks.append(current)
    return chunks


def pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token ids.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: ``[B, T]`` int64 ids and ``[B, T]`` int64 attention mask.
    """
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.int64)
    mask = torch.zeros((len(sequences), longest), dtype=torch.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int64)
        mask[row, : len(seq)] = 1
    return ids, mask


def run_sorted(
    sequences: Sequence[Sequence[int]],
    run: Callable[[list[int]], torch.Tensor],
    *,
    max_tokens: int,
) -> torch.Tensor:
    """Run ``run`` over length-sorted chunks and give the rows back in input order.

    Args:
        sequences (Sequence[Sequence[int]]): ``M`` token-id sequences.
        run (Callable[[list[int]], torch.Tensor]): indices of one chunk → ``[len(chunk), ...]`` rows.
        max_tokens (int): padded tokens per call (see :func:`length_chunks`).

    Returns:
        torch.Tensor: ``[M, ...]``, row ``i`` for ``sequences[i]``.
    """
    chunks = length_chunks([len(s) for s in sequences], max_tokens)
    rows = torch.cat([run(chunk) for chunk in chunks])  # [M, ...] in sorted order
    order = torch.tensor([i for chunk in chunks for i in chunk], device=rows.device)
    return rows[torch.argsort(order)]
