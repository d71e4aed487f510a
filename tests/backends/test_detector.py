"""The detector backend on a tiny random OWLv2, served over HTTP: every question type about a photo,
boxes checked against transformers' own forward and post-processing, EXIF orientation, which image
a box is about, refusals, and the official SDK asking a box question about an uploaded PNG."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from PIL import Image

from decisiond.app import create_app
from decisiond.backends.detector import DetectorBackend
from decisiond.config import Settings
from decisiond.inprocess import BackgroundServer
from decisiond.manifest import read_manifest
from decisiond.service import Service, load_model
from decisiond.testing.tiny import build_owl, tiny_manifest, write_manifest

QUESTIONS: dict[str, Any] = {
    "where": {"type": "box", "instructions": "a dog"},
    "dog": {"type": "noul", "instructions": "a dog"},
    "animal": {"type": "choice", "instructions": "Which animal?", "criteria": {"cat": None, "dog": "a brown dog"}},
    "size": {"type": "score", "instructions": "How big is it?", "criteria": ["tiny", "small", "large"]},
}


def noise(size: tuple[int, int], seed: int) -> Image.Image:
    """A seeded random-noise RGB image (candidates' logits differ from patch to patch)."""
    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (size[1], size[0], 3), generator=generator, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy(), "RGB")


def png(image: Image.Image, orientation: int | None = None) -> bytes:
    buffer = io.BytesIO()
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation  # EXIF Orientation
    image.save(buffer, format="PNG", exif=exif)
    return buffer.getvalue()


def asset(data: bytes) -> dict[str, str]:
    return {"type": "image", "format": "png", "data_base64": base64.b64encode(data).decode()}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    settings = Settings(device="cpu", dtype="float32", max_wait_ms=0)
    served = Service(
        [load_model(read_manifest(tiny_manifest("detector", tmp_path_factory.mktemp("det"))), settings)], settings
    )
    yield served
    served.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service.settings, service=service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http


async def ask(client: httpx.AsyncClient, questions: dict[str, Any], **media: Any) -> dict[str, Any]:
    response = await client.post("/v1/systemone", json={"state": "A photo: <photo>", "questions": questions, **media})
    assert response.status_code == 200, response.text
    answers: dict[str, Any] = response.json()["answers"]
    return answers


async def test_every_question_type_about_one_photo_has_its_shape_and_range(client: httpx.AsyncClient) -> None:
    answers = await ask(client, QUESTIONS, assets={"<photo>": asset(png(noise((40, 24), 1)))})
    assert list(answers) == list(QUESTIONS)
    box = answers["where"]
    assert box["type"] == "box" and set(box["box"]) == {"top", "bottom", "left", "right"}
    edges = box["box"]
    assert 0 <= edges["top"] <= edges["bottom"] <= 1 and 0 <= edges["left"] <= edges["right"] <= 1
    assert 0 <= box["confidence"] <= 1
    assert 0 <= answers["dog"]["noul"] <= 1
    assert answers["animal"]["choice"] in {"cat", "dog"}
    assert abs(sum(answers["animal"]["probabilities"].values()) - 1) < 1e-3
    assert 0 <= answers["size"]["score"] <= 2 and 0 <= answers["size"]["confidence"] <= 1


def reference_box(backend: DetectorBackend, image: Image.Image, query: str) -> tuple[list[float], float]:
    """The box and confidence recomputed from the model's own ``forward`` and the processor's
    ``post_process_object_detection``: boxes in pixels of the square the model saw (the padded
    square for OWLv2, the image itself for OWL-ViT, which stretches it), divided by the image's own
    width and height; candidates centred outside the image left out; softmax; expectation."""
    width, height = image.size
    side = max(width, height)
    target = (side, side) if backend.pads_to_square else (height, width)
    encoded = backend.tokenizer([query], return_tensors="pt")
    pixels = backend.image_processor(images=[image], return_tensors="pt")["pixel_values"]
    with torch.inference_mode():
        out = backend.model(
            input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], pixel_values=pixels
        )
    post = backend.image_processor.post_process_object_detection(out, threshold=-1.0, target_sizes=[target])
    x0, y0, x1, y1 = post[0]["boxes"].unbind(1)
    logits = out.logits[0, :, 0]
    inside = ((x0 + x1) / 2 <= width + 1e-3) & ((y0 + y1) / 2 <= height + 1e-3)
    p = torch.softmax(logits[inside], dim=0)
    edges = torch.stack([y0 / height, x0 / width, y1 / height, x1 / width], dim=1)[inside]
    return (p @ edges).clamp(0, 1).tolist(), torch.sigmoid(logits[inside].max()).item()


async def test_box_and_noul_equal_transformers_own_forward_and_post_processing(
    client: httpx.AsyncClient, service: Service
) -> None:
    image = noise((40, 24), 2)  # not square: OWLv2's padding must be undone
    answers = await ask(client, QUESTIONS, assets={"<photo>": asset(png(image))})
    backend = service.default.backend
    assert isinstance(backend, DetectorBackend) and backend.pads_to_square
    (top, left, bottom, right), confidence = reference_box(backend, image, "a dog")
    got = answers["where"]["box"]
    assert got == pytest.approx({"top": top, "left": left, "bottom": bottom, "right": right}, abs=2e-4)
    assert answers["where"]["confidence"] == pytest.approx(confidence, abs=2e-4)
    assert answers["dog"]["noul"] == pytest.approx(answers["where"]["confidence"], abs=1.01e-4)  # one formula


async def test_owl_vit_boxes_need_no_padding_correction(tmp_path: Path) -> None:
    """OWL-ViT (v1) stretches an image to its square instead of padding it: its boxes are fractions of
    the image already, and the same backend reads them unscaled."""
    folder = build_owl(tmp_path / "owlvit", version=1)
    manifest = write_manifest(
        tmp_path / "owlvit.toml",
        name="owlvit",
        backend="detector",
        weights={"path": str(folder)},
        window=16,
        overlap=4,
        modalities=["text", "image"],
    )
    settings = Settings(device="cpu", dtype="float32", max_wait_ms=0)
    service = Service([load_model(read_manifest(manifest), settings)], settings)
    try:
        backend = service.default.backend
        assert isinstance(backend, DetectorBackend) and not backend.pads_to_square
        image = noise((40, 24), 9)
        app = create_app(settings, service=service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            answers = await ask(http, QUESTIONS, assets={"<photo>": asset(png(image))})
    finally:
        service.close()
    (top, left, bottom, right), confidence = reference_box(backend, image, "a dog")
    got = answers["where"]["box"]
    assert got == pytest.approx({"top": top, "left": left, "bottom": bottom, "right": right}, abs=2e-4)
    assert answers["where"]["confidence"] == pytest.approx(confidence, abs=2e-4)


@pytest.mark.parametrize(("orientation", "stored"), [(6, Image.Transpose.ROTATE_90), (8, Image.Transpose.ROTATE_270)])
async def test_exif_orientation_turns_the_picture_before_the_box_is_located(
    client: httpx.AsyncClient, orientation: int, stored: Image.Transpose
) -> None:
    """A camera stores the pixels turned and says so in EXIF; the box must be the one of the picture as
    a person sees it (the upright image), not of the stored pixels."""
    upright = noise((40, 24), 3)
    sideways = upright.transpose(stored)  # what the camera wrote; EXIF ``orientation`` turns it back
    box = {"where": QUESTIONS["where"]}
    expected = (await ask(client, box, assets={"<photo>": asset(png(upright))}))["where"]
    turned = (await ask(client, box, assets={"<photo>": asset(png(sideways, orientation))}))["where"]
    raw = (await ask(client, box, assets={"<photo>": asset(png(sideways))}))["where"]
    assert turned["box"] == pytest.approx(expected["box"], abs=1e-4)
    assert turned["confidence"] == pytest.approx(expected["confidence"], abs=1e-4)
    assert max(abs(raw["box"][k] - expected["box"][k]) for k in expected["box"]) > 1e-3  # the test can fail


async def test_a_box_is_about_the_image_its_instructions_name(client: httpx.AsyncClient) -> None:
    a, b = png(noise((40, 24), 4)), png(noise((30, 30), 5))
    named = {"where": {"type": "box", "instructions": "<b> a dog"}, "dog": QUESTIONS["dog"]}
    both = await ask(client, named, assets={"<photo>": asset(a), "<b>": asset(b)})  # each placeholder referenced
    only_b = await ask(client, {"where": QUESTIONS["where"]}, assets={"<photo>": asset(b)})
    assert both["where"] == only_b["where"]  # the placeholder is not part of the query text
    # a noul about several images: the best candidate over all of them
    alone = [await ask(client, {"dog": QUESTIONS["dog"]}, assets={"<photo>": asset(x)}) for x in (a, b)]
    nouls = [answers["dog"]["noul"] for answers in alone]
    assert both["dog"]["noul"] == max(nouls)


@pytest.mark.parametrize(
    ("instructions", "media", "message"),
    [
        ("a dog", {}, "question 'where' is a box question, but the request carries no image"),
        ("a dog", "two", "question 'where' is a box question, and the request carries 2 images but its instructions"),
        ("<a> or <b>", "two", "question 'where' is a box question whose instructions name 2 images"),
    ],
)
async def test_a_box_not_about_exactly_one_image_is_400_naming_the_question(
    client: httpx.AsyncClient, instructions: str, media: Any, message: str
) -> None:
    if media == "two":
        media = {"assets": {"<a>": asset(png(noise((20, 20), 6))), "<b>": asset(png(noise((20, 20), 7)))}}
    body = {"state": "x", "questions": {"where": {"type": "box", "instructions": instructions}}, **media}
    response = await client.post("/v1/systemone", json=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["detail"]["message"]


def test_a_checkpoint_without_owl_heads_is_refused() -> None:
    with pytest.raises(ValueError, match="Grounding DINO fuses text"):
        DetectorBackend(torch.nn.Linear(1, 1), None, None)  # type: ignore[arg-type]


def test_a_detector_manifest_must_read_images(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='add "image" to modalities'):
        load_model(read_manifest(tiny_manifest("detector", tmp_path, modalities=["text"])), Settings())


def test_the_official_sdk_asks_a_box_question_about_an_uploaded_png(service: Service) -> None:
    from typesafe_sdk import Box, BoxAnswer, Noul, RetryPolicy, TypeSafeClient
    from typesafe_sdk import Image as SdkImage

    photo = png(noise((40, 24), 8))
    with (
        BackgroundServer(create_app(service.settings, service=service)) as server,
        TypeSafeClient(api_key="offline-test", base_url=server.base_url, retry=RetryPolicy(max_retries=0)) as sdk,
    ):
        result = sdk.system_one(
            state=SdkImage(photo), questions={"where": Box(instructions="a dog"), "dog": Noul(instructions="a dog")}
        )
        by_json = httpx.post(
            f"{server.base_url}/v1/systemone",
            json={"state": "<photo>", "questions": {"where": QUESTIONS["where"]}, "assets": {"<photo>": asset(photo)}},
        ).json()["answers"]["where"]
    answer = result.boxes["where"]
    assert isinstance(answer, BoxAnswer)  # the SDK's own type, parsed from decisiond's answer
    assert answer.model_dump() == by_json  # the upload is the same image as the JSON asset
    assert 0 <= answer.box.top <= answer.box.bottom <= 1 and 0 <= answer.box.left <= answer.box.right <= 1
    assert answer.confidence == pytest.approx(result.nouls["dog"].noul, abs=1.01e-4)  # noul: largest remainder
