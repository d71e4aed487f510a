"""The bi-encoder tokenises on the model thread: one tokenizer call per micro-batch, limits per request."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from decisiond.backends.base import Prepared, Work
from decisiond.config import Settings
from decisiond.errors import MaxTokensExceeded
from decisiond.manifest import read_manifest
from decisiond.render import Option, Question
from decisiond.service import ServedModel, load_model
from decisiond.testing.tiny import tiny_manifest

QUESTIONS = (
    Question("choice", "Which team?", (Option("billing", "refunds"), Option("technical", None), Option("other", None))),
    Question("noul", "Is it urgent?", (Option("false", None), Option("true", "says today"))),
)
LONG = " ".join(f"word{i}" for i in range(200))


@pytest.fixture
def served(tmp_path: Path) -> Any:
    settings = Settings(device="cpu", dtype="float32", max_wait_ms=0, max_state_tokens=64)
    model = load_model(read_manifest(tiny_manifest("bi_encoder", tmp_path)), settings)
    yield model
    model.engine.close()


class _Counting:
    """The tokenizer, counting its calls and the texts of each."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.calls: list[int] = []
        self.threads: set[str] = set()

    def __call__(self, texts: list[str], **kwargs: Any) -> Any:
        self.calls.append(len(texts))
        self.threads.add(threading.current_thread().name)
        return self.tokenizer(texts, **kwargs)


def test_one_tokenizer_call_per_micro_batch_and_a_request_over_the_limit_fails_alone(served: ServedModel) -> None:
    """Before, every request was tokenised on its own request thread under a lock; now the model
    thread tokenises the batch's states and new slot texts in one call, and a request over the
    state budget fails with 400 max_tokens_exceeded without failing its batch."""
    backend: Any = served.backend
    counting = _Counting(backend.tokenizer)
    backend.tokenizer = counting
    gate, entered = threading.Event(), threading.Event()
    forward = backend.forward

    def gated(batch: Sequence[Prepared]) -> Any:
        entered.set()
        gate.wait(10)
        return forward(batch)

    backend.forward = gated
    first = served.engine.submit(backend.prepare(Work("warm up", QUESTIONS)))
    assert entered.wait(10)
    states = [f"charged twice for order {i}" for i in range(6)]
    states.insert(3, LONG)
    prepared = [backend.prepare(Work(state, QUESTIONS)) for state in states]
    assert all(p.input_tokens == 0 for p in prepared)  # nothing tokenised off the model thread
    futures = [served.engine.submit(p) for p in prepared]
    gate.set()
    first.result(30)
    with pytest.raises(MaxTokensExceeded, match="64"):
        futures[3].result(30)
    together = [f.result(30) for i, f in enumerate(futures) if i != 3]
    assert counting.calls == [1 + 5, len(states)]  # warm-up: its state and 5 slot texts; then 7 states
    assert counting.threads == {served.engine._thread.name}
    assert served.engine.stats.batches == 2
    assert all(p.input_tokens > 0 for i, p in enumerate(prepared) if i != 3)
    backend.forward = forward
    alone = [served.engine.submit(backend.prepare(Work(s, QUESTIONS))).result(30) for s in states if s != LONG]
    for got, expected in zip(together, alone, strict=True):
        assert got.winner == expected.winner
        for p, q in zip(got.probabilities, expected.probabilities, strict=True):
            assert max(abs(a - b) for a, b in zip(p, q, strict=True)) <= 1e-5


def test_forward_without_the_engine_still_tokenises_and_checks_limits(served: ServedModel) -> None:
    """Callers that run ``forward`` directly (the benchmark's ceiling, tests) get the same checks."""
    backend: Any = served.backend
    assert backend.forward([backend.prepare(Work("refund please", QUESTIONS))]).numel() == 5
    with pytest.raises(MaxTokensExceeded):
        backend.forward([backend.prepare(Work(LONG, QUESTIONS))])
