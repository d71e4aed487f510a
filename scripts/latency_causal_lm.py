"""Latency of one triage request (3 questions) on a causal_lm model: decisiond vs pipeline("decision").

Runs in-process on this machine's CPU (or --device cuda), so no network time is counted:

    python scripts/latency_causal_lm.py                      # SmolLM2-135M (models/smollm2-135m.toml)
    python scripts/latency_causal_lm.py --repeats 50

decisiond is timed through its HTTP app (httpx ASGITransport: validation, rendering, engine, readout,
JSON), once with a new state every request (the prefix cache misses) and once with the same state
(it hits); the pipeline with the model and request decisiond converted and read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from decisiond.app import create_app  # noqa: E402
from decisiond.config import Settings, hf_offline_env  # noqa: E402
from decisiond.manifest import find_manifest  # noqa: E402

QUESTIONS: dict[str, Any] = {
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
}
STATE = "I was charged twice for one order and I need the duplicate refunded today."


def _summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000.0 for s in seconds)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{name:<42} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   (n={len(ms)})"


async def _measure(settings: Settings, model: str, repeats: int, device: str) -> dict[str, list[float]]:
    """Interleaved timings (one of each kind per round), so that load on a shared machine hits all alike."""
    import httpx
    from asgi_lifespan import LifespanManager
    from transformers import pipeline

    manifest = find_manifest(model, settings.models_dir)
    app = create_app(settings, manifests=[manifest])
    times: dict[str, list[float]] = {"cold": [], "warm": [], "pipeline": []}
    async with LifespanManager(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            while (await client.get("/health")).json()["status"] == "loading":
                await asyncio.sleep(0.1)
            checkpoint = app.state.runtime.service.models[0].backend.model.name_or_path
            pipe = pipeline("decision", model=str(checkpoint), device=device)
            for i in range(repeats + 2):
                rounds = {
                    "cold": {"state": f"{STATE} (order {i})", "questions": QUESTIONS},
                    "warm": {"state": STATE, "questions": QUESTIONS},
                }
                for kind, body in rounds.items():
                    started = time.perf_counter()
                    (await client.post("/v1/systemone", json=body)).raise_for_status()
                    if i >= 2:
                        times[kind].append(time.perf_counter() - started)
                started = time.perf_counter()
                pipe({"state": f"{STATE} (order {i})", "questions": QUESTIONS})
                if i >= 2:
                    times["pipeline"].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="model name or manifest path")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    hf_offline_env()
    import torch

    settings = Settings(models_dir=ROOT / "models", device=args.device, max_wait_ms=0)
    times = asyncio.run(_measure(settings, args.model, args.repeats, args.device))
    print(f"{args.model} on {args.device}, torch threads {torch.get_num_threads()}")  # noqa: T201
    print(_summary("decisiond HTTP, new state each request", times["cold"]))  # noqa: T201
    print(_summary("decisiond HTTP, same state (prefix cached)", times["warm"]))  # noqa: T201
    print(_summary('pipeline("decision"), new state each call', times["pipeline"]))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
