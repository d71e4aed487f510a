"""The example application's own test suite (examples/ticket_router) passes offline, as its
developers would run it: ``python -m pytest examples/ticket_router`` in a fresh process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT


@pytest.mark.slow
def test_the_ticket_router_suite_passes_on_replayed_and_scripted_answers() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "examples/ticket_router"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "15 passed" in done.stdout
