"""Resident memory of the default model over 10,000 requests with distinct states.

Loads the model in-process (no HTTP: the point is what the model, the engine and the caches keep),
answers the 3-question triage request about ``--requests`` distinct states, 64 at a time through
the engine, and prints the resident set size (RSS) after loading, after the first 1,000 requests
(caches warm) and at the end. It exits 1 when the RSS passes ``--limit-mib`` (1 GiB) or grows more
than ``--growth`` (10%) from the warm point to the end.

Usage: python scripts/memory_check.py [--model minilm-l6] [--requests 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a script, not the package: it may set its own environment

from decisiond.config import Settings  # noqa: E402
from decisiond.manifest import find_manifest  # noqa: E402
from decisiond.memory import release_free_memory  # noqa: E402
from decisiond.service import Service, load_model  # noqa: E402
from decisiond.testing.requests import TRIAGE_QUESTIONS as QUESTIONS  # noqa: E402
from decisiond.wire import DecisionRequest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def rss_mib() -> float:
    """This process's resident set size in MiB (Linux /proc), after giving freed heap memory back
    as the engine does once a second, so that a reading is what is held, not what is free."""
    release_free_memory()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


async def answer_all(service: Service, start: int, stop: int, concurrency: int = 64) -> None:
    for first in range(start, stop, concurrency):
        batch = [
            DecisionRequest.model_validate(
                {
                    "state": f"Ticket #{i}: I was charged {i % 7 + 2} times for order {i * 7919} and want a refund.",
                    "questions": QUESTIONS,
                }
            )
            for i in range(first, min(first + concurrency, stop))
        ]
        await asyncio.gather(*(service.decide(request) for request in batch))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--limit-mib", type=float, default=1024.0)
    parser.add_argument("--growth", type=float, default=0.10)
    args = parser.parse_args()
    settings = Settings(models_dir=ROOT / "models", max_wait_ms=1)
    service = Service([load_model(find_manifest(args.model, settings.models_dir), settings)], settings)
    loaded = rss_mib()
    warm_at = min(1000, args.requests)
    asyncio.run(answer_all(service, 0, warm_at))
    warm = rss_mib()
    trend = [(warm_at, warm)]
    step = max(1, (args.requests - warm_at) // 6)
    for start in range(warm_at, args.requests, step):
        stop = min(start + step, args.requests)
        asyncio.run(answer_all(service, start, stop))
        trend.append((stop, rss_mib()))
    end = trend[-1][1]
    service.close()
    growth = (end - warm) / warm
    print(  # noqa: T201
        f"{args.model}: RSS after load {loaded:.0f} MiB; "
        + ", ".join(f"{n} requests {mib:.0f} MiB" for n, mib in trend)
        + f" (growth {growth:+.1%} from {warm_at} requests)"
    )
    ok = end <= args.limit_mib and growth <= args.growth
    print("ok" if ok else f"FAIL: limit {args.limit_mib:.0f} MiB, growth {args.growth:.0%}")  # noqa: T201
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
