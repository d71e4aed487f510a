"""The engine: micro-batches across requests, slices, failures that spare the next batch, refusals."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
import torch

from decisiond.backends.base import Prepared, Work
from decisiond.backends.fake import FakeBackend
from decisiond.engine import Engine
from decisiond.errors import InternalError, Overloaded
from decisiond.render import Option, Question

from .conftest import GatedFake

CHOICE = Question("choice", None, (Option("billing", None), Option("technical", None)))


def work(state: str) -> Work:
    return Work(state, (CHOICE,))


def test_requests_waiting_together_share_one_batch_and_get_their_own_slice() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0).start()
    first = engine.submit(backend.prepare(work("billing")))
    backend.entered.wait(5)
    futures = [engine.submit(backend.prepare(work(s))) for s in ("technical", "billing billing", "technical x")]
    backend.gate.set()
    assert first.result(5).winner == [0]
    assert [f.result(5).winner for f in futures] == [[1], [0], [1]]
    assert backend.calls == [1, 3]
    engine.close()


def test_token_budget_splits_micro_batches() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0, max_batch_tokens=8).start()
    engine.submit(backend.prepare(work("billing")))
    backend.entered.wait(5)
    futures = [engine.submit(backend.prepare(work("billing technical"))) for _ in range(4)]  # cost 4 each
    backend.gate.set()
    for f in futures:
        f.result(5)
    assert backend.calls == [1, 2, 2]
    engine.close()


def test_full_queue_is_refused_at_once() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0, max_queue=2).start()
    engine.submit(backend.prepare(work("a")))
    backend.entered.wait(5)
    engine.submit(backend.prepare(work("b")))
    engine.submit(backend.prepare(work("c")))
    with pytest.raises(Overloaded) as refused:
        engine.submit(backend.prepare(work("d")))
    assert refused.value.headers["Retry-After"] and refused.value.status == 529
    backend.gate.set()
    engine.close()


def test_a_failed_batch_fails_its_requests_only() -> None:
    class Flaky(FakeBackend):
        def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
            if any("boom" in str(p.work.state) for p in batch):
                raise RuntimeError("boom")
            return super().forward(batch)

    backend = Flaky()
    engine = Engine(backend, max_wait_ms=0).start()
    with pytest.raises(InternalError):
        engine.submit(backend.prepare(work("boom"))).result(5)
    assert engine.submit(backend.prepare(work("billing"))).result(5).winner == [0]
    assert engine.alive
    engine.close()


def test_requests_past_their_deadline_are_dropped_not_computed() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0, request_timeout_s=0.05).start()
    engine.submit(backend.prepare(work("a")))
    backend.entered.wait(5)
    late = engine.submit(backend.prepare(work("b")))
    threading.Event().wait(0.1)
    backend.gate.set()
    with pytest.raises(Overloaded):
        late.result(5)
    assert engine.stats.expired == 1
    assert backend.calls == [1]
    engine.close()


def test_cancelled_requests_are_not_computed() -> None:
    backend = GatedFake()
    engine = Engine(backend, max_wait_ms=0).start()
    engine.submit(backend.prepare(work("a")))
    backend.entered.wait(5)
    gone = engine.submit(backend.prepare(work("b")))
    kept = engine.submit(backend.prepare(work("technical")))
    assert gone.cancel()
    backend.gate.set()
    assert kept.result(5).winner == [1]
    assert backend.calls == [1, 1]
    engine.close()


def test_close_refuses_new_work() -> None:
    backend = FakeBackend()
    engine = Engine(backend).start()
    engine.close()
    with pytest.raises(Overloaded):
        engine.submit(backend.prepare(work("a")))


def test_a_lone_request_never_waits_for_the_gathering_window() -> None:
    backend = FakeBackend()
    engine = Engine(backend, max_wait_ms=5000).start()  # a window far longer than the test's patience
    for _ in range(3):
        assert engine.submit(backend.prepare(work("billing"))).result(2).winner == [0]
    engine.close()
