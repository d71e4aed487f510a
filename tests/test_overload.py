"""Back-pressure over HTTP: a full queue answers 529 with Retry-After at once (as the hosted service);
nothing is lost or doubled."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from decisiond.app import create_app
from decisiond.backends.fake import FakeBackend
from decisiond.config import Settings
from decisiond.service import ServedModel, Service, start_engine

from .conftest import GatedFake, fake_manifest

NOUL = {"type": "noul", "instructions": "Urgent?"}


def _app(settings: Settings, backend: FakeBackend) -> httpx.AsyncClient:
    service = Service([ServedModel(fake_manifest(), backend, start_engine(backend, settings))], settings)
    transport = httpx.ASGITransport(app=create_app(settings, service=service))
    return httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30)


async def test_full_queue_gets_529_with_retry_after_and_every_request_one_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = GatedFake()
    settings = Settings(max_wait_ms=0, max_queue=4)
    caplog.set_level(logging.INFO, logger="decisiond.access")
    async with _app(settings, backend) as client:

        async def send(i: int) -> httpx.Response:
            return await client.post(
                "/v1/systemone",
                json={"state": f"true {i}", "questions": {"q": NOUL}},
                headers={"x-request-id": f"r{i}"},
            )

        tasks = [asyncio.create_task(send(i)) for i in range(40)]
        for _ in range(200):  # until those that find the queue full have been refused
            await asyncio.sleep(0.05)
            if sum(t.done() for t in tasks) >= 32:
                break
        await asyncio.sleep(0.1)
        # refused at once, without waiting for the model: all but the running batch (at most the
        # four that were queued when the model thread woke) and at most four queued behind it
        assert sum(t.done() for t in tasks) >= 32
        backend.gate.set()
        responses = await asyncio.gather(*tasks)
    assert [r.headers["x-request-id"] for r in responses] == [f"r{i}" for i in range(40)]
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 529}
    assert 4 <= statuses.count(200) <= 8  # the queue filled; never more than the running batch + the queue
    for r in responses:
        if r.status_code == 529:
            assert r.headers["retry-after"]
            assert r.json()["detail"]["error_type"] == "overloaded_error"
        else:
            assert r.json()["answers"]["q"]["type"] == "noul"
    assert sum(backend.calls) == statuses.count(200)  # each admitted request computed exactly once
    lines = {r.fields["id"]: r.fields for r in caplog.records if r.name == "decisiond.access"}
    for r in responses:  # a 529's access line names the model, as an answer's does (it said null)
        assert lines[r.headers["x-request-id"]]["model"] == "fake-1", lines[r.headers["x-request-id"]]


async def test_a_request_that_waits_too_long_gets_529_and_is_not_computed() -> None:
    backend = GatedFake()
    settings = Settings(max_wait_ms=0, request_timeout_s=1.0)
    async with _app(settings, backend) as client:
        first = asyncio.create_task(client.post("/v1/systemone", json={"state": "a", "questions": {"q": NOUL}}))
        for _ in range(1000):  # until the model thread holds the first request (a busy machine may take a while)
            if backend.entered.is_set():
                break
            await asyncio.sleep(0.01)
        late = asyncio.create_task(client.post("/v1/systemone", json={"state": "b", "questions": {"q": NOUL}}))
        await asyncio.sleep(1.5)  # past the late request's 1 s in the queue
        backend.gate.set()
        assert (await first).status_code == 529  # its batch ran past the deadline, which runs from arrival
        refused = await late
        for _ in range(200):  # the first batch still finishes on the model thread; its answer is dropped
            if backend.calls:
                break
            await asyncio.sleep(0.01)
    assert refused.status_code == 529 and refused.headers["retry-after"]
    assert "waited" in refused.json()["detail"]["message"]
    assert backend.calls == [1]
