"""Images (issue 14, items 6 and 13): phone-camera MPO JPEGs are read, a non-string asset format
is refused naming the asset, and decoding is bounded in pixels per request and at once across
requests, and reduced to the size the model reads."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from decisiond.errors import ApiUsageError
from decisiond.media import MediaLimits, collect, decode_all


def _b64(image: Image.Image, fmt: str, **save: object) -> str:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return base64.b64encode(buffer.getvalue()).decode()


def test_an_mpo_jpeg_from_a_phone_camera_is_read_as_jpeg() -> None:
    """Bug: pillow opens a multi-picture JPEG (what phone cameras write) as format MPO, which was not
    among the accepted formats, so a valid JPEG was refused."""
    first, second = Image.new("RGB", (64, 48), (200, 10, 10)), Image.new("RGB", (64, 48), (10, 10, 200))
    data = _b64(first, "MPO", save_all=True, append_images=[second])
    assert Image.open(io.BytesIO(base64.b64decode(data))).format == "MPO"
    (from_url,) = decode_all([f"data:image/jpeg;base64,{data}"], None, MediaLimits())
    (from_asset,) = decode_all(None, {"<p>": {"type": "image", "format": "jpeg", "data_base64": data}}, MediaLimits())
    assert from_url.size == from_asset.size == (64, 48)
    assert from_url.getpixel((32, 24))[0] > 150  # the first picture, the one a viewer shows


@pytest.mark.parametrize("declared", [5, ["png"], {"x": 1}, True, 2.5])
def test_an_asset_format_that_is_not_a_string_is_refused_naming_the_asset(declared: object) -> None:
    """Bug: ``"format": 5`` was silently treated as undeclared."""
    asset = {"type": "image", "format": declared, "data_base64": _b64(Image.new("RGB", (4, 4)), "PNG")}
    with pytest.raises(ApiUsageError, match=r"asset '<p>'.*format"):
        collect(None, {"<p>": asset}, MediaLimits())
