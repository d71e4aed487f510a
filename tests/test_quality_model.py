"""The quality model for real (opt-in: `DECISIOND_QUALITY_TESTS=1` and the weights of
`decisiond pull qwen2.5-1.5b` in the user cache; a 1.5B model on a CPU takes minutes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from decisiond.config import Settings, default_cache_dir
from decisiond.manifest import ManifestError, find_manifest
from decisiond.testing.requests import TRIAGE

MODELS = Path(__file__).resolve().parents[1] / "models"


def _weights_present() -> bool:
    try:
        find_manifest("qwen2.5-1.5b", MODELS).weights_path(default_cache_dir())
    except ManifestError:
        return False
    return True


pytestmark = [
    pytest.mark.quality,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("DECISIOND_QUALITY_TESTS") != "1" or not _weights_present(),
        reason="opt-in: set DECISIOND_QUALITY_TESTS=1 after `decisiond pull qwen2.5-1.5b`",
    ),
]


def test_qwen_answers_the_triage_request_sensibly() -> None:
    from decisiond.service import Service, load_model
    from decisiond.wire import DecisionRequest

    settings = Settings(max_wait_ms=0, models_dir=MODELS)
    service = Service([load_model(find_manifest("qwen2.5-1.5b", MODELS), settings)], settings)
    try:
        import asyncio

        decision = asyncio.run(service.decide(DecisionRequest.model_validate(TRIAGE)))
    finally:
        service.close()
    answers = decision.body["answers"]
    assert answers["department"]["choice"] == "billing"
    assert answers["is_urgent"]["noul"] > 0.5
