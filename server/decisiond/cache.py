"""A least-recently-used cache bounded by entries and by bytes, with hit and miss counters."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

import torch
from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)


def tensor_bytes(value: torch.Tensor) -> int:
    """Bytes a cached tensor holds."""
    return value.element_size() * value.nelement()


class TensorLRU(Generic[K]):
    """LRU of tensors bounded by ``max_entries`` and ``max_bytes`` (cachetools keeps the byte bound).

    Args:
        max_entries (int): most entries kept; 0 disables the cache.
        max_bytes (int): most tensor bytes kept; 0 disables the cache.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: LRUCache[K, torch.Tensor] = LRUCache(maxsize=max(max_bytes, 1), getsizeof=tensor_bytes)
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> torch.Tensor | None:
        """The cached tensor, or None (counted as a hit or a miss)."""
        value = self._data.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: K, value: torch.Tensor) -> None:
        """Keep ``value``, evicting the least recently used past either bound."""
        if self.max_entries == 0 or self.max_bytes == 0 or tensor_bytes(value) > self.max_bytes:
            return
        self._data[key] = value
        while len(self._data) > self.max_entries:
            self._data.popitem()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def stats(self) -> dict[str, int]:
        """Entries, bytes, bounds, hits and misses."""
        return {
            "entries": len(self._data),
            "bytes": int(self._data.currsize),
            "max_entries": self.max_entries,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
        }
