"""Image decoding: orientation, colour mode, formats and the order of the two wire shapes."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from decisiond.errors import ApiUsageError
from decisiond.media import MediaLimits, collect, decode_all


def encoded(image: Image.Image, fmt: str, **save: object) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **save)
    return base64.b64encode(buffer.getvalue()).decode()


def test_exif_orientation_is_applied() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    wide = Image.new("RGB", (40, 20), (255, 0, 0))
    (image,) = decode_all([f"data:image/jpeg;base64,{encoded(wide, 'JPEG', exif=exif)}"], None, MediaLimits())
    assert image.size == (20, 40)


@pytest.mark.parametrize(
    ("mode", "fmt"), [("L", "PNG"), ("RGBA", "PNG"), ("P", "PNG"), ("RGBA", "WEBP"), ("CMYK", "JPEG")]
)
def test_every_accepted_image_becomes_rgb(mode: str, fmt: str) -> None:
    (image,) = decode_all(
        None,
        {"<i>": {"type": "image", "format": fmt.lower(), "data_base64": encoded(Image.new(mode, (8, 6)), fmt)}},
        MediaLimits(),
    )
    assert image.mode == "RGB" and image.size == (8, 6)


def test_images_come_before_assets_and_assets_keep_their_order() -> None:
    data = encoded(Image.new("RGB", (4, 4)), "PNG")
    assets = {
        "<b>": {"type": "image", "format": "png", "data_base64": data},
        "<a>": {"type": "image", "format": "jpg", "data_base64": data},
    }
    found = collect([f"data:image/png;base64,{data}"], assets, MediaLimits())
    assert [image.where for image in found] == ["image 0", "image 1 (asset '<b>')", "image 2 (asset '<a>')"]
    assert [image.declared for image in found] == ["png", "png", "jpg"]


def test_a_jpeg_declared_as_jpg_is_read_but_declared_as_png_is_refused() -> None:
    data = encoded(Image.new("RGB", (4, 4)), "JPEG")
    assert len(decode_all(None, {"<a>": {"type": "image", "format": "jpg", "data_base64": data}}, MediaLimits())) == 1
    with pytest.raises(ApiUsageError, match="declared as png but its data is JPEG"):
        decode_all([f"data:image/png;base64,{data}"], None, MediaLimits())


def test_base64_with_line_breaks_is_read() -> None:
    data = encoded(Image.new("RGB", (4, 4)), "PNG")
    wrapped = "\n".join(data[i : i + 20] for i in range(0, len(data), 20))
    assert len(decode_all([f"data:image/png;base64,{wrapped}"], None, MediaLimits())) == 1
