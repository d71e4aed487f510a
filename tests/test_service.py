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
