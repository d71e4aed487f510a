#!/usr/bin/env python3
"""Soak test: start decisiond on loopback, send a bounded mix of valid, invalid and oversized
requests, image-heavy requests and slow clients from many concurrent clients, and check that the
server answers every one, never with a 5xx other than 503 or 529, stays under a peak resident
memory, and does not grow in memory.

The mix: valid requests; invalid bodies (422/400); bodies over --max-body-bytes, declared and
streamed without a length (413); states over the token budget (400); image-heavy requests (two
2000x2000 PNGs, 8 M pixels: 400 from a text model, answered from an image model); slow clients that send half
their headers, or their headers and part of a body, and stall (408 from --header-timeout-s or
--body-timeout-s, which the soak sets to 2 s).

Usage (inside the project's .venv):
    python scripts/soak.py                       # 10,000 requests, 64 clients, the default model
    python scripts/soak.py --model fake.toml --requests 2000 --json soak.json

Pass criteria (exit 0): responses received == requests sent; no 5xx other than 503 and 529; peak
resident memory of the server under --max-rss-mib (default 1536); resident memory after the run
within 10% of before (measured after a warm-up round).
Loopback only: the server is started by this script on 127.0.0.1 and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

MAX_BODY = 64 * 1024
MAX_STATE_TOKENS = 1024
SLOW_TIMEOUT_S = 2.0

VALID = [
    {
        "state": "I was charged twice for one order and I need the duplicate refunded today.",
        "questions": {
            "team": {
                "type": "choice",
                "instructions": "Which team should handle this ticket?",
                "criteria": {
                    "billing": "Payments, invoicing, refunds",
                    "technical": None,
                    "other": "None of the above",
                },
            },
            "urgent": {"type": "noul", "instructions": "Does the ticket communicate time pressure?"},
            "mood": {
                "type": "score",
                "instructions": "How frustrated is the customer?",
                "criteria": ["Calm", "Concerned but civil", "Very angry"],
            },
        },
    },
    {
        "state": {"order": 1234, "status": "delayed", "note": "customer asked twice"},
        "questions": {"late": {"type": "noul", "criteria": {"true": "The order is late", "false": "On time"}}},
    },
    {
        "state": "The app crashes when I open settings.",
        "questions": {"team": {"type": "choice", "criteria": {"billing": None, "technical": "Bugs and crashes"}}},
    },
]
INVALID: list[Any] = [
    {"state": "x"},  # 422: no questions
    {"state": "x", "questions": {}},  # 422
    {"state": 5, "questions": {"q": {"type": "noul", "instructions": "x"}}},  # 422: a number state
    {"state": "x", "questions": {"q": {"type": "maybe"}}},  # 422: unknown type
    {"state": "x", "questions": {"": {"type": "noul", "instructions": "x"}}},  # 400: empty id
    {"state": "x", "questions": {"q": {"type": "noul"}}},  # 400: nothing to ask
    {"state": "x", "model": "no-such-model", "questions": {"q": {"type": "noul", "instructions": "x"}}},  # 400
    {"state": "[" * 200 + "]" * 200, "questions": {"q": {"type": "noul", "instructions": "x"}}},  # 200: a string
]
NOT_JSON = [b'{"state": "x", "questions": ', b"\xff\xfe", b'{"state": ' + b"[" * 5000 + b"]" * 5000 + b"}"]


@functools.lru_cache(maxsize=4)
def _png(side: int) -> str:
    """A ``side`` x ``side`` PNG as a data URL (a few KB on the wire, ``side``² pixels decoded)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (30, 90, 200)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _body(kind: str, rng: random.Random) -> bytes:
    if kind == "valid":
        return json.dumps(rng.choice(VALID)).encode()
    if kind == "invalid":
        return json.dumps(rng.choice(INVALID)).encode() if rng.random() < 0.7 else rng.choice(NOT_JSON)
    if kind in ("too_large", "too_large_streamed"):  # 413: over --max-body-bytes
        return json.dumps({"state": "a " * (MAX_BODY // 2 + 10), "questions": VALID[0]["questions"]}).encode()
    if kind == "images":  # image-heavy: two 2000x2000 PNGs (22 KB each, under the soak's body limit)
        return json.dumps({**VALID[2], "images": [_png(2000)] * 2}).encode()
    if kind in ("slow_headers", "slow_body"):
        return b""
    words = " ".join(["refund"] * (MAX_STATE_TOKENS + 200))  # 400 max_tokens_exceeded
    return json.dumps({"state": words, "questions": VALID[2]["questions"]}).encode()


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(model: str | None, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``decisiond serve`` on 127.0.0.1 with the soak's limits; waits until /health is ok."""
    command = [
        sys.executable,
        "-m",
        "decisiond.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-body-bytes",
        str(MAX_BODY),
        "--max-state-tokens",
        str(MAX_STATE_TOKENS),
        "--header-timeout-s",
        str(SLOW_TIMEOUT_S),
        "--body-timeout-s",
        str(SLOW_TIMEOUT_S),
        "--log-level",
        "warning",
    ]
    if model:
        command += ["--model", model]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("DECISIOND_API_KEYS", None)
    process = subprocess.Popen(command, env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}; see {log_path}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json().get("status") == "ok":
                return process
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.25)
    process.kill()
    raise RuntimeError("the server did not become ready within 300 s")


async def slow_client(port: int, kind: str) -> str:
    """A client that stalls: half its headers (``slow_headers``) or its headers and a tenth of its body
    (``slow_body``). Returns the status the server answered with, or ``closed``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /v1/systemone HTTP/1.1\r\nhost: soak\r\n")
        if kind == "slow_body":
            writer.write(b"content-type: application/json\r\ncontent-length: 1000\r\n\r\n" + b'{"state": "')
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(200), timeout=SLOW_TIMEOUT_S * 10)
    except (OSError, TimeoutError):
        answer = b""
    finally:
        writer.close()
    parts = answer.split(b" ", 2)
    return parts[1].decode() if len(parts) > 1 and answer.startswith(b"HTTP/1.1") else "closed"


async def _post(http: httpx.AsyncClient, kind: str, body: bytes) -> str:
    headers = {"content-type": "application/json"}
    if kind == "too_large_streamed":  # chunked, no content-length: the limit must count the stream

        async def chunks() -> Any:
            for start in range(0, len(body), 8192):
                yield body[start : start + 8192]

        response = await http.post("/v1/systemone", content=chunks(), headers=headers)
    else:
        response = await http.post("/v1/systemone", content=body, headers=headers)
    return str(response.status_code)


async def run_load(url: str, kinds: list[str], concurrency: int, deadline: float, seed: int) -> dict[str, Any]:
    """Send one request per entry of ``kinds`` from ``concurrency`` clients; record statuses and latency."""
    rng = random.Random(seed)
    bodies = [(kind, _body(kind, rng)) for kind in kinds]
    queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)
    statuses: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def client(http: httpx.AsyncClient) -> None:
        while not queue.empty() and time.monotonic() < deadline:
            kind, body = queue.get_nowait()
            started = time.perf_counter()
            try:
                if kind.startswith("slow_"):
                    status = await slow_client(int(url.rsplit(":", 1)[1]), kind)
                else:
                    status = await _post(http, kind, body)
            except httpx.HTTPError as exc:
                status = f"transport:{type(exc).__name__}"
                errors[status] += 1
            latencies.append((time.perf_counter() - started) * 1000.0)
            statuses[status] += 1
            by_kind.setdefault(kind, Counter())[status] += 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    latencies.sort()
    received = sum(n for s, n in statuses.items() if not s.startswith("transport") and s != "closed")
    return {
        "sent": len(latencies),
        "planned": len(kinds),
        "received": received,
        "statuses": dict(sorted(statuses.items())),
        "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())},
        "seconds": round(seconds, 1),
        "rps": round(len(latencies) / seconds, 1) if seconds else 0.0,
        "p50_ms": round(latencies[len(latencies) // 2], 1) if latencies else None,
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1) if latencies else None,
    }


KINDS = {
    "valid": 58,
    "invalid": 15,
    "too_large": 5,
    "too_large_streamed": 5,
    "too_many_tokens": 5,
    "images": 7,
    "slow_headers": 2.5,
    "slow_body": 2.5,
}


def mix(n: int, seed: int) -> list[str]:
    """``n`` request kinds drawn with the weights of :data:`KINDS` (percent)."""
    rng = random.Random(seed)
    return rng.choices(list(KINDS), weights=list(KINDS.values()), k=n)


class PeakRss:
    """Samples the server's resident memory every ``interval_s`` in a thread; ``peak`` is the most seen."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        self.pid, self.interval_s, self.peak = pid, interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (OSError, RuntimeError):
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    """Run the soak; print and optionally write the report; exit 1 when a criterion fails."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model name or manifest path (default: the server's default model)")
    parser.add_argument("--requests", type=int, default=10_000, help="requests to send (1..100000)")
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent clients (1..256)")
    parser.add_argument("--warmup", type=int, default=500, help="requests sent before memory is first measured")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="stop sending after this long")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--max-rss-mib", type=float, default=1536.0, help="peak resident memory allowed (MiB)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 100_000 or not 1 <= args.concurrency <= 256:
        parser.error("--requests must be 1..100000 and --concurrency 1..256")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"decisiond-soak-{port}.log"
    process = start_server(args.model, port, log_path)
    try:
        with PeakRss(process.pid) as peak:
            warm = asyncio.run(
                run_load(url, mix(args.warmup, args.seed + 1), args.concurrency, time.monotonic() + 300, args.seed + 1)
            )
            rss_before = rss_bytes(process.pid)
            deadline = time.monotonic() + args.max_seconds
            report = asyncio.run(run_load(url, mix(args.requests, args.seed), args.concurrency, deadline, args.seed))
            rss_after = rss_bytes(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            exit_code = process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            exit_code = process.wait()
    bad_5xx = {s: n for s, n in report["statuses"].items() if s.startswith("5") and s not in ("503", "529")}
    growth = (rss_after - rss_before) / rss_before
    report.update(
        model=args.model or "default",
        concurrency=args.concurrency,
        warmup={"requests": args.warmup, "statuses": warm["statuses"]},
        rss_before_mib=round(rss_before / 2**20, 1),
        rss_after_mib=round(rss_after / 2**20, 1),
        rss_growth_pct=round(growth * 100, 2),
        peak_rss_mib=round(peak.peak / 2**20, 1),
        bad_5xx=bad_5xx,
        server_exit_code=exit_code,
    )
    checks = {
        "every request answered": report["received"] == report["sent"] == report["planned"],
        "no 5xx other than 503 and 529": not bad_5xx,
        f"peak memory under {args.max_rss_mib:g} MiB": peak.peak < args.max_rss_mib * 2**20,
        "memory growth under 10%": growth < 0.10,
        "clean shutdown (exit 0)": exit_code == 0,
    }
    report["checks"] = checks
    text = json.dumps(report, indent=2)
    print(text)  # noqa: T201
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
