"""What operators see (issue 14, item 14): replayed requests and 413s are labelled with their route
in metrics and the access log, and ``--log-format json`` writes nothing but JSON lines."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond import logs
from decisiond.app import create_app
from decisiond.backends.bi_encoder import load_encoder
from decisiond.cassette import CassetteWriter, new_entry
from decisiond.manifest import find_manifest

from .reliability_support import VALID, settings

ROOT = Path(__file__).resolve().parent.parent
ANSWER = b'{"model":"jev-up","answers":{},"usage":{"input_tokens":1,"output_tokens":0}}'


def test_replayed_requests_and_413s_are_counted_under_their_route(tmp_path: Path) -> None:
    """Bug: the replay middleware and the body limit answer before routing, so their responses were
    counted and logged as route="unmatched"."""
    cassette = tmp_path / "c.jsonl"
    CassetteWriter(cassette).append(new_entry("/v1/systemone", VALID, 200, "application/json", ANSWER))

    async def run() -> str:
        app = create_app(settings(replay=[cassette], max_body_bytes=2048))
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                assert (await client.post("/v1/systemone", json=VALID)).status_code == 200
                assert (await client.post("/v1/systemone", content=b" " * 4096)).status_code == 413
                assert (await client.get("/v1/models")).status_code == 200
                assert (await client.get("/nowhere")).status_code == 404
                return (await client.get("/metrics")).text

    text = asyncio.run(run())
    assert 'route="/v1/systemone",status="200"' in text
    assert 'route="/v1/systemone",status="413"' in text
    assert 'route="/v1/models",status="200"' in text
    assert 'route="unmatched",status="404"' in text


def test_json_logs_carry_no_progress_bars(capfd: pytest.CaptureFixture[str]) -> None:
    """Bug: with --log-format json, loading a model still wrote tqdm progress bars to stderr, which
    a JSON log collector cannot parse."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.configure("info", "json")
        load_encoder(find_manifest("minilm-l6", ROOT / "models").weights_path())
        logging.getLogger("decisiond.test").info("loaded")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = [line for line in capfd.readouterr().err.replace("\r", "\n").splitlines() if line.strip()]
    assert lines, "the log line itself must be there"
    for line in lines:
        json.loads(line)
