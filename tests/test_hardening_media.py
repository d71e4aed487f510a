"""Images (issue 14, items 6 and 13): phone-camera MPO JPEGs are read, a non-string asset format
is refused naming the asset, and decoding is bounded in pixels per request and at once across
requests, and reduced to the size the model reads."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from decisiond.errors import ApiUsageError
from decisiond.media import DecodeGate, MediaLimits, collect, decode_all


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


def test_decoded_pixels_are_bounded_per_request() -> None:
    """Bug: sixteen 5000x5000 PNGs (67 KB on the wire, each within the per-image limit) were all
    decoded at full size, taking the process to 3.3 GiB; a request's decoded pixels had no bound."""
    data = _b64(Image.new("RGB", (2000, 1000)), "PNG")
    limits = MediaLimits(max_request_pixels=5_000_000)
    assert len(decode_all([f"data:image/png;base64,{data}"] * 2, None, limits)) == 2
    with pytest.raises(ApiUsageError, match=r"image 2 .*5000000 decoded pixels per request"):
        decode_all([f"data:image/png;base64,{data}"] * 3, None, limits)


def test_images_are_decoded_to_the_size_the_model_reads() -> None:
    """Bug: every image was kept at its file's size, though the model reads 224 pixels a side: memory
    followed the file, not the model. JPEG is decoded scaled down (pillow's draft), other formats
    reduced right after decoding; the shortest side stays at least twice the model's."""
    photo = Image.new("RGB", (4000, 3000), (120, 40, 200))
    for fmt in ("JPEG", "PNG", "WEBP"):
        (image,) = decode_all([f"data:image/{fmt.lower()};base64,{_b64(photo, fmt)}"], None, MediaLimits(), side=224)
        assert 448 <= min(image.size) < 3000, fmt
        assert abs(image.size[0] / image.size[1] - 4 / 3) < 0.02
        assert abs(image.getpixel((10, 10))[2] - 200) < 8  # the same picture, smaller
    (small,) = decode_all([f"data:image/png;base64,{_b64(Image.new('RGB', (300, 200)), 'PNG')}"], None, side=224)
    assert small.size == (300, 200)


def test_images_decoded_at_once_across_requests_are_bounded() -> None:
    """Bug: any number of requests decoded full-size images at once (three 16-image requests took the
    process to 10.5 GiB); a shared gate now admits ``max_decodes`` decodes at a time."""
    import threading

    gate = DecodeGate(2)
    data = _b64(Image.new("RGB", (1500, 1500), (9, 9, 9)), "PNG")
    threads = [
        threading.Thread(target=decode_all, args=([f"data:image/png;base64,{data}"] * 3, None, MediaLimits(), gate))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert gate.decoded == 18 and 1 <= gate.peak <= 2
