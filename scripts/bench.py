"""decisiond against the ceiling of the hardware and against what a user would write instead, in one run.

For one model and a realistic request mix, it measures:

1. the ceiling: the backend's raw forward throughput in this process, with no HTTP and no queue,
   at its best batch size (requests/s and tokens/s), caches as warm as a server's (slot texts
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

Usage:
    python scripts/bench.py                                   # minilm-l6, all workloads (~6 min)
    python scripts/bench.py --model smollm2-135m --workloads triage --clients 1 4 16
    python scripts/bench.py --ray --workloads triage --clients 1 4 16   # Ray Serve, 1 and 2 replicas
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
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

ROOT = Path(__file__).resolve().parent.parent

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


# ---------------------------------------------------------------- the ceiling, in-process


def measure_ceiling(model: str, workload: str, batches: Sequence[int], seconds: float) -> Ceiling:
    """Time ``backend.forward`` on fresh prepared requests at each batch size; keep the best."""
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
        return prepared

    backend.forward(fresh(max(batches)))  # warm-up: kernels, allocator, slot-text cache
    by_batch: dict[int, float] = {}
    tokens_per_s: dict[int, float] = {}
    forward_ms_1 = 0.0
    for size in batches:
        done = tokens = 0
        spent = 0.0
        times = []
        while spent < seconds:
            batch = fresh(size)  # outside the clock: the ceiling is the model, not tokenising
            started = time.perf_counter()
            backend.forward(batch)
            took = time.perf_counter() - started
            times.append(took)
            spent += took
            done += size
            tokens += sum(p.input_tokens for p in batch)
        by_batch[size] = done / spent
        tokens_per_s[size] = tokens / spent
        if size == 1:
            forward_ms_1 = statistics.median(times) * 1000.0
    served.engine.close()
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


def start(cmd: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    wait_ready(proc, port)
    return proc


def decisiond_cmd(model: str, port: int) -> list[str]:
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


async def closed_loop(
    port: int, requests: list[bytes], questions: list[int], clients: int, seconds: float
) -> LoadResult:
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
    elapsed = time.perf_counter() - began
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


def run_levels(port: int, workload: str, levels: Sequence[int], seconds: float, with_batches: bool) -> list[LoadResult]:
    requests, questions = encode_requests(workload, 4000, offset=1_000_000)
    asyncio.run(closed_loop(port, requests[:50], questions[:50], 2, min(2.0, seconds)))  # warm-up
    results = []
    for i, clients in enumerate(levels):
        before = engine_counts(port) if with_batches else None
        offset = (i + 1) * 500  # a new slice of states per level: no state repeats within a run
        result = asyncio.run(closed_loop(port, requests[offset:] + requests[:offset], questions, clients, seconds))
        after = engine_counts(port) if with_batches else None
        if before and after and after[0] > before[0]:
            result.mean_batch = (after[1] - before[1]) / (after[0] - before[0])
        results.append(result)
    return results


# ---------------------------------------------------------------- report


def table(model: str, machine: str, report: dict[str, Any]) -> str:
    lines = [f"model `{model}` on {machine}", ""]
    for workload, data in report["workloads"].items():
        c = data["ceiling"]
        lines += [
            f"### {workload}",
            "",
            f"ceiling: {c['rps']:.1f} requests/s ({c['tokens_per_s']:.0f} tokens/s) at batch {c['batch']}; "
            f"one forward at batch 1: {c['forward_ms_1']:.1f} ms",
            "",
            "| clients | decisiond req/s | questions/s | p50 ms | p95 ms | p99 ms | mean batch | baseline req/s "
            "| baseline p95 ms | server/ceiling | server/baseline |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        baseline = {r["clients"]: r for r in data.get("baseline", [])}
        for r in data["server"]:
            b = baseline.get(r["clients"])
            mean_batch = f"{r['mean_batch']:.1f}" if r["mean_batch"] else "-"
            lines.append(
                f"| {r['clients']} | {r['rps']:.1f} | {r['qps']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                f"{r['p99_ms']:.1f} | {mean_batch} | {b['rps'] if b else float('nan'):.1f} | "
                f"{b['p95_ms'] if b else float('nan'):.1f} | {r['rps'] / c['rps']:.2f} | "
                f"{(r['rps'] / b['rps']) if b and b['rps'] else float('nan'):.2f} |"
            )
        errors = sum(r["errors"] for r in data["server"])
        lines += ["", f"decisiond errors: {errors}", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    workloads = list(report["workloads"])
    fig, axes = plt.subplots(2, len(workloads), figsize=(5 * len(workloads), 7), squeeze=False)
    for col, workload in enumerate(workloads):
        data = report["workloads"][workload]
        for name, runs in (("decisiond", data["server"]), ("baseline", data.get("baseline", []))):
            if runs:
                x = [r["clients"] for r in runs]
                axes[0][col].plot(x, [r["rps"] for r in runs], marker="o", label=name)
                axes[1][col].plot(x, [r["p95_ms"] for r in runs], marker="o", label=name)
        axes[0][col].axhline(data["ceiling"]["rps"], linestyle="--", color="gray", label="ceiling")
        axes[0][col].set_title(f"{workload}: requests/s")
        axes[1][col].set_title(f"{workload}: p95 latency (ms)")
        for row in (0, 1):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_xlabel("concurrent clients")
            axes[row][col].legend()
    axes[1][0].set_yscale("log")
    fig.suptitle(f"decisiond bench: {report['model']} ({report['machine']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6", help="a model name from models/ (default minilm-l6)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--seconds", type=float, default=6.0, help="per concurrency level and server")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="ceiling batch sizes")
    parser.add_argument("--no-baseline", action="store_true", help="skip the per-request baseline")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument(
        "--ray", action="store_true", help="Ray Serve at 1 and 2 replicas next to the single process (bench_ray.py)"
    )
    args = parser.parse_args()
    if args.ray:
        import bench_ray

        return bench_ray.run(args.model, args.workloads[0], args.clients, args.seconds, [1, 2], args.out)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    report: dict[str, Any] = {"model": args.model, "machine": machine, "seconds": args.seconds, "workloads": {}}
    started = time.perf_counter()
    for workload in args.workloads:  # the ceiling first, with nothing else running
        print(f"ceiling: {workload} ...", flush=True)  # noqa: T201
        ceiling = measure_ceiling(args.model, workload, args.batches, max(1.0, args.seconds / 3))
        report["workloads"][workload] = {"ceiling": asdict(ceiling)}
    servers = [("server", decisiond_cmd)] + ([] if args.no_baseline else [("baseline", baseline_cmd)])
    for name, make_cmd in servers:
        port = free_port()
        print(f"{name}: starting ...", flush=True)  # noqa: T201
        proc = start(make_cmd(args.model, port), port)
        try:
            for workload in args.workloads:
                print(f"{name}: {workload} at {args.clients} clients ...", flush=True)  # noqa: T201
                runs = run_levels(port, workload, args.clients, args.seconds, with_batches=name == "server")
                report["workloads"][workload][name] = [asdict(r) for r in runs]
        finally:
            proc.terminate()
            proc.wait(60)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    text = table(args.model, machine, report)
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    (args.out / "bench.md").write_text(text + "\n")
    plotted = plot(report, args.out / "bench.png")
    print(text)  # noqa: T201
    print(f"wrote {args.out}/bench.json, bench.md" + (", bench.png" if plotted else " (no matplotlib: no plot)"))  # noqa: T201
    print(f"total {report['wall_s']:.0f} s")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
