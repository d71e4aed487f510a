"""Each tiny family checkpoint served over HTTP answers all three question types."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.config import Settings
from decisiond.manifest import find_manifest

REQUEST = {
    "state": {"ticket": "I was charged twice and need a refund today", "priority": "high"},
    "questions": {
        "urgent": {"type": "noul", "instructions": "is it urgent ?", "criteria": {"true": "deadline today"}},
        "team": {"type": "choice", "instructions": "which team", "criteria": {"billing": "refunds", "technical": None}},
        "anger": {"type": "score", "instructions": "how angry", "criteria": ["calm", "concerned", "very angry"]},
    },
}


async def decide(folder: Path, model: str | None = None) -> dict[str, object]:
    settings = Settings(model=[str(folder)], device="cpu", dtype="float32")
    app = create_app(settings, manifests=[find_manifest(str(folder), settings.models_dir)])
    async with LifespanManager(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            for _ in range(600):  # the model loads on a background thread
                health = (await client.get("/health")).json()
                if health["status"] != "loading":
                    break
                await asyncio.sleep(0.05)
            assert health["status"] == "ok", health
            response = await client.post("/v1/systemone", json=REQUEST | ({"model": model} if model else {}))
            assert response.status_code == 200, response.text
            return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ["kev", "kev_hybrid", "wev", "strands"])
def test_family_checkpoint_answers_over_http(name: str, checkpoints: dict[str, Path]) -> None:
    body = asyncio.run(decide(checkpoints[name]))
    assert body["model"] == checkpoints[name].name
    answers = body["answers"]
    assert 0.0 <= answers["urgent"]["noul"] <= 1.0
    team = answers["team"]["probabilities"]
    assert set(team) == {"billing", "technical"} and abs(sum(team.values()) - 1.0) < 1e-3
    assert answers["team"]["choice"] == max(team, key=team.get)
    anger = answers["anger"]["probabilities"]
    assert list(anger) == ["0", "1", "2"] and abs(sum(anger.values()) - 1.0) < 1e-3
    assert 0.0 <= answers["anger"]["score"] <= 2.0
    assert body["usage"]["input_tokens"] > 20


@pytest.mark.parametrize(
    "name,alias", [("kev", "kev-latest"), ("wev", "wev-latest"), ("strands", "strands-decider-latest")]
)
def test_the_family_default_name_reaches_the_checkpoint(name: str, alias: str, checkpoints: dict[str, Path]) -> None:
    """Regression: a request naming ``kev-latest`` (the default of Kev's own client) got a 400."""
    body = asyncio.run(decide(checkpoints[name], model=alias))
    assert body["model"] == checkpoints[name].name
