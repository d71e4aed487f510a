"""jevcompat (the public conformance suite) against a real server on the default model."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_jevcompat_reports_every_must_and_should() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "conformance.sh"), "--models-dir", str(ROOT / "models")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "MUST 32/32, SHOULD 13/13" in done.stdout
