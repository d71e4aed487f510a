"""A least-recently-used cache bounded by entries and by bytes, with hit and miss counters.

Keys (slot texts, token prefixes: as long as a client makes them) are kept as fixed-size digests
(BLAKE2b, 16 bytes), and a tensor that is a view of a larger one is copied, so that the byte count
is what the cache really holds: each entry's tensor bytes plus :data:`KEY_BYTES`.
"""

from __future__ import annotations

import hashlib
from typing import Generic, TypeVar

import torch
from cachetools import LRUCache

K = TypeVar("K", str, bytes)

#: Bytes of one stored key (a BLAKE2b digest).
KEY_BYTES = 16


def tensor_bytes(value: torch.Tensor) -> int:
    """Bytes a cached tensor holds."""
    return value.element_size() * value.nelement()


def _entry_bytes(value: torch.Tensor) -> int:
    return tensor_bytes(value) + KEY_BYTES


def digest(key: str | bytes) -> bytes:
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    return hashlib.blake2b(raw, digest_size=KEY_BYTES, person=b"s" if isinstance(key, str) else b"b").digest()


class TensorLRU(Generic[K]):
    """LRU of tensors bounded by ``max_entries`` and ``max_bytes`` (cachetools keeps the byte bound),
    keyed by digests of ``str`` or ``bytes`` keys.

    Args:
        max_entries (int): most entries kept; 0 disables the cache.
        max_bytes (int): most tensor bytes kept; 0 disables the cache.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: LRUCache[bytes, torch.Tensor] = LRUCache(maxsize=max(max_bytes, 1), getsizeof=_entry_bytes)
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> torch.Tensor | None:
        """The cached tensor, or None (counted as a hit or a miss)."""
        value = self._data.get(digest(key))
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: K, value: torch.Tensor) -> None:
        """Keep ``value``, evicting the least recently used past either bound."""
        if self.max_entries == 0 or self.max_bytes == 0 or _entry_bytes(value) > self.max_bytes:
            return
        if value.untyped_storage().nbytes() > tensor_bytes(value):  # a view would pin its whole base
            value = value.clone()
        self._data[digest(key)] = value
        while len(self._data) > self.max_entries:
            self._data.popitem()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str | bytes) and digest(key) in self._data

    def stats(self) -> dict[str, int]:
        """Entries, bytes (tensors and keys), bounds, hits and misses."""
        return {
            "entries": len(self._data),
            "bytes": int(self._data.currsize),
            "max_entries": self.max_entries,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
        }
