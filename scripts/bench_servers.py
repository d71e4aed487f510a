"""The servers of ``scripts/bench.py``: their commands, environment, start and readiness, and variants.

Importing this module sets the benchmark's own environment (offline Hugging Face, the server's
OpenMP wait policy) before torch loads, and keeps the caller's environment, without that OpenMP
setting, for the servers it starts: import it before anything that loads torch.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a script, not the package: it may set its own environment
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
#: The servers' environment: the caller's, without the OpenMP setting this process makes for itself.
SERVER_ENV = dict(os.environ)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the server's policy (decisiond.threads), before torch loads

ROOT = Path(__file__).resolve().parent.parent


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
