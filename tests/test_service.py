"""The service: model resolution and a client that leaves before its request ran."""

from __future__ import annotations

import asyncio

import pytest

from decisiond.backends.base import Work
from decisiond.engine import Engine
from decisiond.errors import ApiUsageError, ClientGone
from decisiond.render import Option, Question
from decisiond.service import wait_for_readout

from .conftest import GatedFake, fake_service


def test_resolve_names_aliases_and_refuses_unknown() -> None:
    service = fake_service()
    assert service.resolve(None).name == "fake-1"
    assert service.resolve("jev-latest").name == "fake-1"
    with pytest.raises(ApiUsageError, match="unknown model"):
        service.resolve("gpt-9")
    service.close()


async def test_a_client_that_disconnects_frees_its_place_and_is_not_computed() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0).start()
    q = (Question("noul", "?", (Option("false", None), Option("true", None))),)
    busy = engine.submit(backend.prepare(Work("true", q)))
    await asyncio.to_thread(backend.entered.wait, 5)
    leaving = engine.submit(backend.prepare(Work("false", q)))
    assert engine.queue_depth() == 1

    async def gone() -> bool:
        return True

    with pytest.raises(ClientGone):
        await wait_for_readout(leaving, gone)
    assert leaving.cancelled()
    backend.gate.set()
    await asyncio.wrap_future(busy)
    stayed = engine.submit(backend.prepare(Work("true", q)))
    await asyncio.wrap_future(stayed)
    assert backend.calls == [1, 1]  # the cancelled request never reached the model
    engine.close()


async def test_an_answer_arrives_while_the_client_stays_and_the_watch_is_cancelled() -> None:
    """The disconnect watch is one task awaiting the ASGI disconnect (it used to poll every 50 ms):
    when the answer comes first it is returned and the watch does not outlive the request."""
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0).start()
    q = (Question("noul", "?", (Option("false", None), Option("true", None))),)
    watching = asyncio.Event()
    stopped = asyncio.Event()

    async def stays() -> None:
        watching.set()
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    ticket = engine.submit(backend.prepare(Work("true", q)))
    waiting = asyncio.ensure_future(wait_for_readout(ticket, stays))
    await asyncio.wait_for(watching.wait(), 5)
    backend.gate.set()
    readout = await asyncio.wait_for(waiting, 10)
    assert readout.probabilities[0][1] > 0.5
    await asyncio.wait_for(stopped.wait(), 5)
    engine.close()
