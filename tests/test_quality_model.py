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

    negated = {**TRIAGE["questions"]["is_urgent"], "instructions": "Does the ticket not communicate time pressure?"}
    request = {**TRIAGE, "questions": {**TRIAGE["questions"], "is_not_urgent": negated}}
    settings = Settings(max_wait_ms=0, models_dir=MODELS)
    service = Service([load_model(find_manifest("qwen2.5-1.5b", MODELS), settings)], settings)
    try:
        import asyncio

        decision = asyncio.run(service.decide(DecisionRequest.model_validate(request)))
        again = asyncio.run(service.decide(DecisionRequest.model_validate(request)))
        caches = service.default.backend.cache_stats()
    finally:
        service.close()
    answers = decision.body["answers"]
    assert answers["department"]["choice"] == "billing"
    assert answers["is_urgent"]["noul"] > 0.5
    # the manifest's calibration offset and the negation rule together: still a complement (wire rounding)
    assert answers["is_urgent"]["noul"] + answers["is_not_urgent"]["noul"] == pytest.approx(1.0, abs=2e-4)
    # the choice's content-free reading was read once and reused
    assert caches["content_free"]["misses"] == 1 and caches["content_free"]["hits"] >= 1
    assert again.body["answers"]["department"] == answers["department"]
