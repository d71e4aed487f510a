"""Latency and throughput of decisiond over loopback: the 3-question triage request at 1, 4, 16 clients.

Starts ``decisiond serve`` on a free port (or uses ``--url``), warms it up, then for each
concurrency runs closed-loop clients for ``--seconds`` and prints requests/s and p50/p95 latency
(ms). Not a test: figures depend on the machine.

Usage: python scripts/bench.py [--model minilm-l6] [--clients 1 4 16] [--seconds 10] [--json out.json]
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
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = {
    "state": "I was charged twice for one order and I need the duplicate refunded today.",
    "questions": {
        "department": {
            "type": "choice",
            "instructions": "Which team should handle this ticket?",
            "criteria": {"billing": "Payments, invoicing, refunds", "technical": None, "other": "None of the above"},
        },
        "is_urgent": {
            "type": "noul",
            "instructions": "Does the ticket communicate time pressure?",
            "criteria": {"true": "Names a deadline, or says now or today"},
        },
        "frustration": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Concerned but civil", "Very angry"],
        },
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "decisiond.cli", "serve", "--model", model, "--port", str(port),
           "--models-dir", str(ROOT / "models"), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"decisiond exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json().get("status") == "ok":
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("decisiond did not become ready in 300 s")


async def run_clients(url: str, body: dict[str, Any], clients: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def one_client() -> None:
            nonlocal errors
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                resp = await client.post("/v1/systemone", json=body)
                if resp.status_code != 200:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000.0)

        began = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies),
        "p95_ms": q[94],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--url", help="benchmark a running server instead of starting one")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    proc = None
    url = args.url
    if url is None:
        port = free_port()
        proc = start_server(args.model, port)
        url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(run_clients(url, TRIAGE, 1, 2.0))  # warm-up: caches, allocator, connections
        results = [asyncio.run(run_clients(url, TRIAGE, c, args.seconds)) for c in args.clients]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"model {args.model} on {machine}; triage request (3 questions); {args.seconds:g} s per row")  # noqa: T201
    print("| clients | requests/s | p50 ms | p95 ms | errors |")  # noqa: T201
    print("|---:|---:|---:|---:|---:|")  # noqa: T201
    for r in results:
        print(f"| {r['clients']} | {r['rps']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['errors']} |")  # noqa: T201
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "machine": machine, "results": results}, indent=2))


if __name__ == "__main__":
    main()
