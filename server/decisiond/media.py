"""Images of a request: both wire shapes decoded, checked and normalised with pillow.

spec/wire.md §2 allows two shapes, read here in one order: first the top-level ``images`` array
of base64 data URLs (``data:image/png|jpeg|webp;base64,...``), then the ``assets`` map
(placeholder → ``{"type": "image", "format": "png"|"jpeg"|"webp", "data_base64": "..."}``) in the
order sent. Image *i* below is the i-th image of that order, counting from 0.

Every image is refused with a 400 :class:`~decisiond.errors.ApiUsageError` that names its index
and the problem, before any inference: an ``http(s)`` URL (a server never fetches), anything but
a base64 data URL, malformed base64, a format other than PNG, JPEG or WebP (or one that is not
what was declared), more than ``max_images`` images, a file over ``max_image_bytes``, more than
``max_image_pixels`` pixels (checked from the header, before the pixels are decompressed: the
decompression-bomb guard, with pillow's own ``DecompressionBombWarning`` turned into an error as
a second line), more than ``max_request_pixels`` decoded pixels in one request, and a damaged or
truncated file. Accepted images are turned upright by their EXIF orientation
(``ImageOps.exif_transpose``) and converted to RGB.

Memory follows the model's input size, not the file's: given the side the model reads, a JPEG is
decoded already scaled down (pillow's ``draft``: the decoder's 1/2, 1/4 or 1/8 DCT scaling) and any
other format is reduced (``Image.reduce``, a box filter) right after decoding, keeping the shortest
side at least twice the model's so that the model's own resize still has detail to work with. A
:class:`DecodeGate` shared by all requests bounds how many images are being decoded at once.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps

from .errors import ApiUsageError

#: Formats accepted, as pillow names them, with the names a request may declare.
FORMATS: dict[str, tuple[str, ...]] = {"PNG": ("png",), "JPEG": ("jpeg", "jpg"), "WEBP": ("webp",)}
#: Formats pillow reports for files of an accepted format: its JPEG opener gives a multi-picture
#: JPEG (CIPA DC-007, what phone cameras write) as MPO, whose first picture is the JPEG a viewer shows.
VARIANTS: dict[str, str] = {"MPO": "JPEG"}
_DECLARED = {name: fmt for fmt, names in FORMATS.items() for name in names}
_DATA_URL = re.compile(r"^data:image/(?P<format>[A-Za-z0-9.+-]+);base64,(?P<data>.*)$", re.DOTALL)


@dataclass(frozen=True)
class MediaLimits:
    """What one request may carry.

    Attributes:
        max_images (int): images per request, both shapes together.
        max_image_bytes (int): bytes of one image file, after base64 decoding.
        max_image_pixels (int): width × height of one image, as its header declares it.
        max_request_pixels (int): pixels decoded for one request, all images together (after a
            JPEG's scaled decoding).
    """

    max_images: int = 16
    max_image_bytes: int = 8 * 1024 * 1024
    max_image_pixels: int = 25_000_000
    max_request_pixels: int = 100_000_000


class DecodeGate:
    """How many images may be decoded at once, across all requests (a bounded semaphore).

    Attributes:
        limit (int): decodes at once.
        peak (int): the most decodes seen at once.
        decoded (int): images decoded through the gate.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the decode limit must be at least 1, got {limit}")
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._active = 0
        self.peak = 0
        self.decoded = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one decode slot (blocks while ``limit`` decodes run)."""
        with self._slots:
            with self._lock:
                self._active += 1
                self.peak = max(self.peak, self._active)
            try:
                yield
            finally:
                with self._lock:
                    self._active -= 1
                    self.decoded += 1


@dataclass(frozen=True)
class EncodedImage:
    """One image as sent, before decoding.

    Attributes:
        where (str): how a message names it, e.g. ``"image 0"`` or ``"image 1 (asset '<img>')"``.
        declared (str | None): the format the request declared, lower case.
        data (str): the base64 text.
    """

    where: str
    declared: str | None
    data: str


def collect(images: list[Any] | None, assets: dict[str, Any] | None, limits: MediaLimits) -> list[EncodedImage]:
    """Both wire shapes → one ordered list of still-encoded images (pure; decodes nothing).

    Raises:
        ApiUsageError: too many images, an URL instead of data, an asset that is not an image.
    """
    found: list[EncodedImage] = []
    for item in images or []:
        where = f"image {len(found)}"
        if not isinstance(item, str):
            raise ApiUsageError(f"{where} is not a string; send a data:image/png;base64,... URL")
        if item[:8].lower().startswith(("http://", "https://")):
            raise ApiUsageError(f"{where} is an http(s) URL; decisiond never fetches images, send a base64 data URL")
        match = _DATA_URL.match(item.strip())
        if match is None:
            raise ApiUsageError(f"{where} is not a base64 data URL (data:image/png|jpeg|webp;base64,...)")
        found.append(EncodedImage(where, match["format"].lower(), match["data"]))
    for placeholder, asset in (assets or {}).items():
        found.append(_asset(f"image {len(found)} (asset {placeholder[:40]!r})", asset))
    if len(found) > limits.max_images:
        raise ApiUsageError(f"the request carries {len(found)} images; the limit is {limits.max_images}")
    return found


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside a JSON value: strings, object keys and values, list items (pure)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_of(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_of(item)


def check_placeholders(assets: dict[str, Any] | None, texts: Iterable[str]) -> None:
    """Every asset's placeholder must appear in a text the model reads (the state, an instruction, a
    criterion), where the image belongs (spec/wire.md §2, §8); an asset no text refers to would be
    read nowhere, and a server never silently drops media.

    Args:
        assets (dict[str, Any] | None): the request's ``assets``, keyed by placeholder.
        texts (Iterable[str]): every string of the state and the questions (see :func:`strings_of`).

    Raises:
        ApiUsageError: an empty placeholder, or one that appears in no text, named.
    """
    if not assets:
        return
    texts = list(texts)
    for index, placeholder in enumerate(assets):
        if not placeholder:
            raise ApiUsageError(f"asset {index} has an empty placeholder; name it, and put the name where the image is")
        if not any(placeholder in text for text in texts):
            raise ApiUsageError(
                f"asset {placeholder[:40]!r} is not referenced: put its placeholder in the state, an instruction or a "
                "criterion, where the image belongs"
            )


def image_names(images: list[Any] | None, assets: dict[str, Any] | None) -> tuple[str | None, ...]:
    """Each image's placeholder in the order of :func:`collect`: None for every ``images`` entry, then
    the ``assets`` keys (pure)."""
    return (None,) * len(images or []) + tuple(assets or {})


def _asset(where: str, asset: Any) -> EncodedImage:
    """One ``assets`` entry, still encoded.

    Raises:
        ApiUsageError: not an image asset, no base64 string, an URL, a format that is not a string.
    """
    if not isinstance(asset, dict) or asset.get("type") != "image":
        raise ApiUsageError(f"{where} is not {{'type': 'image', 'format': ..., 'data_base64': ...}}")
    data = asset.get("data_base64")
    if not isinstance(data, str):
        raise ApiUsageError(f"{where} has no data_base64 string")
    if data[:8].lower().startswith(("http://", "https://")):
        raise ApiUsageError(f"{where} is an http(s) URL; decisiond never fetches images, send base64 data")
    declared = asset.get("format")
    if declared is not None and not isinstance(declared, str):
        raise ApiUsageError(f'{where} has a format that is not a string; send "png", "jpeg" or "webp"')
    return EncodedImage(where, declared.lower() if isinstance(declared, str) else None, data)


def decode_image(
    image: EncodedImage, limits: MediaLimits, side: int | None = None, budget: int | None = None
) -> Image.Image:
    """Decode, check and normalise one image.

    Args:
        image (EncodedImage): as sent.
        limits (MediaLimits): the bounds.
        side (int, optional): the side the model reads, in pixels; the image is decoded or reduced to
            a shortest side of at least ``2 * side``. Defaults to the file's size.
        budget (int, optional): decoded pixels the request has left. Defaults to ``max_request_pixels``.

    Returns:
        Image.Image: an upright RGB image, fully loaded; ``info["decoded_pixels"]`` says how many
        pixels were decoded for it (before any reduction).

    Raises:
        ApiUsageError: malformed base64, unsupported or mismatched format, too many bytes or
            pixels, a damaged or truncated file; the message names ``image.where``.
    """
    where = image.where
    if image.declared is not None and image.declared not in _DECLARED:
        raise ApiUsageError(f"{where} is declared as {image.declared[:20]!r}; send PNG, JPEG or WebP")
    if len(image.data) > 4 * (limits.max_image_bytes // 3 + 2) + 1024:  # before decoding anything
        raise ApiUsageError(f"{where} is over the limit of {limits.max_image_bytes} bytes")
    try:
        raw = base64.b64decode("".join(image.data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ApiUsageError(f"{where} is not valid base64") from None
    if len(raw) > limits.max_image_bytes:
        raise ApiUsageError(f"{where} is {len(raw)} bytes, over the limit of {limits.max_image_bytes} bytes")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            opened = Image.open(io.BytesIO(raw), formats=list(FORMATS))  # JPEG opens an MPO too
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ApiUsageError(
                f"{where} declares more pixels than pillow will decode (a decompression bomb)"
            ) from None
        except (OSError, SyntaxError, ValueError):
            raise ApiUsageError(f"{where} is not a PNG, JPEG or WebP image") from None
        _check_header(opened, image, limits)
        try:
            if side is not None and opened.format in ("JPEG", "MPO"):
                opened.draft("RGB", _wanted(opened.size, side))  # decode scaled: 1/2, 1/4 or 1/8
            _check_budget(opened, image, limits, limits.max_request_pixels if budget is None else budget)
            opened.load()
            opened.info["decoded_pixels"] = opened.width * opened.height
            if side is not None and (factor := min(opened.size) // (2 * side)) > 1:
                opened = opened.reduce(factor)
            upright = ImageOps.exif_transpose(opened)
        except (OSError, SyntaxError, ValueError):
            raise ApiUsageError(f"{where} is damaged or truncated") from None
    rgb = upright.convert("RGB")
    rgb.info["decoded_pixels"] = opened.info["decoded_pixels"]
    return rgb


def _wanted(size: tuple[int, int], side: int) -> tuple[int, int]:
    """The smallest size keeping the aspect ratio with a shortest side of ``2 * side`` (or ``size``)."""
    scale = min(1.0, 2 * side / max(1, min(size)))
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def _check_budget(opened: Image.Image, image: EncodedImage, limits: MediaLimits, budget: int) -> None:
    """Refuse an image whose decoded pixels would take the request past ``max_request_pixels``."""
    width, height = opened.size
    if width * height > budget:
        raise ApiUsageError(
            f"{image.where} would take the request past {limits.max_request_pixels} decoded pixels per request "
            f"(it decodes to {width}x{height}); send fewer or smaller images"
        )


def _check_header(opened: Image.Image, image: EncodedImage, limits: MediaLimits) -> None:
    """Format and pixel checks on what the header says, before any pixel is decompressed."""
    fmt = VARIANTS.get(opened.format or "?", opened.format or "?")
    if image.declared is not None and _DECLARED[image.declared] != fmt:
        raise ApiUsageError(f"{image.where} is declared as {image.declared} but its data is {fmt}")
    width, height = opened.size
    if width * height > limits.max_image_pixels:
        raise ApiUsageError(
            f"{image.where} is {width}x{height} pixels, over the limit of {limits.max_image_pixels} pixels"
        )


def decode_all(
    images: list[Any] | None,
    assets: dict[str, Any] | None,
    limits: MediaLimits | None = None,
    gate: DecodeGate | None = None,
    *,
    side: int | None = None,
) -> tuple[Image.Image, ...]:
    """Every image of a request, in wire order, checked and decoded (call on a request thread).

    Args:
        images (list | None): the ``images`` field.
        assets (dict | None): the ``assets`` field.
        limits (MediaLimits, optional): the bounds. Defaults to ``MediaLimits()``.
        gate (DecodeGate, optional): shared by all requests; each image holds a slot while it is
            decoded. Defaults to no bound across requests.
        side (int, optional): the side the model reads (see :func:`decode_image`).

    Raises:
        ApiUsageError: the first problem found, naming the image.
    """
    limits = limits or MediaLimits()
    decoded: list[Image.Image] = []
    budget = limits.max_request_pixels
    for image in collect(images, assets, limits):
        with gate.slot() if gate is not None else _no_gate():
            picture = decode_image(image, limits, side, budget)
        budget -= picture.info["decoded_pixels"]
        decoded.append(picture)
    return tuple(decoded)


@contextmanager
def _no_gate() -> Iterator[None]:
    yield
