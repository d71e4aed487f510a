"""Engine faults: out-of-memory splitting, failed batches, a dead model thread, timings."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import pytest
import torch

from decisiond.backends.base import Prepared, Work
from decisiond.backends.fake import FakeBackend
from decisiond.engine import Engine, is_out_of_memory
from decisiond.errors import InternalError, Overloaded
from decisiond.readout import Readout
from decisiond.render import Option, Question

from .reliability_support import VALID, fake_service, served_app, settings


class Fatal(BaseException):
    """Not an Exception: nothing in a batch handler may swallow it, so the model thread dies."""


class GatedBackend(FakeBackend):
    """A fake backend whose first forward waits for ``gate`` (so later requests queue into one batch)
    and that fails a batch as told by ``fault(batch)``."""

    def __init__(self, fault: str = "oom", fits: int = 2) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fault = fault
        self.fits = fits
        self.sizes: list[int] = []

    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        if not self.entered.is_set():
            self.entered.set()
            self.gate.wait(10)
        self.sizes.append(len(batch))
        states = [prepared.work.state for prepared in batch]
        if self.fault == "oom" and (len(batch) > self.fits or "huge" in states):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if self.fault == "error" and "poison" in states:
            raise ValueError("a backend bug")
        if self.fault == "fatal" and "poison" in states:
            raise Fatal("the model thread dies")
        return super().forward(batch)


QUESTION = (Question("choice", None, (Option("billing", None), Option("technical", None))),)


def _submit_while_blocked(backend: GatedBackend, states: list[str]) -> tuple[Engine, list[Future[Readout]]]:
    """Start an engine, hold its thread in a first forward, queue ``states``, then let it go."""
    engine = Engine(backend, max_wait_ms=0).start()
    first = engine.submit(backend.prepare(Work("warm", QUESTION)))
    assert backend.entered.wait(10)
    futures = [engine.submit(backend.prepare(Work(state, QUESTION))) for state in states]
    backend.gate.set()
    first.result(10)
    for future in futures:
        future.exception(10)
    return engine, futures


def test_out_of_memory_is_recognised() -> None:
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    assert not is_out_of_memory(ValueError("out of memory"))


def test_an_out_of_memory_batch_is_split_until_it_fits() -> None:
    backend = GatedBackend(fits=1)
    engine, futures = _submit_while_blocked(backend, ["billing", "technical", "billing billing", "x"])
    assert backend.sizes == [1, 4, 2, 1, 1, 2, 1, 1]
    winners = [future.result().winner[0] for future in futures]
    assert winners == [0, 1, 0, 0]
    assert engine.stats.out_of_memory == 3 and engine.stats.failed == 0
    engine.close()


def test_only_the_request_that_cannot_fit_alone_fails_with_503() -> None:
    backend = GatedBackend(fits=4)
    engine, futures = _submit_while_blocked(backend, ["billing", "huge", "technical", "billing"])
    assert backend.sizes == [1, 4, 2, 1, 1, 2]
    error = futures[1].exception()
    assert isinstance(error, Overloaded) and error.status == 503 and "memory" in error.message
    assert [futures[i].result().winner[0] for i in (0, 2, 3)] == [0, 1, 0]
    assert engine.stats.failed == 1
    engine.close()


def test_another_backend_error_fails_that_batch_only_and_the_next_batch_runs() -> None:
    backend = GatedBackend(fault="error")
    engine, futures = _submit_while_blocked(backend, ["poison", "billing"])
    for future in futures:
        error = future.exception()
        assert isinstance(error, InternalError) and error.status == 500
        assert "bug" not in error.message and "Traceback" not in error.message
    after = engine.submit(backend.prepare(Work("technical", QUESTION))).result(10)
    assert after.winner == [1]
    assert engine.alive and engine.stats.failed == 2
    engine.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_model_thread_fails_its_waiting_requests_and_refuses_new_ones() -> None:
    backend = GatedBackend(fault="fatal")
    engine, futures = _submit_while_blocked(backend, ["poison", "billing"])
    engine._thread.join(10)
    assert not engine.alive and isinstance(engine.error, Fatal)
    assert all(isinstance(future.exception(), InternalError) for future in futures)
    with pytest.raises(InternalError, match="model thread has stopped"):
        engine.submit(backend.prepare(Work("billing", QUESTION)))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_health_reports_a_dead_model_thread_with_503() -> None:
    backend = GatedBackend(fault="fatal")
    backend.entered.set()  # no gate: the first poisoned batch kills the thread

    async def run() -> tuple[int, dict[str, object], int, int]:
        async with served_app(settings(), backend) as (app, client):
            healthy = (await client.get("/health")).status_code
            killed = await client.post("/v1/systemone", json={**VALID, "state": "poison"})
            service = app.state.runtime.service
            service.default.engine._thread.join(10)
            health = await client.get("/health")
            return healthy, health.json(), health.status_code, killed.status_code

    healthy, body, status, killed = asyncio.run(run())
    assert healthy == 200 and killed == 500
    assert status == 503 and body["status"] == "error" and body["failed_models"] == ["fake-model"]


def test_a_ticket_carries_queue_and_model_time() -> None:
    backend = FakeBackend(delay_ms=20)
    engine = Engine(backend, max_wait_ms=0).start()
    ticket = engine.submit(backend.prepare(Work("billing", QUESTION)))
    ticket.result(10)
    assert ticket.model_ms >= 20.0 and ticket.queue_ms >= 0.0 and ticket.batch_size == 1
    engine.close()


def test_the_service_reports_prepare_queue_model_and_total_ms() -> None:
    service = fake_service(settings(), FakeBackend(delay_ms=5))
    from decisiond.wire import DecisionRequest

    decision = asyncio.run(service.decide(DecisionRequest.model_validate(VALID)))
    timings = decision.timings_ms
    assert list(timings) == ["prepare", "queue", "model", "total"]
    assert timings["model"] >= 5.0
    assert timings["total"] >= timings["prepare"] + timings["model"]
    service.close()
