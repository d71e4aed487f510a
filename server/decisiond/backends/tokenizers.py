"""A small pool of copies of one tokenizer, so that requests tokenise in parallel.

A fast (Rust) tokenizer must not be used by two threads at once (it raises "Already borrowed"),
and one lock shared by every request lets one request's long tokenising hold up all the others.
:class:`TokenizerPool` lends each request thread a copy of its own for the time of one call: at
most ``size`` copies are made (``copy.deepcopy``, lazily, as concurrent demand needs them), and a
thread waits only when all of them are lent.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Copies of a tokenizer kept at most (a MiniLM tokenizer is about 1 MB, a SmolLM2 one about 4 MB).
DEFAULT_POOL_SIZE = 4


class TokenizerPool:
    """Lends copies of ``tokenizer``, one thread at a time each.

    Args:
        tokenizer (Any): the original; it is the first copy lent.
        size (int, optional): copies at most. Defaults to :data:`DEFAULT_POOL_SIZE`.

    Example:
        >>> pool = TokenizerPool(tokenizer)
        >>> with pool.borrow() as tok:
        ...     ids = tok(["some text"], add_special_tokens=False)["input_ids"]
    """

    def __init__(self, tokenizer: Any, size: int = DEFAULT_POOL_SIZE) -> None:
        if size < 1:
            raise ValueError(f"a tokenizer pool needs at least one copy, got {size}")
        self.size = size
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._free.put(tokenizer)
        self._original = tokenizer
        self._made = 1
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """A tokenizer no other thread is using, until the block ends."""
        try:
            tokenizer = self._free.get_nowait()
        except queue.Empty:
            tokenizer = self._new_or_wait()
        try:
            yield tokenizer
        finally:
            self._free.put(tokenizer)

    def _new_or_wait(self) -> Any:
        with self._lock:
            make = self._made < self.size
            if make:
                self._made += 1
        if make:
            return copy.deepcopy(self._original)
        return self._free.get()
