"""The clip backend on a tiny random CLIP, served over HTTP: images in both wire shapes, and every
image refusal as a 400 that names the image and the problem."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from decisiond.app import create_app
from decisiond.backends.clip import ClipBackend
from decisiond.backends.fake import FakeBackend
from decisiond.config import Settings
from decisiond.manifest import Manifest, Weights, read_manifest
from decisiond.service import ServedModel, Service, load_model, start_engine
from decisiond.testing.tiny import tiny_manifest
from tests.tolerance import assert_logits_close

CHOICE = {
    "colour": {
        "type": "choice",
        "instructions": "What colour is it?",
        "criteria": {"red": None, "blue": None, "green": None},
    }
}
ALL_TYPES: dict[str, Any] = {
    **CHOICE,
    "photo": {"type": "noul", "instructions": "Is this a photo?"},
    "bright": {"type": "score", "instructions": "How bright?", "criteria": ["dark", "dim", "bright"]},
}


def png(size: tuple[int, int] = (40, 30), colour: tuple[int, int, int] = (200, 20, 20), fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format=fmt)
    return buffer.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(data: bytes, kind: str = "png") -> str:
    return f"data:image/{kind};base64,{b64(data)}"


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A small valid-looking PNG whose header claims ``width × height`` pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    header = struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    idat = zlib.compress(b"\x00" * 64)
    body = struct.pack(">I", len(idat)) + b"IDAT" + idat + struct.pack(">I", zlib.crc32(b"IDAT" + idat))
    end = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    return b"\x89PNG\r\n\x1a\n" + header + body + end


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A tiny CLIP (default) and a text-only fake model, with small image limits."""
    settings = Settings(max_wait_ms=0, max_images=3, max_image_pixels=10_000, max_image_bytes=20_000)
    clip = load_model(read_manifest(tiny_manifest("clip", tmp_path_factory.mktemp("clip"))), settings)
    fake = FakeBackend()
    text_only = ServedModel(
        Manifest(name="text-only", backend="fake", weights=Weights(path=".")), fake, start_engine(fake, settings)
    )
    served = Service([clip, text_only], settings)
    yield served
    served.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service.settings, service=service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http


async def test_a_choice_about_a_png_in_both_wire_shapes(client: httpx.AsyncClient) -> None:
    image = png()
    by_images = await client.post(
        "/v1/systemone", json={"state": "A picture.", "questions": CHOICE, "images": [data_url(image)]}
    )
    assets = {"<photo>": {"type": "image", "format": "png", "data_base64": b64(image)}}
    by_assets = await client.post(
        "/v1/systemone", json={"state": "A picture: <photo>", "questions": CHOICE, "assets": assets}
    )
    assert by_images.status_code == 200 and by_assets.status_code == 200, (by_images.text, by_assets.text)
    first, second = by_images.json()["answers"]["colour"], by_assets.json()["answers"]["colour"]
    assert first == second  # the same image, whichever shape carried it
    assert first["choice"] in {"red", "blue", "green"} and abs(sum(first["probabilities"].values()) - 1) < 1e-3
    assert by_images.json()["model"] == "tiny-clip"


async def test_all_three_question_types_answer_with_valid_distributions(client: httpx.AsyncClient) -> None:
    body = {
        "state": "x",
        "questions": ALL_TYPES,
        "images": [data_url(png()), data_url(png(colour=(0, 0, 250), fmt="JPEG"), "jpeg")],
    }
    response = await client.post("/v1/systemone", json=body)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert list(answers) == list(ALL_TYPES)
    assert 0 <= answers["photo"]["noul"] <= 1 and 0 <= answers["bright"]["score"] <= 2
    for key in ("colour", "bright"):
        probabilities = list(answers[key]["probabilities"].values())
        assert abs(sum(probabilities) - 1) < 1e-3 and max(probabilities) - min(probabilities) > 1e-3


def test_several_images_are_pooled_by_the_mean_of_their_cosines(service: Service) -> None:
    from decisiond.backends import Work
    from decisiond.render import to_questions
    from decisiond.wire import DecisionRequest

    backend = service.default.backend
    assert isinstance(backend, ClipBackend)
    red, blue = (Image.open(io.BytesIO(png(colour=c))).convert("RGB") for c in [(200, 20, 20), (20, 20, 200)])
    questions = to_questions(DecisionRequest.model_validate({"state": "x", "questions": CHOICE}))
    logits = [
        backend.forward([backend.prepare(Work("x", questions, images))]) for images in [(red,), (blue,), (red, blue)]
    ]
    assert_logits_close(logits[2], (logits[0] + logits[1]) / 2)
    # and a request's answer does not depend on the request it is batched with
    batched = backend.forward(
        [backend.prepare(Work("x", questions, (blue,))), backend.prepare(Work("x", questions, (red,)))]
    )
    assert_logits_close(batched[3:], logits[0])


@pytest.mark.parametrize(
    ("case", "media", "message"),
    [
        ("http URL", {"images": ["https://example.com/cat.png"]}, "image 0 is an http(s) URL"),
        (
            "asset URL",
            {"assets": {"<a>": {"type": "image", "format": "png", "data_base64": "http://x/y.png"}}},
            "image 0 (asset '<a>') is an http(s) URL",
        ),
        ("not a data URL", {"images": ["iVBORw0KGgo="]}, "image 0 is not a base64 data URL"),
        (
            "bad base64",
            {"images": [data_url(png()), "data:image/png;base64,@@not base64@@"]},
            "image 1 is not valid base64",
        ),
        ("wrong format", {"images": [data_url(png(fmt="GIF"), "gif")]}, "image 0 is declared as 'gif'"),
        ("GIF data declared PNG", {"images": [data_url(png(fmt="GIF"))]}, "image 0 is not a PNG, JPEG or WebP image"),
        ("format mismatch", {"images": [data_url(png(fmt="JPEG"))]}, "image 0 is declared as png but its data is JPEG"),
        ("truncated PNG", {"images": [data_url(png(size=(90, 90))[:200])]}, "image 0 is damaged or truncated"),
        ("too many images", {"images": [data_url(png())] * 4}, "carries 4 images; the limit is 3"),
        (
            "too many pixels",
            {"images": [data_url(png(size=(200, 100)))]},
            "image 0 is 200x100 pixels, over the limit of 10000",
        ),
        (
            "too many bytes",
            {"images": ["data:image/png;base64," + "A" * 40_000]},
            "image 0 is over the limit of 20000 bytes",
        ),
        (
            "decompression bomb",
            {"images": [data_url(bomb_png())]},
            "image 0 declares more pixels than pillow will decode",
        ),
        (
            "not an image asset",
            {"assets": {"<a>": {"type": "audio", "format": "wav", "data_base64": "AA=="}}},
            "is not {'type': 'image'",
        ),
    ],
)
async def test_bad_images_are_refused_with_400_naming_the_image(
    client: httpx.AsyncClient, case: str, media: dict[str, Any], message: str
) -> None:
    response = await client.post("/v1/systemone", json={"state": "x", "questions": CHOICE, **media})
    assert response.status_code == 400, case
    detail = response.json()["detail"]
    assert detail["error_type"] == "api_usage_error" and message in detail["message"], detail


async def test_a_clip_request_without_an_image_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/systemone", json={"state": "a red car", "questions": CHOICE})
    assert response.status_code == 400 and "carries none" in response.json()["detail"]["message"]


async def test_media_for_a_text_only_model_is_refused_before_decoding(
    client: httpx.AsyncClient, service: Service
) -> None:
    fake = service.models[1].backend
    assert isinstance(fake, FakeBackend)
    before = len(fake.calls)
    body = {"model": "text-only", "state": "x", "questions": CHOICE, "images": ["data:image/png;base64,@@broken@@"]}
    response = await client.post("/v1/systemone", json=body)
    assert response.status_code == 400
    message = response.json()["detail"]["message"]
    assert "reads only text" in message and "base64" not in message  # refused for the model, not the bytes
    assert len(fake.calls) == before  # nothing reached the model


def test_a_clip_manifest_must_read_images(tmp_path: Path) -> None:
    manifest = read_manifest(tiny_manifest("clip", tmp_path, modalities=["text"]))
    with pytest.raises(ValueError, match='add "image" to modalities'):
        load_model(manifest, Settings())


async def test_a_box_question_to_clip_is_refused_with_400(client: httpx.AsyncClient) -> None:
    """CLIP scores an image against texts but cannot say where anything is: a box is refused before
    inference, naming the question and the model."""
    body = {"state": "x", "questions": {**CHOICE, "where": {"type": "box", "instructions": "the car"}}}
    response = await client.post("/v1/systemone", json={**body, "images": [data_url(png())]})
    assert response.status_code == 400, response.text
    message = response.json()["detail"]["message"]
    assert "'where' is a box question" in message and "tiny-clip" in message
