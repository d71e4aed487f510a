"""decisiond against the ceiling of the hardware and against what a user would write instead, in one run.

For one model and a realistic request mix, it measures:

1. the ceiling: the backend's raw forward throughput in this process, with no HTTP and no queue,
   at its best batch size and torch thread count (the server's policy and one per usable CPU;
   ``--ceiling-threads``), requests/s and tokens/s, caches as warm as a server's (slot texts
   cached; every state new, so no state or prefix cache hits);
2. decisiond over loopback at 1, 4, 16 and 64 concurrent closed-loop clients: requests/s,
   questions/s, p50/p95/p99 latency, mean batch size;
3. the baseline behind the same concurrency (``scripts/baseline_server.py``): for the default
   model, the same model called once per request with transformers, no cross-request batching
   and no caching; for a causal LM, transformers' own ``pipeline("decision")`` once per request;
4. the ratios server/ceiling and server/baseline at each concurrency.

Workloads (every request has a new state): ``triage`` (3 questions: a choice, a noul, a score),
``routing`` (one 10-option choice), ``long`` (the triage questions about a ~1,000-token state).
It prints a Markdown table and writes ``bench.json``, ``bench.md`` and ``bench.png`` (throughput
and p95 against concurrency; needs matplotlib, ``pip install -e '.[bench]'``) to ``--out``.

The load generator is a minimal HTTP/1.1 keep-alive client on asyncio streams with the request
bodies encoded up front: on two cores every CPU cycle the client spends is taken from the server
it measures, and httpx spends several times more per request.

With ``--contention K`` it also measures one client's latency beside K busy processes (pure-Python
spin loops started and stopped by the script, see ``scripts/contention.py``), in rounds that
alternate quiet and contended windows, and reports both columns and their ratio. ``--server
NAME=SPEC`` (repeatable) runs several decisiond variants side by side; each level is split into
``--rounds`` windows that take turns between the variants. A variant is another checkout's code
(``before=PYTHONPATH=/tmp/old/server``), flags (``t2=--threads 2``) or environment
(``spin=OMP_WAIT_POLICY=ACTIVE``). The load average before and after is recorded: on a shared
machine, compare only figures from one run.

Usage:
    python scripts/bench.py                                   # minilm-l6, all workloads (~6 min)
    python scripts/bench.py --workloads triage --clients 1 16 64 --contention 2 --no-baseline
    python scripts/bench.py --model smollm2-135m --workloads triage --clients 1 4 16
    python scripts/bench.py --ray --workloads triage --clients 1 4 16   # Ray Serve, 1 and 2 replicas
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a script, not the package: it may set its own environment
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
#: The servers' environment: the caller's, without the OpenMP setting this process makes for itself.
SERVER_ENV = dict(os.environ)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the server's policy (decisiond.threads), before torch loads

ROOT = Path(__file__).resolve().parent.parent

import contention  # noqa: E402  (scripts/contention.py, beside this file)
from bench_report import plot, table  # noqa: E402

from decisiond.testing.requests import TRIAGE_QUESTIONS  # noqa: E402

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


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(proc: subprocess.Popen[bytes], port: int, timeout_s: float = 600) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json().get("status") == "ok":
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the server on port {port} was not ready in {timeout_s:.0f} s")


def start(cmd: list[str], port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full_env = {**SERVER_ENV, **(env or {})}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=full_env)
    wait_ready(proc, port)
    return proc


@dataclass
class Variant:
    """One decisiond configuration under test: ``NAME=[VAR=value ...] [flags ...]``.

    ``before=PYTHONPATH=/tmp/old/server`` serves an older checkout's code; ``t2=--threads 2``
    passes a flag; ``spin=OMP_WAIT_POLICY=ACTIVE --threads 2`` sets the environment too.
    """

    name: str
    env: dict[str, str]
    args: list[str]

    @classmethod
    def parse(cls, spec: str) -> Variant:
        name, _, rest = spec.partition("=")
        env, args = {}, []
        for token in shlex.split(rest):
            key, eq, value = token.partition("=")
            if eq and key.isupper() and not key.startswith("-"):
                env[key] = value
            else:
                args.append(token)
        return cls(name or "decisiond", env, args)


def decisiond_cmd(model: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "decisiond.cli",
        "serve",
        "--model",
        model,
        "--port",
        str(port),
        "--models-dir",
        str(ROOT / "models"),
        "--log-level",
        "warning",
        "--max-queue",
        "1024",
        *extra,
    ]


def baseline_cmd(model: str, port: int) -> list[str]:
    cmd = [sys.executable, str(ROOT / "scripts" / "baseline_server.py")]
    if model == "minilm-l6":
        return [*cmd, "minilm", "--port", str(port)]
    return [*cmd, "pipeline", "--weights", str(causal_lm_folder(model)), "--port", str(port)]


def causal_lm_folder(model: str) -> Path:
    """The folder transformers reads the causal LM from (a GGUF is converted once, as decisiond does)."""
    from decisiond.backends.causal_lm.loading import converted_gguf
    from decisiond.config import Settings
    from decisiond.manifest import find_manifest

    settings = Settings(models_dir=ROOT / "models")
    manifest = find_manifest(model, settings.models_dir)
    path = manifest.weights_path()
    if manifest.weights.gguf_file:
        return converted_gguf(path, manifest.weights.gguf_file, settings.cache_dir)
    return path


def engine_counts(port: int) -> tuple[int, int] | None:
    import httpx

    try:
        models = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json().get("models", [])
        return int(models[0]["batches"]), int(models[0]["requests"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


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
    latencies.sort()
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
    return LoadResult(
        clients,
        len(latencies),
        errors,
        elapsed,
        len(latencies) / elapsed,
        asked / elapsed,
        statistics.median(latencies),
        cuts[94],
        cuts[98],
    )


def run_level(port: int, workload: str, clients: int, level: int, seconds: float, with_batches: bool) -> LoadResult:
    """One concurrency level against one server; level ``level`` uses its own slice of states."""
    requests, questions = encoded(workload)
    before = engine_counts(port) if with_batches else None
    offset = (level + 1) * 500  # a new slice of states per level: no state repeats within a run
    result = asyncio.run(closed_loop(port, requests[offset:] + requests[:offset], questions, clients, seconds))
    after = engine_counts(port) if with_batches else None
    if before and after and after[0] > before[0]:
        result.mean_batch = (after[1] - before[1]) / (after[0] - before[0])
    return result


def run_level_rounds(
    ports: dict[str, int], workload: str, clients: int, level: int, seconds: float, rounds: int
) -> dict[str, LoadResult]:
    """One concurrency level against every variant, in ``rounds`` windows of ``seconds / rounds``
    that take turns (variant A, B, ..., A, B, ...), so that a drift of the machine's own load falls
    on every variant alike; each variant's figures pool its windows."""
    requests, questions = encoded(workload)
    offset = (level + 1) * 500
    pooled: dict[str, list[Any]] = {name: [[], 0, 0, 0.0, 0, 0] for name in ports}
    for r in range(rounds):
        for name, port in ports.items():
            before = engine_counts(port)
            start_at = (offset + r * 131) % len(requests)
            latencies, errors, asked, elapsed = asyncio.run(
                drive(port, requests[start_at:] + requests[:start_at], questions, clients, seconds / rounds)
            )
            after = engine_counts(port)
            acc = pooled[name]
            acc[0] += latencies
            acc[1] += errors
            acc[2] += asked
            acc[3] += elapsed
            if before and after:
                acc[4] += after[0] - before[0]
                acc[5] += after[1] - before[1]
    results = {}
    for name, (latencies, errors, asked, elapsed, batches, served) in pooled.items():
        latencies.sort()
        cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
        results[name] = LoadResult(
            clients,
            len(latencies),
            errors,
            elapsed,
            len(latencies) / elapsed,
            asked / elapsed,
            statistics.median(latencies),
            cuts[94],
            cuts[98],
            served / batches if batches else None,
        )
    return results


_ENCODED: dict[str, tuple[list[bytes], list[int]]] = {}


def encoded(workload: str) -> tuple[list[bytes], list[int]]:
    if workload not in _ENCODED:
        _ENCODED[workload] = encode_requests(workload, 4000, offset=1_000_000)
    return _ENCODED[workload]


def warm_up(port: int, workload: str) -> None:
    requests, questions = encoded(workload)
    asyncio.run(closed_loop(port, requests[:50], questions[:50], 2, 2.0))


def run_levels(port: int, workload: str, levels: Sequence[int], seconds: float, with_batches: bool) -> list[LoadResult]:
    warm_up(port, workload)
    return [run_level(port, workload, c, i, seconds, with_batches) for i, c in enumerate(levels)]


def ceiling_threads() -> list[int]:
    """The server's automatic thread count, and one thread per usable CPU."""
    from decisiond.threads import choose, usable_cpus

    cpus = usable_cpus()
    return sorted({choose(cpus)[0], max(1, int(cpus))})


def one_client_runner(ports: dict[str, int], workload: str) -> Any:
    """A ``(variant, seconds) -> (latencies, errors)`` runner for :func:`contention.measure`."""
    requests, questions = encoded(workload)
    used = {name: 0 for name in ports}

    def run(name: str, seconds: float) -> tuple[list[float], int]:
        used[name] += 1
        offset = 2000 + used[name] * 97  # new states each window
        latencies, errors, _, _ = asyncio.run(
            drive(ports[name], requests[offset:] + requests[:offset], questions, 1, seconds)
        )
        return latencies, errors

    return run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6", help="a model name from models/ (default minilm-l6)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 4, 16, 64], help="none: skip the levels")
    parser.add_argument("--seconds", type=float, default=6.0, help="per concurrency level and server")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="ceiling batch sizes")
    parser.add_argument("--no-baseline", action="store_true", help="skip the per-request baseline")
    parser.add_argument(
        "--ceiling-threads",
        type=int,
        nargs="+",
        help="torch thread counts tried for the ceiling (default: the server's policy and every usable CPU)",
    )
    parser.add_argument(
        "--server",
        action="append",
        type=Variant.parse,
        help="a decisiond variant NAME=[VAR=value ...] [flags ...] (repeatable; default: one, as installed); "
        "variants are measured interleaved, level by level",
    )
    parser.add_argument(
        "--contention", type=int, default=0, metavar="K", help="also measure 1-client latency beside K busy processes"
    )
    parser.add_argument("--contention-seconds", type=float, default=4.0, help="per quiet or contended window")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="windows per level and variant (--seconds split among them), and rounds of quiet and contended windows",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument(
        "--ray", action="store_true", help="Ray Serve at 1 and 2 replicas next to the single process (bench_ray.py)"
    )
    return parser.parse_args()


def run_servers(args: argparse.Namespace, variants: list[Variant], report: dict[str, Any]) -> None:
    """Every variant at every level (interleaved level by level), then the contention rounds."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports = {}
        for v in variants:
            ports[v.name] = free_port()
            print(f"{v.name}: starting ...", flush=True)  # noqa: T201
            procs.append(start(decisiond_cmd(args.model, ports[v.name], v.args), ports[v.name], v.env))
        for workload in args.workloads:
            data = report["workloads"][workload]
            for v in variants:
                warm_up(ports[v.name], workload)
            for level, clients in enumerate(args.clients):
                print(f"{workload} at {clients} clients, {len(variants)} variants ...", flush=True)  # noqa: T201
                results = run_level_rounds(ports, workload, clients, level, args.seconds, args.rounds)
                for name, result in results.items():
                    data["servers"][name].append(asdict(result))
            if args.contention:
                print(f"contention: {workload}, {args.contention} busy processes ...", flush=True)  # noqa: T201
                runner = one_client_runner(ports, workload)
                data["contention"] = contention.measure(
                    [v.name for v in variants], runner, args.contention, args.contention_seconds, args.rounds
                )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)


def run_baseline(args: argparse.Namespace, report: dict[str, Any]) -> None:
    port = free_port()
    print("baseline: starting ...", flush=True)  # noqa: T201
    proc = start(baseline_cmd(args.model, port), port)
    try:
        for workload in args.workloads:
            print(f"baseline: {workload} at {args.clients} clients ...", flush=True)  # noqa: T201
            runs = run_levels(port, workload, args.clients, args.seconds, with_batches=False)
            report["workloads"][workload]["baseline"] = [asdict(r) for r in runs]
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> int:
    args = parse_args()
    if args.ray:
        import bench_ray

        return bench_ray.run(args.model, args.workloads[0], args.clients, args.seconds, [1, 2], args.out)
    variants: list[Variant] = args.server or [Variant("decisiond", {}, [])]

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    report: dict[str, Any] = {
        "model": args.model,
        "machine": machine,
        "seconds": args.seconds,
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "variants": {v.name: {"env": v.env, "args": v.args} for v in variants},
        "workloads": {},
    }
    started = time.perf_counter()
    for workload in args.workloads:  # the ceiling first, with nothing else running
        print(f"ceiling: {workload} ...", flush=True)  # noqa: T201
        ceiling = measure_ceiling(
            args.model, workload, args.batches, max(1.0, args.seconds / 3), args.ceiling_threads or ceiling_threads()
        )
        report["workloads"][workload] = {"ceiling": asdict(ceiling), "servers": {v.name: [] for v in variants}}
    run_servers(args, variants, report)
    if not args.no_baseline and args.clients:
        run_baseline(args, report)
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    report["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    text = table(args.model, machine, report) + f"\nload average after the run: {report['load_after']}\n"
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    (args.out / "bench.md").write_text(text + "\n")
    plotted = plot(report, args.out / "bench.png")
    print(text)  # noqa: T201
    print(f"wrote {args.out}/bench.json, bench.md" + (", bench.png" if plotted else " (no matplotlib: no plot)"))  # noqa: T201
    print(f"total {report['wall_s']:.0f} s")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
