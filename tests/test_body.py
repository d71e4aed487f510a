"""Request bodies as clients send them (spec/wire.md §8): zstd, gzip and deflate bodies; unknown
encodings 415; the decoded size capped (a compression bomb is 413 without being decoded whole);
multipart uploads whose parts become assets, each claimed exactly once."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from backports.zstd import ZstdCompressor
from backports.zstd import compress as zstd_compress
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from decisiond import compression
from decisiond.app import create_app
from decisiond.config import Settings
from decisiond.errors import ApiUsageError, RequestTooLarge, UnsupportedEncoding

from .conftest import fake_service

LIMIT = 64 * 1024
NOUL = {"type": "noul", "instructions": "Refund?"}
BODY = {
    "state": "billing true " * 200,
    "questions": {"q": NOUL, "team": {"type": "choice", "criteria": {"billing": None}}},
}
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "zstd": zstd_compress,
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "raw-deflate": lambda data: zlib.compress(data, wbits=-15),
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(max_wait_ms=0, max_body_bytes=LIMIT, max_images=2)
    app = create_app(settings, service=fake_service(settings, read_images=True))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


def _png(size: tuple[int, int] = (4, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


async def _post(client: httpx.AsyncClient, content: bytes, **headers: str) -> httpx.Response:
    headers.setdefault("content-type", "application/json")
    return await client.post("/v1/systemone", content=content, headers=headers)


@pytest.mark.parametrize("name", list(ENCODERS))
async def test_a_compressed_body_is_answered_exactly_as_the_plain_one(client: httpx.AsyncClient, name: str) -> None:
    raw = json.dumps(BODY).encode()
    plain = await _post(client, raw)
    encoding = "deflate" if name == "raw-deflate" else name
    packed = await _post(client, ENCODERS[name](raw), **{"content-encoding": encoding})
    assert plain.status_code == packed.status_code == 200, packed.text
    assert packed.json()["answers"] == plain.json()["answers"]


async def test_stacked_encodings_are_undone_last_first_and_identity_is_nothing(client: httpx.AsyncClient) -> None:
    raw = json.dumps(BODY).encode()
    resp = await _post(client, zstd_compress(gzip.compress(raw)), **{"content-encoding": "gzip, identity, ZSTD"})
    assert resp.status_code == 200, resp.text
    assert (await _post(client, raw, **{"content-encoding": "identity"})).status_code == 200


@pytest.mark.parametrize("encoding", ["br", "compress", "zstd, snappy"])
async def test_an_unknown_encoding_is_415(client: httpx.AsyncClient, encoding: str) -> None:
    resp = await _post(client, b"{}", **{"content-encoding": encoding})
    assert resp.status_code == 415
    assert resp.json()["detail"]["error_type"] == "api_usage_error"
    assert "x-request-id" in resp.headers


@pytest.mark.parametrize("name", ["zstd", "gzip", "deflate"])
async def test_corrupt_or_truncated_data_is_400_naming_the_encoding(client: httpx.AsyncClient, name: str) -> None:
    packed = ENCODERS[name](json.dumps(BODY).encode())
    for broken in (b"not " + packed, packed[: len(packed) // 2], packed + b"trailing"):
        resp = await _post(client, broken, **{"content-encoding": name})
        assert resp.status_code == 400, (broken[:8], resp.text)
        assert name in resp.json()["detail"]["message"]


def _zstd_bomb(mib: int) -> bytes:
    compressor = ZstdCompressor()
    chunk = b"\0" * (1 << 20)
    return b"".join(compressor.compress(chunk) for _ in range(mib)) + compressor.flush()


def _gzip_bomb(mib: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    return b"".join(compressor.compress(chunk) for _ in range(mib)) + compressor.flush()


@pytest.mark.parametrize(("name", "bomb", "mib"), [("zstd", _zstd_bomb, 512), ("gzip", _gzip_bomb, 48)])
def test_a_bomb_is_refused_after_at_most_the_limit_is_decoded(
    name: str, bomb: Callable[[int], bytes], mib: int
) -> None:
    """A bomb of 48 to 512 MiB (deflate's ratio is ~1000:1, zstd's far more) against a 64 KiB limit:
    refused, and decoding never holds much more than the limit."""
    packed = bomb(mib)
    assert len(packed) < LIMIT
    tracemalloc.start()
    try:
        with pytest.raises(RequestTooLarge, match="decompresses to more than the limit"):
            compression.decompress(packed, name, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * LIMIT + (1 << 20), peak


async def test_a_bomb_over_http_is_413(client: httpx.AsyncClient) -> None:
    resp = await _post(client, _zstd_bomb(64), **{"content-encoding": "zstd"})
    assert resp.status_code == 413
    assert resp.json()["detail"]["error_type"] == "request_too_large"


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=4096), name=st.sampled_from(["zstd", "gzip", "deflate"]))
def test_any_bytes_under_any_encoding_decode_or_get_a_4xx(data: bytes, name: str) -> None:
    try:
        compression.decompress(data, name, LIMIT)
    except (ApiUsageError, RequestTooLarge):
        pass


def test_encodings_reads_the_header() -> None:
    assert compression.encodings(None) == [] and compression.encodings(" Identity ") == []
    assert compression.encodings("gzip,zstd") == ["gzip", "zstd"]
    with pytest.raises(UnsupportedEncoding):
        compression.encodings("gzip, br")


def _multipart(request: dict[str, Any], parts: list[tuple[str, bytes, str]]) -> list[tuple[str, Any]]:
    files: list[tuple[str, Any]] = [("request", (None, json.dumps(request).encode(), "application/json"))]
    files += [(name, (name, data, content_type)) for name, data, content_type in parts]
    return files


async def _upload(client: httpx.AsyncClient, files: list[tuple[str, Any]], **headers: str) -> httpx.Response:
    request = client.build_request("POST", "/v1/systemone", files=files)
    body = request.read()
    if headers.get("content-encoding") == "zstd":
        body = zstd_compress(body)
    return await client.post(
        "/v1/systemone", content=body, headers={"content-type": request.headers["content-type"], **headers}
    )


def _photo_request(assets: dict[str, Any]) -> dict[str, Any]:
    return {"state": "<image:a> billing", "questions": {"q": NOUL}, "assets": assets}


async def test_a_multipart_upload_reads_each_part_as_its_asset(client: httpx.AsyncClient) -> None:
    png = _png()
    as_json = _photo_request(
        {"<image:a>": {"type": "image", "format": "png", "data_base64": base64.b64encode(png).decode()}}
    )
    expected = await client.post("/v1/systemone", json=as_json)
    assert expected.status_code == 200, expected.text
    files = _multipart(
        _photo_request({"<image:a>": {"type": "image", "part": "asset-0"}}), [("asset-0", png, "image/png")]
    )
    for headers in ({}, {"content-encoding": "zstd"}):
        resp = await _upload(client, files, **headers)
        assert resp.status_code == 200, resp.text
        assert resp.json()["answers"] == expected.json()["answers"]
        assert resp.json()["usage"] == expected.json()["usage"]  # the image was read: one token each


@pytest.mark.parametrize(
    ("assets", "parts", "message"),
    [
        ({"<image:a>": {"type": "image", "part": "asset-1"}}, [("asset-0", b"x", "image/png")], "does not hold"),
        (
            {"<image:a>": {"type": "image", "part": "asset-0"}},
            [("asset-0", b"x", "image/png"), ("asset-1", b"y", "image/png")],
            "not claimed",
        ),
        (
            {"<image:a>": {"type": "image", "part": "asset-0"}, "<image:b>": {"type": "image", "part": "asset-0"}},
            [("asset-0", b"x", "image/png")],
            "claimed by two",
        ),
        ({"<image:a>": {"type": "image", "part": 3}}, [("asset-0", b"x", "image/png")], "other than a string"),
        ({"<image:a>": {"type": "image", "part": "asset-0"}}, [("asset-0", b"x", "image/png")] * 2, "two parts"),
        ({"<image:a>": {"type": "image", "part": "asset-0"}}, [("asset-0", b"not an image", "image/png")], "image"),
        (
            {"<image:a>": {"type": "image", "part": "asset-0"}},
            [("asset-0", _png(), "image/jpeg")],
            "declared as jpeg but its data is PNG",
        ),
        ({}, [(f"asset-{i}", b"x", "image/png") for i in range(3)], "more than 3 parts"),
    ],
)
async def test_multipart_parts_are_claimed_exactly_once_and_checked_as_images(
    client: httpx.AsyncClient, assets: dict[str, Any], parts: list[tuple[str, bytes, str]], message: str
) -> None:
    resp = await _upload(client, _multipart(_photo_request(assets), parts))
    assert resp.status_code == 400, resp.text
    assert message in resp.json()["detail"]["message"]


async def test_a_malformed_multipart_body_is_400(client: httpx.AsyncClient) -> None:
    files = _multipart(
        _photo_request({"<image:a>": {"type": "image", "part": "asset-0"}}), [("asset-0", _png(), "image/png")]
    )
    request = client.build_request("POST", "/v1/systemone", files=files)
    body, content_type = request.read(), request.headers["content-type"]
    for broken, ctype in (
        (body[: len(body) // 2], content_type),  # no closing boundary
        (body, "multipart/form-data"),  # no boundary
        (body.replace(b'name="request"', b'name="req"'), content_type),  # first part is not the request
    ):
        resp = await client.post("/v1/systemone", content=broken, headers={"content-type": ctype})
        assert resp.status_code == 400, resp.text


async def test_a_request_part_that_is_not_json_is_the_usual_422(client: httpx.AsyncClient) -> None:
    files: list[tuple[str, Any]] = [("request", (None, b"{not json", "application/json"))]
    resp = await _upload(client, files)
    assert resp.status_code == 422
