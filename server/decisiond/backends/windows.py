"""Long texts for encoders: split token ids into overlapping windows, pool them back.

An encoder reads ``window`` tokens at once. A longer text is read as overlapping windows of
``window`` tokens (special tokens included) that share ``overlap`` content tokens; each window is
encoded and the window embeddings of one text are pooled. Nothing is cut.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def split_windows(ids: Sequence[int], *, window: int, overlap: int, specials: int = 2) -> list[list[int]]:
    """Content token ids → overlapping windows of at most ``window - specials`` ids (pure).

    Args:
        ids (Sequence[int]): content ids, without special tokens.
        window (int): tokens per window, special tokens included.
        overlap (int): content ids shared by consecutive windows (< half the content size).
        specials (int, optional): special tokens the encoder adds per window. Defaults to 2.

    Returns:
        list[list[int]]: at least one window (an empty text is one empty window); every id lies
        in some window.

    Example:
        >>> split_windows(list(range(10)), window=6, overlap=1)
        [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    """
    size = window - specials
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"window {window} with {specials} special tokens cannot overlap by {overlap}")
    ids = list(ids)
    if len(ids) <= size:
        return [ids]
    step = size - overlap
    starts = range(0, len(ids) - overlap, step)
    return [ids[s : s + size] for s in starts if s < len(ids)]


def pool_windows(embeddings: torch.Tensor, owner: torch.Tensor, count: int) -> torch.Tensor:
    """Mean of each text's window embeddings, L2-normalised.

    Args:
        embeddings (torch.Tensor): ``[W, d]`` window embeddings.
        owner (torch.Tensor): ``[W]`` int64, the text each window belongs to (0..count-1).
        count (int): number of texts.

    Returns:
        torch.Tensor: ``[count, d]`` unit vectors.
    """
    sums = torch.zeros(count, embeddings.shape[1], dtype=embeddings.dtype, device=embeddings.device)
    sums.index_add_(0, owner, embeddings)
    return torch.nn.functional.normalize(sums, dim=1)
