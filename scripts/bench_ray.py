"""``scripts/bench.py --ray``: requests/s through Ray Serve at 1 and 2 replicas next to the single process.

In one run, for one model and one workload (the same request bodies and closed-loop clients as
``bench.py``): ``decisiond serve`` (one process), then ``decisiond.ray`` on a local Ray instance
(``ray.init(num_cpus=<cores>)``) with 1 replica and with 2 replicas of the model, each replica
given ``cores / replicas`` CPUs (so Ray sets torch's threads to match). Server, Ray's proxy, the
ingress and the load generator share this machine's cores: on 2 cores, replicas divide the same
two cores, so what this shows is the cost of the extra hops (proxy → ingress → replica), not a
gain; replicas pay off when each has cores or a GPU of its own (docs/scaling.md).

Needs the ``ray`` extra (``pip install -e '.[ray]'``). Writes ``bench-ray.json`` and ``bench-ray.md``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench_load
import bench_servers


def _levels(port: int, workload: str, clients: list[int], seconds: float) -> list[dict[str, Any]]:
    requests, questions = bench_load.encode_requests(workload, 4000, offset=2_000_000)
    asyncio.run(bench_load.closed_loop(port, requests[:50], questions[:50], 2, min(2.0, seconds)))  # warm-up
    runs = []
    for i, n in enumerate(clients):
        offset = (i + 1) * 500
        result = asyncio.run(bench_load.closed_loop(port, requests[offset:] + requests[:offset], questions, n, seconds))
        runs.append(asdict(result))
    return runs


def run(model: str, workload: str, clients: list[int], seconds: float, replicas: list[int], out: Path) -> int:
    """Measure the single process, then each replica count; print and write the table."""
    import ray
    from ray import serve

    from decisiond.config import Settings
    from decisiond.manifest import find_manifest
    from decisiond.ray import build

    cores = os.cpu_count() or 1
    report: dict[str, Any] = {"model": model, "workload": workload, "cores": cores, "seconds": seconds, "runs": {}}
    port = bench_servers.free_port()
    print("single process: starting ...", flush=True)  # noqa: T201
    proc = bench_servers.start(bench_servers.decisiond_cmd(model, port), port)
    try:
        report["runs"]["single process"] = _levels(port, workload, clients, seconds)
    finally:
        proc.terminate()
        proc.wait(60)
    ray.init(num_cpus=cores, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    port = bench_servers.free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    settings = Settings(models_dir=bench_servers.ROOT / "models", log_level="warning", max_queue=1024)
    manifest = find_manifest(model, bench_servers.ROOT / "models")
    try:
        for n in replicas:
            print(f"ray, {n} replica(s): starting ...", flush=True)  # noqa: T201
            app = build(settings, [manifest], num_replicas=n, actor_options={"num_cpus": cores / n})
            serve.run(app, name="bench", route_prefix="/")
            report["runs"][f"ray, {n} replica(s)"] = _levels(port, workload, clients, seconds)
            serve.delete("bench", _blocking=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    text = table(report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-ray.json").write_text(json.dumps(report, indent=2))
    (out / "bench-ray.md").write_text(text + "\n")
    print(text)  # noqa: T201
    return 0


def table(report: dict[str, Any]) -> str:
    """A Markdown table: requests/s and p50/p95 per server and client count."""
    lines = [
        f"{report['model']}, {report['workload']}, {report['cores']} cores, {report['seconds']} s per level",
        "",
        "| server | clients | req/s | p50 ms | p95 ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, runs in report["runs"].items():
        for r in runs:
            lines.append(
                f"| {name} | {r['clients']} | {r['rps']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['errors']} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    started = time.perf_counter()
    run("minilm-l6", "triage", [1, 4, 16], 5.0, [1, 2], bench_servers.ROOT / "bench-out")
    print(f"total {time.perf_counter() - started:.0f} s")  # noqa: T201
