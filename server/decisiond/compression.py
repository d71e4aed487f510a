"""Compressed request bodies (``Content-Encoding``): zstd, gzip and deflate, decoded with a ceiling.

The official Python SDK sends bodies of 1 KiB or more as zstd wherever zstd is available (always on
Python 3.14); other clients send gzip or deflate (spec/wire.md §8). Every codec is run through the
standard ``decompress(data, max_length)`` interface (zlib; ``compression.zstd`` on Python 3.14,
its official backport ``backports.zstd`` before), so the output is produced in bounded steps and
decoding stops one byte past the ceiling: a compression bomb costs at most ``limit`` bytes of
memory before it is refused (413), never its full size.

A list of encodings (``gzip, zstd``) was applied in that order and is undone in reverse.
Concatenated frames (zstd) and members (gzip) are all read; anything else after the end of the
data is refused, since nothing a client sent is dropped silently.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from typing import Protocol

from .errors import ApiUsageError, RequestTooLarge, UnsupportedEncoding

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdDecompressor, ZstdError
else:  # the official backport of PEP 784, same API
    from backports.zstd import ZstdDecompressor, ZstdError


class _Decompressor(Protocol):
    """The part of ``compression.zstd.ZstdDecompressor``'s interface used here."""

    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _Zlib:
    """zlib's decompressor behind the ``needs_input`` interface (its input waits in ``unconsumed_tail``).

    Args:
        wbits (int): 31 gzip, 15 zlib (HTTP ``deflate``), -15 raw deflate.
    """

    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def needs_input(self) -> bool:
        return not self._d.unconsumed_tail

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        pending = self._d.unconsumed_tail + data
        return self._d.decompress(pending, max(max_length, 0))  # zlib: 0 means no limit; callers pass >= 1


def _deflate() -> _Decompressor:
    return _Zlib(15)


#: Each supported ``Content-Encoding`` → a factory of one frame's (member's) decompressor.
DECODERS: dict[str, Callable[[], _Decompressor]] = {
    "zstd": ZstdDecompressor,
    "gzip": lambda: _Zlib(31),
    "x-gzip": lambda: _Zlib(31),
    "deflate": _deflate,
}
#: Encodings that mean "not encoded".
IDENTITY = frozenset({"", "identity"})


def encodings(header: str | None) -> list[str]:
    """The encodings of a ``Content-Encoding`` header, in the order they were applied, lower case,
    ``identity`` left out.

    Raises:
        UnsupportedEncoding: an encoding other than zstd, gzip, deflate or identity (415).

    Example:
        >>> encodings("gzip, Identity, zstd")
        ['gzip', 'zstd']
    """
    found = [part.strip().lower() for part in (header or "").split(",")]
    found = [name for name in found if name not in IDENTITY]
    for name in found:
        if name not in DECODERS:
            raise UnsupportedEncoding(
                f"the body's Content-Encoding {name[:40]!r} is not supported; send zstd, gzip, deflate or none"
            )
    return found


def _frames(data: bytes, encoding: str, limit: int, make: Callable[[], _Decompressor]) -> bytes:
    """Decode every frame of ``data``; at most ``limit`` bytes out, else 413."""
    out = bytearray()
    pending = data
    while True:
        decoder = make()
        out += decoder.decompress(pending, limit + 1 - len(out))
        while len(out) <= limit and not decoder.eof and not decoder.needs_input:
            out += decoder.decompress(b"", limit + 1 - len(out))
        if len(out) > limit:
            raise RequestTooLarge(
                f"the {encoding} body decompresses to more than the limit of {limit} bytes (--max-body-bytes)"
            )
        if not decoder.eof:
            raise ApiUsageError(f"the {encoding} body is truncated (Content-Encoding: {encoding})")
        pending = decoder.unused_data
        if not pending:
            return bytes(out)


def decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """Undo one ``Content-Encoding``.

    Args:
        data (bytes): the body as received.
        encoding (str): a key of :data:`DECODERS`.
        limit (int): the most bytes the decoded body may hold (``--max-body-bytes``).

    Returns:
        bytes: the decoded body, at most ``limit`` bytes.

    Raises:
        RequestTooLarge: the decoded body would be larger than ``limit`` (413); decoding stops there.
        ApiUsageError: the data is not valid in that encoding, or is truncated (400).
    """
    if not data:  # nothing was sent; the app answers its usual 422 for a missing body
        return b""
    make = DECODERS[encoding]
    try:
        if encoding == "deflate":  # RFC 9110 says zlib-wrapped; some clients send raw deflate
            try:
                return _frames(data, encoding, limit, make)
            except zlib.error:
                return _frames(data, encoding, limit, lambda: _Zlib(-15))
        return _frames(data, encoding, limit, make)
    except (zlib.error, ZstdError, EOFError):
        raise ApiUsageError(f"the body is not valid {encoding} data (Content-Encoding: {encoding})") from None


def decode(data: bytes, applied: list[str], limit: int) -> bytes:
    """Undo every encoding of ``applied`` (as :func:`encodings` returns them), last applied first.

    Raises:
        RequestTooLarge: a decoded stage is larger than ``limit``.
        ApiUsageError: a stage is not valid in its encoding.
    """
    for encoding in reversed(applied):
        data = decompress(data, encoding, limit)
    return data
