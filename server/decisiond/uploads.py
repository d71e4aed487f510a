"""Multipart uploads: a ``multipart/form-data`` body as the official SDK sends images → one JSON body.

The official Python SDK sends a request that carries images as ``multipart/form-data``
(spec/wire.md §8): the first part, named ``request``, is the JSON body, whose ``assets`` map names
each image's part (``{"type": "image", "part": "asset-0"}``); each following part is one image's
raw bytes, labelled ``image/png``, ``image/jpeg`` or ``application/octet-stream``.
:func:`to_json_body` turns that into the JSON body the wire already reads: each asset that names a
part gets the part's bytes as ``data_base64`` (and, unless it declares one, the format its part's
content type names), so the image then passes the same checks as any other asset (format, bytes,
pixels; :mod:`decisiond.media`). Every part after ``request`` must be claimed by exactly one
asset and every asset's part must be present (400 otherwise): nothing sent is dropped silently.

Parts are read with python-multipart (the parser Starlette uses), never by hand.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from .errors import ApiUsageError

#: The name of the part that holds the JSON body.
REQUEST_PART = "request"
#: Image formats a part's content type declares, as the wire's ``format`` names them.
_PART_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/webp": "webp"}


def is_multipart(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is ``multipart/form-data`` (any parameters).

    Example:
        >>> is_multipart("multipart/form-data; boundary=abc"), is_multipart("application/json")
        (True, False)
    """
    kind, _ = parse_options_header(content_type or "")
    return kind.lower() == b"multipart/form-data"


@dataclass
class Part:
    """One part of a multipart body.

    Attributes:
        name (str): the ``name`` of its ``Content-Disposition``.
        content_type (str): its ``Content-Type``, lower case, without parameters ("" when absent).
        data (bytearray): its bytes.
    """

    name: str = ""
    content_type: str = ""
    data: bytearray = field(default_factory=bytearray)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class _Collector:
    """python-multipart callbacks that gather the parts (at most ``max_parts``)."""

    def __init__(self, max_parts: int) -> None:
        self.max_parts = max_parts
        self.parts: list[Part] = []
        self.ended = False
        self._field = bytearray()
        self._value = bytearray()

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_part_begin": self._begin,
            "on_part_data": lambda data, start, end: self.parts[-1].data.extend(data[start:end]),
            "on_header_field": lambda data, start, end: self._field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
            "on_header_end": self._header,
            "on_end": self._end,
        }

    def _begin(self) -> None:
        if len(self.parts) >= self.max_parts:
            raise ApiUsageError(
                f"the multipart body has more than {self.max_parts} parts: the request and at most "
                f"{self.max_parts - 1} images (--max-images)"
            )
        self.parts.append(Part())

    def _header(self) -> None:
        name, value = bytes(self._field).strip().lower(), bytes(self._value)
        self._field.clear()
        self._value.clear()
        part = self.parts[-1]
        if name == b"content-disposition":
            _, options = parse_options_header(value)
            part.name = _text(options.get(b"name", b""))
        elif name == b"content-type":
            kind, _ = parse_options_header(value)
            part.content_type = _text(kind).lower()

    def _end(self) -> None:
        self.ended = True


def read_parts(body: bytes, content_type: str, max_parts: int) -> list[Part]:
    """The parts of a ``multipart/form-data`` body, in order.

    Raises:
        ApiUsageError: no boundary, a malformed or truncated body, more than ``max_parts`` parts,
            or two parts with one name (400).
    """
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise ApiUsageError("the multipart/form-data body has no boundary in its Content-Type")
    collector = _Collector(max_parts)
    try:
        parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
        parser.write(body)
        parser.finalize()
    except (MultipartParseError, ValueError):
        raise ApiUsageError("the multipart/form-data body is malformed") from None
    if not collector.ended:
        raise ApiUsageError("the multipart/form-data body is truncated: its closing boundary is missing")
    names = [part.name for part in collector.parts]
    for name in names:
        if names.count(name) > 1:
            raise ApiUsageError(
                f"two parts of the multipart body are named {name[:60]!r}; each part needs its own name"
            )
    return collector.parts


def _claim(placeholder: str, asset: dict[str, Any], parts: dict[str, Part], claimed: set[str]) -> dict[str, Any]:
    """The asset with its part's bytes as ``data_base64`` (a part wins over any ``data_base64``)."""
    where = f"asset {placeholder[:40]!r}"
    name = asset["part"]
    if not isinstance(name, str):
        raise ApiUsageError(f"{where} names its part with something other than a string")
    if name not in parts:
        raise ApiUsageError(f"{where} names the part {name[:60]!r}, which the multipart body does not hold")
    if name in claimed:
        raise ApiUsageError(f"the part {name[:60]!r} is claimed by two assets; send one part per asset")
    claimed.add(name)
    part = parts[name]
    entry = {key: value for key, value in asset.items() if key not in ("part", "data_base64")}
    entry["data_base64"] = base64.b64encode(part.data).decode("ascii")
    if entry.get("format") is None and part.content_type in _PART_FORMATS:
        entry["format"] = _PART_FORMATS[part.content_type]
    return entry


def to_json_body(body: bytes, content_type: str, max_parts: int) -> bytes:
    """A multipart upload → the equivalent JSON body (see the module docstring).

    Args:
        body (bytes): the multipart body, already decompressed.
        content_type (str): its ``Content-Type`` (with the boundary).
        max_parts (int): the most parts accepted (the request and ``--max-images`` images).

    Returns:
        bytes: the JSON body; when the ``request`` part is not a JSON object, that part as sent,
        which the app refuses with its usual 422 (an image part left over is still a 400 first).

    Raises:
        ApiUsageError: a malformed body, a first part not named ``request``, an asset naming a
            part that is absent or claimed twice, or a part no asset claims (400).
    """
    parts = read_parts(body, content_type, max_parts)
    if not parts or parts[0].name != REQUEST_PART:
        raise ApiUsageError(f"the first part of a multipart body must be named {REQUEST_PART!r} and hold the JSON body")
    images = {part.name: part for part in parts[1:]}
    try:
        request = json.loads(bytes(parts[0].data))
    except (ValueError, RecursionError):
        request = None
    claimed: set[str] = set()
    assets = request.get("assets") if isinstance(request, dict) else None
    if isinstance(assets, dict):
        request["assets"] = {
            placeholder: _claim(placeholder, asset, images, claimed)
            if isinstance(asset, dict) and "part" in asset
            else asset
            for placeholder, asset in assets.items()
        }
    unclaimed = [name for name in images if name not in claimed]
    if unclaimed:
        raise ApiUsageError(
            f"the part {unclaimed[0][:60]!r} is not claimed by any asset; each part after {REQUEST_PART!r} must be "
            "named by exactly one asset's 'part'"
        )
    if not isinstance(request, dict):
        return bytes(parts[0].data)
    return json.dumps(request).encode("utf-8")
