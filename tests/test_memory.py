"""Giving freed memory back: the engine trims the heap after batches, at most once per interval."""

from __future__ import annotations

import pytest

from decisiond import engine as engine_module
from decisiond.backends.base import Work
from decisiond.backends.fake import FakeBackend
from decisiond.engine import Engine
from decisiond.memory import release_free_memory
from decisiond.render import Option, Question


def test_release_free_memory_runs_on_glibc() -> None:
    assert release_free_memory() is True  # CI and the dev machines are glibc Linux


def test_the_engine_trims_at_most_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(engine_module, "release_free_memory", lambda: trims.append(1) or True)
    monkeypatch.setattr(engine_module, "TRIM_INTERVAL_S", 0.0)
    backend = FakeBackend()
    engine = Engine(backend, max_wait_ms=0).start()
    q = (Question("noul", "?", (Option("false", None), Option("true", None))),)
    for _ in range(3):
        engine.submit(backend.prepare(Work("true", q))).result(5)
    assert len(trims) == 3
    monkeypatch.setattr(engine_module, "TRIM_INTERVAL_S", 3600.0)
    for _ in range(3):
        engine.submit(backend.prepare(Work("true", q))).result(5)
    assert len(trims) == 3
    engine.close()
