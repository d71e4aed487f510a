"""Both official SDKs (PyPI ``typesafe-sdk[zstd]``, npm ``@typesafe-ai/sdk``) against a live decisiond,
through every request shape they send: sync and async, zstd-compressed and plain, images as JSON
assets and as multipart uploads (the tiny CLIP model), request ids, a pinned hosted model id, 529
and 503 with Retry-After, and a box question refused.

The JavaScript checks run ``tests/js/sdk_check.mjs`` with node; ``scripts/test.sh`` installs its
pinned dependency (``npm ci`` in ``tests/js``) wherever node is present, and they are skipped only
where node is not.
"""

from __future__ import annotations

import base64
import io
import json
import random
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from PIL import Image as PILImage
from typesafe_sdk import (
    AsyncTypeSafeClient,
    Box,
    Choice,
    Image,
    Noul,
    RetryPolicy,
    Score,
    TypeSafeBadRequestError,
    TypeSafeClient,
    TypeSafeInternalServerError,
)

from decisiond.app import create_app
from decisiond.backends.fake import FakeBackend
from decisiond.config import Settings
from decisiond.inprocess import BackgroundServer
from decisiond.manifest import Manifest, Weights, read_manifest
from decisiond.service import ServedModel, Service, load_model, start_engine
from decisiond.testing.tiny import tiny_manifest

from .conftest import GatedFake, fake_manifest

JS = Path(__file__).parent / "js"
PINNED = "jev-1.13"
TEXT, VISION = "text-model", "tiny-clip"
QUESTIONS = {
    "team": Choice(instructions="Which team should handle this?", criteria={"billing": "Refunds", "technical": None}),
    "urgent": Noul(instructions="Does it need an answer today?"),
    "mood": Score(instructions="How upset is the customer?", criteria=["Calm", "Annoyed", "Furious"]),
}
#: Over the SDK's 1 KiB threshold, so the default client sends it zstd-compressed.
LONG_STATE = "I was charged twice for one order and I need the duplicate refunded today. " * 20


class Recording(httpx2.HTTPTransport):
    """The SDK's own transport, noting what each attempt sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, str | None]] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append({name: request.headers.get(name) for name in _NOTED})
        return super().handle_request(request)


class AsyncRecording(httpx2.AsyncHTTPTransport):
    """The async SDK's transport, noting what each attempt sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, str | None]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append({name: request.headers.get(name) for name in _NOTED})
        return await super().handle_async_request(request)


_NOTED = ("content-encoding", "content-type", "x-typesafe-retry-count", "x-typesafe-sdk")


def _png() -> bytes:
    """A 48x48 noise PNG (over 1 KiB, so an upload is compressed too)."""
    rng = random.Random(7)
    image = PILImage.new("RGB", (48, 48))
    image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(48 * 48)])
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


PNG = _png()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """decisiond on a free port: a text model (the default, so it answers the hosted ids) and the tiny
    CLIP model, which reads images (and answers only about them)."""
    settings = Settings(max_wait_ms=0)
    clip = load_model(read_manifest(tiny_manifest("clip", tmp_path_factory.mktemp("clip"))), settings)
    fake = FakeBackend()
    text = ServedModel(
        Manifest(name=TEXT, backend="fake", weights=Weights(path=".")), fake, start_engine(fake, settings)
    )
    service = Service([text, clip], settings)
    with BackgroundServer(create_app(settings, service=service)) as running:
        yield running
    service.close()


def _client(base_url: str, transport: httpx2.BaseTransport | None = None, **options: Any) -> TypeSafeClient:
    options.setdefault("retry", RetryPolicy(max_retries=0))
    return TypeSafeClient(api_key="offline-test", base_url=base_url, transport=transport, **options)


def test_the_default_client_compresses_with_zstd_and_gets_the_same_answers(server: BackgroundServer) -> None:
    recording = Recording()
    with _client(server.base_url, recording) as sdk, _client(server.base_url, compression=False) as plain:
        packed = sdk.system_one(LONG_STATE, QUESTIONS)
        unpacked = plain.system_one(LONG_STATE, QUESTIONS)
    assert recording.sent[0]["content-encoding"] == "zstd"  # the SDK's default wherever zstd is available
    assert recording.sent[0]["x-typesafe-sdk"].startswith("typesafe-sdk/")
    assert packed.model == unpacked.model == TEXT
    assert packed.answers == unpacked.answers
    assert sum(round(p * 10_000) for p in packed.choices["team"].probabilities.values()) == 10_000
    assert packed.request_id == packed.raw_http_response.headers["x-request-id"]


async def test_the_async_client_through_both_shapes(server: BackgroundServer) -> None:
    recording = AsyncRecording()
    async with AsyncTypeSafeClient(
        api_key="offline-test", base_url=server.base_url, transport=recording, retry=RetryPolicy(max_retries=0)
    ) as sdk:
        short = await sdk.system_one("Charged twice.", QUESTIONS)
        long = await sdk.system_one(LONG_STATE, QUESTIONS)
        photo = Image(PNG)
        with sdk.attach_assets(photo):
            seen = await sdk.system_one(
                f"Product photo: {photo}", {"damaged": Noul(instructions="Is it damaged?")}, model=VISION
            )
    assert [s["content-encoding"] for s in recording.sent] == [None, "zstd", "zstd"]
    assert recording.sent[2]["content-type"].startswith("multipart/form-data")
    assert short.model == long.model == TEXT and seen.model == VISION
    assert set(short.answers) == set(QUESTIONS) and 0 <= seen.nouls["damaged"].noul <= 1
    assert short.request_id and long.request_id != short.request_id


@pytest.mark.parametrize("compression", [None, False])
def test_multipart_images_answer_as_json_assets_do(server: BackgroundServer, compression: bool | None) -> None:
    """The SDK uploads images as multipart (zstd-compressed by default); the same image as a JSON
    asset, the shape other clients send, gets the same answer."""
    recording = Recording()
    photo = Image(PNG)
    questions = {"damaged": Noul(instructions="Is the product damaged?"), **QUESTIONS}
    as_json = {"<image:a>": {"type": "image", "format": "png", "data_base64": base64.b64encode(PNG).decode()}}
    with _client(server.base_url, recording, compression=compression, model=VISION) as sdk:
        uploaded = sdk.system_one("Product photo: <image:a>", questions, assets={"<image:a>": photo})
        inline = sdk.system_one("Product photo: <image:a>", questions, extra_body={"assets": as_json})
    assert recording.sent[0]["content-type"].startswith("multipart/form-data")
    assert recording.sent[0]["content-encoding"] == ("zstd" if compression is None else None)
    assert recording.sent[1]["content-type"] == "application/json"
    assert uploaded.answers == inline.answers
    assert uploaded.usage == inline.usage


def test_a_pinned_hosted_id_is_answered_and_an_unknown_one_refused(server: BackgroundServer) -> None:
    with _client(server.base_url, model=PINNED) as sdk:
        pinned = sdk.system_one("Charged twice.", QUESTIONS)
        assert pinned.model == TEXT  # the model that answered, as the hosted service names it
        with pytest.raises(TypeSafeBadRequestError) as refused:
            sdk.system_one("Charged twice.", QUESTIONS, model="jev-0.0-does-not-exist")
        names = [m.name for m in sdk.models.list().models]
    assert "unknown model" in str(refused.value) and refused.value.request_id
    assert names == [TEXT, VISION]


def test_a_box_is_refused_with_400_naming_the_question(server: BackgroundServer) -> None:
    photo = Image(PNG)
    with _client(server.base_url, model=VISION) as sdk, pytest.raises(TypeSafeBadRequestError) as refused:
        sdk.system_one(photo, {"where": Box(instructions="the product")})  # the image placed as the state
    assert refused.value.status == 400 and "'where' is a box question" in str(refused.value)
    assert refused.value.body["detail"]["error_type"] == "api_usage_error"


@pytest.fixture
def busy() -> Iterator[tuple[BackgroundServer, GatedFake]]:
    """A server whose model thread is blocked on one request with one more queued (max_queue 1):
    the next request finds the queue full."""
    settings = Settings(max_wait_ms=0, max_queue=1)
    backend = GatedFake()
    service = Service([ServedModel(fake_manifest(), backend, start_engine(backend, settings))], settings)
    body = {"state": "s", "questions": {"q": {"type": "noul", "instructions": "Urgent?"}}}
    with BackgroundServer(create_app(settings, service=service)) as running:
        holders = [
            threading.Thread(
                target=httpx.post, args=(running.base_url + "/v1/systemone",), kwargs={"json": body, "timeout": 30}
            )
            for _ in range(2)
        ]
        holders[0].start()
        assert backend.entered.wait(10)
        holders[1].start()
        for _ in range(500):
            if service.default.engine.queue_depth() == 1:
                break
            threading.Event().wait(0.01)
        yield running, backend
        backend.gate.set()
        for holder in holders:
            holder.join(10)
    service.close()


def test_a_full_queue_is_529_with_retry_after_which_the_sdk_waits_out(busy: tuple[BackgroundServer, GatedFake]) -> None:
    server, backend = busy
    with _client(server.base_url) as sdk, pytest.raises(TypeSafeInternalServerError) as refused:
        sdk.system_one("Charged twice.", {"q": Noul(instructions="Urgent?")})
    assert refused.value.status == 529 and refused.value.headers["retry-after"] == "1"
    assert refused.value.body["detail"]["error_type"] == "overloaded_error" and refused.value.request_id
    recording = Recording()
    threading.Timer(0.3, backend.gate.set).start()  # the queue drains before the SDK's retry, 1 s later
    with _client(server.base_url, recording, retry=RetryPolicy(max_retries=2)) as sdk:
        answer = sdk.system_one("Charged twice.", {"q": Noul(instructions="Urgent?")})
    assert answer.model == "fake-1"
    assert [s["x-typesafe-retry-count"] for s in recording.sent] == [None, "1"]


def test_loading_and_stopping_are_503_with_retry_after() -> None:
    settings = Settings(max_wait_ms=0)
    backend = FakeBackend()
    service = Service([ServedModel(fake_manifest(), backend, start_engine(backend, settings))], settings)
    app = create_app(settings, service=service)
    runtime = app.state.runtime
    with BackgroundServer(app) as running, _client(running.base_url) as sdk:
        runtime.service, runtime.status = None, "loading"  # as it is while the model loads
        with pytest.raises(TypeSafeInternalServerError) as loading:
            sdk.system_one("x", {"q": Noul(instructions="Urgent?")})
        runtime.service, runtime.status, runtime.draining = service, "ok", True
        with pytest.raises(TypeSafeInternalServerError) as stopping:
            sdk.system_one("x", {"q": Noul(instructions="Urgent?")})
        runtime.draining = False
    service.close()
    assert loading.value.status == stopping.value.status == 503
    assert loading.value.headers["retry-after"] == "2" and stopping.value.headers["retry-after"] == "5"
    assert loading.value.request_id and stopping.value.request_id


def _node(config: dict[str, Any], *scenarios: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the JavaScript SDK checks need it")
    if not (JS / "node_modules" / "@typesafe-ai" / "sdk").is_dir():
        pytest.fail("the JavaScript SDK is not installed: run `npm ci` in tests/js (scripts/test.sh does)")
    done = subprocess.run(
        [node, str(JS / "sdk_check.mjs"), json.dumps(config), *scenarios],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_javascript_sdk_through_every_path(server: BackgroundServer) -> None:
    config = {"url": server.base_url, "png_base64": base64.b64encode(PNG).decode(), "model": PINNED, "vision": VISION}
    out = _node(config, "plain", "pinned", "unknown", "assets", "box", "models")
    plain = out["plain"]
    assert plain["model"] == TEXT and set(plain["answers"]) == {"team", "urgent", "mood"}
    assert plain["requestId"] and plain["requestId"] == plain["xRequestId"]
    assert sum(round(p * 10_000) for p in plain["answers"]["mood"]["probabilities"].values()) == 10_000
    assert out["pinned"]["model"] == TEXT
    assert out["unknown"]["status"] == 400 and out["unknown"]["error"] == "BadRequestError"
    assert out["unknown"]["requestId"]
    assert out["assets"]["model"] == VISION and out["assets"]["usage"]["input_tokens"] > 0
    assert out["box"]["status"] == 400 and "box" in out["box"]["message"]
    assert [m["name"] for m in out["models"]["models"]] == [TEXT, VISION]


def test_the_javascript_sdk_reads_529_and_503(busy: tuple[BackgroundServer, GatedFake]) -> None:
    server, _ = busy
    out = _node({"url": server.base_url, "png_base64": "", "model": PINNED, "vision": VISION}, "plain")
    assert out["plain"]["status"] == 529 and out["plain"]["error"] == "InternalServerError"
    assert out["plain"]["retryAfter"] == "1" and out["plain"]["requestId"]
    settings = Settings(max_wait_ms=0)
    backend = FakeBackend()
    service = Service([ServedModel(fake_manifest(), backend, start_engine(backend, settings))], settings)
    app = create_app(settings, service=service)
    with BackgroundServer(app) as loading:
        app.state.runtime.service, app.state.runtime.status = None, "loading"
        out = _node({"url": loading.base_url, "png_base64": "", "model": PINNED, "vision": VISION}, "plain")
    service.close()
    assert out["plain"]["status"] == 503 and out["plain"]["retryAfter"] == "2" and out["plain"]["requestId"]
