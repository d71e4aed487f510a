"""The load of ``scripts/bench.py``: the request bodies, the ceiling and the load generator.

The workloads' request bodies (every request has a new state); the ceiling, the backend's raw
forward throughput measured in this process; and the load generator, a minimal HTTP/1.1
keep-alive client on asyncio streams with the request bodies encoded up front.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_servers import ROOT  # first: it sets the benchmark's environment before torch loads

from decisiond.testing.requests import TRIAGE_QUESTIONS

ROUTING_QUESTIONS: dict[str, Any] = {
    "route": {
        "type": "choice",
        "instructions": "Which tool serves the request?",
        "criteria": {
            "search_web": "Look something up on the internet",
            "read_email": "Read the user's mail",
            "send_email": "Write and send an email",
            "calendar": "Check or change the user's calendar",
            "files": "Find or open the user's files",
            "weather": "Current weather and forecasts",
            "maps": "Directions, places and travel times",
            "calculator": "Arithmetic and unit conversions",
            "translate": "Translate text between languages",
            "none": "None of the above",
        },
    }
}
_TICKETS = [
    "I was charged twice for order {n} and I need the duplicate refunded today.",
    "The app crashes every time I open the settings page since update {n}.",
    "Can you tell me when order {n} will arrive? The tracking page is empty.",
    "I love the new dashboard, thanks! Small request: dark mode for report {n}.",
]
_ASKS = [
    "What's the weather in Lisbon tomorrow, trip {n}?",
    "Send Ana an email saying I'll be late to meeting {n}.",
    "How far is it from the station to hotel {n} by car?",
    "Open the spreadsheet named budget-{n}.",
]
_FILLER = (
    "Customer history: the account was opened years ago, has several past orders, a few support "
    "conversations about delivery times and one about a damaged parcel, all resolved politely. "
)


def triage_body(n: int) -> dict[str, Any]:
    return {"state": _TICKETS[n % len(_TICKETS)].format(n=n), "questions": TRIAGE_QUESTIONS}


def routing_body(n: int) -> dict[str, Any]:
    return {"state": _ASKS[n % len(_ASKS)].format(n=n), "questions": ROUTING_QUESTIONS}


def long_body(n: int) -> dict[str, Any]:
    # ~1,000 tokens: 25 filler paragraphs of ~40 tokens, then the ticket
    return {
        "state": f"Case {n}. " + _FILLER * 25 + _TICKETS[n % len(_TICKETS)].format(n=n),
        "questions": TRIAGE_QUESTIONS,
    }


WORKLOADS: dict[str, Callable[[int], dict[str, Any]]] = {
    "triage": triage_body,
    "routing": routing_body,
    "long": long_body,
}


@dataclass
class LoadResult:
    """One closed-loop run against one server at one concurrency."""

    clients: int
    requests: int
    errors: int
    seconds: float
    rps: float
    qps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float | None = None

    @classmethod
    def of(
        cls,
        clients: int,
        latencies: list[float],
        errors: int,
        asked: int,
        elapsed: float,
        mean_batch: float | None = None,
    ) -> LoadResult:
        """The figures of a run from its latencies (ms, any order), errors, questions asked and seconds."""
        latencies = sorted(latencies)
        cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
        return cls(
            clients,
            len(latencies),
            errors,
            elapsed,
            len(latencies) / elapsed,
            asked / elapsed,
            statistics.median(latencies),
            cuts[94],
            cuts[98],
            mean_batch,
        )


@dataclass
class Ceiling:
    """The backend's raw forward throughput at its best batch size."""

    batch: int
    rps: float
    tokens_per_s: float
    forward_ms_1: float
    by_batch: dict[int, float] = field(default_factory=dict)
    threads: int = 0  # torch intra-op threads of the best figure
    by_threads: dict[int, float] = field(default_factory=dict)  # best requests/s at each thread count


# ---------------------------------------------------------------- the ceiling, in-process


def measure_ceiling(
    model: str, workload: str, batches: Sequence[int], seconds: float, threads: Sequence[int]
) -> Ceiling:
    """Time ``backend.forward`` on fresh prepared, tokenised requests at each batch size and each
    torch thread count; keep the best (the hardware's ceiling, whatever the server's policy)."""
    import torch

    from decisiond.backends import Work
    from decisiond.config import Settings
    from decisiond.manifest import find_manifest
    from decisiond.render import to_questions
    from decisiond.service import load_model
    from decisiond.wire import DecisionRequest

    settings = Settings(models_dir=ROOT / "models", max_wait_ms=0)
    served = load_model(find_manifest(model, settings.models_dir), settings)
    backend = served.backend
    counter = iter(range(10_000_000, 20_000_000))

    def fresh(count: int) -> list[Any]:
        prepared = []
        for _ in range(count):
            request = DecisionRequest.model_validate(WORKLOADS[workload](next(counter)))
            prepared.append(backend.prepare(Work(request.state, to_questions(request))))
        backend.complete(prepared)  # tokenised here, outside the clock: the ceiling is the model
        return prepared

    backend.forward(fresh(max(batches)))  # warm-up: kernels, allocator, slot-text cache
    best: Ceiling | None = None
    by_threads: dict[int, float] = {}
    for count in threads:
        torch.set_num_threads(count)
        ceiling = _ceiling_at(backend.forward, fresh, batches, seconds)
        by_threads[count] = ceiling.rps
        if best is None or ceiling.rps > best.rps:
            best, ceiling.threads = ceiling, count
    served.engine.close()
    assert best is not None
    best.by_threads = by_threads
    return best


def _ceiling_at(
    forward: Callable[[list[Any]], Any], fresh: Callable[[int], list[Any]], batches: Sequence[int], seconds: float
) -> Ceiling:
    by_batch: dict[int, float] = {}
    tokens_per_s: dict[int, float] = {}
    forward_ms_1 = 0.0
    for size in batches:
        done = tokens = 0
        spent = 0.0
        times = []
        while spent < seconds:
            batch = fresh(size)
            started = time.perf_counter()
            forward(batch)
            took = time.perf_counter() - started
            times.append(took)
            spent += took
            done += size
            tokens += sum(p.input_tokens for p in batch)
        by_batch[size] = done / spent
        tokens_per_s[size] = tokens / spent
        if size == 1:
            forward_ms_1 = statistics.median(times) * 1000.0
    best = max(by_batch, key=lambda b: by_batch[b])
    return Ceiling(best, by_batch[best], tokens_per_s[best], forward_ms_1, by_batch)


def ceiling_threads() -> list[int]:
    """The server's automatic thread count, and one thread per usable CPU."""
    from decisiond.threads import choose, usable_cpus

    cpus = usable_cpus()
    return sorted({choose(cpus)[0], max(1, int(cpus))})


# ---------------------------------------------------------------- load


def encode_requests(workload: str, count: int, offset: int) -> tuple[list[bytes], list[int]]:
    """Whole HTTP/1.1 requests, encoded once, and each one's number of questions."""
    raw, questions = [], []
    for n in range(offset, offset + count):
        body = json.dumps(WORKLOADS[workload](n)).encode()
        head = (
            "POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        raw.append(head + body)
        questions.append(len(WORKLOADS[workload](n)["questions"]))
    return raw, questions


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def drive(
    port: int, requests: list[bytes], questions: list[int], clients: int, seconds: float
) -> tuple[list[float], int, int, float]:
    """``clients`` closed-loop keep-alive clients for ``seconds``: latencies (ms) of the 200s,
    errors, questions answered and elapsed seconds."""
    latencies: list[float] = []
    asked = errors = 0
    position = 0
    stop_at = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal position, asked, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < stop_at:
                i = position % len(requests)
                position += 1
                started = time.perf_counter()
                status = await _exchange(reader, writer, requests[i])
                if status != 200:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000.0)
                asked += questions[i]
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors, asked, time.perf_counter() - began


async def closed_loop(
    port: int, requests: list[bytes], questions: list[int], clients: int, seconds: float
) -> LoadResult:
    latencies, errors, asked, elapsed = await drive(port, requests, questions, clients, seconds)
    return LoadResult.of(clients, latencies, errors, asked, elapsed)


_ENCODED: dict[str, tuple[list[bytes], list[int]]] = {}


def encoded(workload: str) -> tuple[list[bytes], list[int]]:
    if workload not in _ENCODED:
        _ENCODED[workload] = encode_requests(workload, 4000, offset=1_000_000)
    return _ENCODED[workload]
