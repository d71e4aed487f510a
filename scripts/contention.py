"""Busy neighbours for ``scripts/bench.py --contention K``: latency beside K CPU-bound processes.

A busy process is a pure-Python spin loop (one core's worth of demand, like a test suite or a
second service) started by this module, bounded by its own deadline and killed when its window
ends, so nothing outlives the benchmark. One-client latency is measured in rounds that alternate
quiet and contended windows for every server variant, so slow drifts of the machine's own load
(other jobs on a shared machine) fall on both columns alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The neighbour: spin on the CPU until the deadline given as argv[1] (a time.time() value).
SPIN = "import sys, time\nend = float(sys.argv[1])\nx = 0\nwhile time.time() < end:\n    x += 1\n"


class BusyProcesses:
    """K spinning processes for at most ``limit_s`` seconds; a context manager that stops them.

    Args:
        count (int): processes to start (0: none).
        limit_s (float): each process exits by itself after this long, whatever happens here.
    """

    def __init__(self, count: int, limit_s: float) -> None:
        self.count = count
        self.limit_s = limit_s
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyProcesses:
        deadline = str(time.time() + self.limit_s)
        self.procs = [subprocess.Popen([sys.executable, "-c", SPIN, deadline]) for _ in range(self.count)]
        time.sleep(0.3)  # let them reach their loops before the clock starts
        return self

    def __exit__(self, *_: object) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)
        self.procs = []


@dataclass
class Window:
    """Latencies of one variant in one condition, over every round."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def summary(self) -> dict[str, float]:
        values = sorted(self.latencies_ms)
        if len(values) < 2:
            return {"requests": len(values), "p50_ms": float("nan"), "p90_ms": float("nan"), "errors": self.errors}
        cuts = statistics.quantiles(values, n=10)
        return {
            "requests": len(values),
            "p50_ms": statistics.median(values),
            "p90_ms": cuts[8],
            "errors": self.errors,
        }


def measure(
    variants: Sequence[str],
    one_client: Callable[[str, float], tuple[list[float], int]],
    busy: int,
    seconds: float,
    rounds: int,
) -> dict[str, Any]:
    """Quiet and contended 1-client latency of every variant, interleaved.

    Args:
        variants (Sequence[str]): server names; ``one_client(name, seconds)`` runs one closed-loop
            client against that server and returns its latencies (ms) and error count.
        busy (int): busy processes in the contended windows.
        seconds (float): length of each window.
        rounds (int): rounds of (quiet, contended) per variant, in the order
            round → variant → quiet, contended.

    Returns:
        dict: per variant, ``quiet`` and ``contended`` summaries (``p50_ms``, ``p90_ms``,
        ``requests``, ``errors``) and ``ratio_p50`` / ``ratio_p90`` (contended / quiet); plus the
        load average before and after.
    """
    windows = {name: {"quiet": Window(), "contended": Window()} for name in variants}
    load_before = os.getloadavg()
    for _ in range(rounds):
        for name in variants:
            for condition in ("quiet", "contended"):
                with BusyProcesses(busy if condition == "contended" else 0, seconds + 10):
                    latencies, errors = one_client(name, seconds)
                windows[name][condition].latencies_ms += latencies
                windows[name][condition].errors += errors
    result: dict[str, Any] = {"busy": busy, "seconds": seconds, "rounds": rounds, "variants": {}}
    for name in variants:
        quiet, contended = windows[name]["quiet"].summary(), windows[name]["contended"].summary()
        result["variants"][name] = {
            "quiet": quiet,
            "contended": contended,
            "ratio_p50": contended["p50_ms"] / quiet["p50_ms"],
            "ratio_p90": contended["p90_ms"] / quiet["p90_ms"],
        }
    result["load_before"] = [round(x, 2) for x in load_before]
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def table(result: dict[str, Any], workload: str) -> str:
    """The contention result as Markdown."""
    lines = [
        f"### contention: {workload}, 1 client, {result['busy']} busy processes "
        f"({result['rounds']} rounds of {result['seconds']:g} s each, quiet and contended interleaved)",
        "",
        f"load average before {result['load_before']}, after {result['load_after']}",
        "",
        "| server | quiet p50 ms | quiet p90 ms | contended p50 ms | contended p90 ms | p50 ratio | p90 ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in result["variants"].items():
        q, c = r["quiet"], r["contended"]
        lines.append(
            f"| {name} | {q['p50_ms']:.1f} | {q['p90_ms']:.1f} | {c['p50_ms']:.1f} | {c['p90_ms']:.1f} | "
            f"{r['ratio_p50']:.2f} | {r['ratio_p90']:.2f} |"
        )
    return "\n".join(lines) + "\n"
