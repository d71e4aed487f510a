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
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench_servers  # noqa: F401  (first: it sets the benchmark's environment before torch loads)
import contention  # scripts/contention.py, beside this file
from bench_load import WORKLOADS, LoadResult, ceiling_threads, closed_loop, drive, encoded, measure_ceiling
from bench_report import plot, table
from bench_servers import ROOT, Variant, baseline_cmd, decisiond_cmd, engine_counts, free_port, start

# ---------------------------------------------------------------- levels


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
        results[name] = LoadResult.of(clients, latencies, errors, asked, elapsed, served / batches if batches else None)
    return results


def warm_up(port: int, workload: str) -> None:
    requests, questions = encoded(workload)
    asyncio.run(closed_loop(port, requests[:50], questions[:50], 2, 2.0))


def run_levels(port: int, workload: str, levels: Sequence[int], seconds: float, with_batches: bool) -> list[LoadResult]:
    warm_up(port, workload)
    return [run_level(port, workload, c, i, seconds, with_batches) for i, c in enumerate(levels)]


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
