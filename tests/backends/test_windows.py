"""Long texts: windows cover every token, overlap as asked, and pool to unit vectors."""

from __future__ import annotations

import pytest
import torch

from decisiond.backends.windows import pool_windows, split_windows


def test_short_text_is_one_window() -> None:
    assert split_windows([1, 2, 3], window=8, overlap=2) == [[1, 2, 3]]
    assert split_windows([], window=8, overlap=2) == [[]]


def test_windows_by_hand() -> None:
    assert split_windows(list(range(10)), window=6, overlap=1) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert split_windows(list(range(5)), window=6, overlap=1) == [[0, 1, 2, 3], [3, 4]]


@pytest.mark.parametrize("n", [1, 7, 254, 255, 1000, 4099])
def test_every_token_is_read_and_nothing_is_cut(n: int) -> None:
    ids = list(range(n))
    windows = split_windows(ids, window=256, overlap=32)
    assert all(len(w) <= 254 for w in windows)
    assert sorted(set(i for w in windows for i in w)) == ids
    for a, b in zip(windows, windows[1:], strict=False):
        assert a[-32:] == b[:32]


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValueError):
        split_windows([1, 2], window=4, overlap=2)


def test_pool_windows_means_and_normalises() -> None:
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]])
    pooled = pool_windows(emb, torch.tensor([0, 0, 1]), 2)
    assert pooled[0].tolist() == pytest.approx([2**-0.5, 2**-0.5])
    assert pooled[1].tolist() == pytest.approx([0.6, 0.8])
