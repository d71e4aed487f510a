"""The slot-embedding cache holds what it says it holds (issue 14, item 7)."""

from __future__ import annotations

import tracemalloc

import torch

from decisiond.cache import TensorLRU


def test_long_keys_do_not_grow_the_cache_past_its_bounds() -> None:
    """Bug: the cache bounded only its tensors; its keys (the full slot texts) were kept whole, so 109
    requests with long instructions moved RSS from 430 to 935 MiB while /health said 1.2 MB."""
    cache: TensorLRU[str] = TensorLRU(max_entries=1000, max_bytes=1 << 30)
    tracemalloc.start()
    try:
        for i in range(40):
            text = f"{i} " + "instructions " * 80_000  # about 1 MB of slot text
            cache.put(text, torch.ones(4))
            assert cache.get(text) is not None and text in cache
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(cache) == 40
    assert held < 2_000_000  # 40 MB of texts were put; the cache keeps fixed-size digests
    assert cache.stats()["bytes"] == 40 * (16 + 16)  # each entry: a 16-byte tensor and a 16-byte key


def test_a_cached_row_does_not_pin_its_whole_batch() -> None:
    """Bug: a row of the batch's embedding matrix was cached as a view, which keeps the whole matrix
    alive while the cache counted one row."""
    batch = torch.randn(1000, 384)
    cache: TensorLRU[str] = TensorLRU(max_entries=10, max_bytes=1 << 20)
    cache.put("slot", batch[3])
    kept = cache.get("slot")
    assert kept is not None and torch.equal(kept, batch[3])
    assert kept.untyped_storage().nbytes() == 384 * 4
