"""scripts/conformance.sh --key: jevcompat against a served MiniLM with an API key configured must
pass every MUST and every SHOULD, the auth SHOULDs (missing key, wrong key, Bearer) included."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_conformance_with_a_key_passes_every_must_and_should() -> None:
    if shutil.which("jevcompat") is None or shutil.which("decisiond") is None:
        pytest.fail("jevcompat and decisiond must be installed (pip install -e '.[test]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECISIOND_")} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "conformance.sh"), "--key", "conformance-key-9d2e"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    summary = re.search(r"MUST (\d+)/(\d+), SHOULD (\d+)/(\d+)", output)
    assert summary is not None, output[-3000:]
    must_ok, must_all, should_ok, should_all = map(int, summary.groups())
    assert must_ok == must_all and should_ok == should_all
    for requirement in ("auth.missing", "auth.invalid", "auth.bearer"):
        assert re.search(rf"✓ (MUST|SHOULD) +{re.escape(requirement)}\b", output), f"{requirement} not passed"
    assert "conformance-key-9d2e" not in output
