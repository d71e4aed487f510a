"""Serving manifests by path: `--model PATH.toml`, `--model` repeated (the first is the default and
answers jev-latest; each request picks by name or alias), and missing weights failing at start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.cli import main
from decisiond.config import Settings
from decisiond.testing.tiny import tiny_manifest, write_manifest

QUESTION: dict[str, Any] = {
    "q": {"type": "choice", "instructions": "Which?", "criteria": {"a": "apples", "b": "bananas"}}
}


async def test_repeated_models_by_manifest_path(tmp_path: Path) -> None:
    first = tiny_manifest("cross_encoder", tmp_path, name="nli", aliases=["zero-shot"])
    second = tiny_manifest("bi_encoder", tmp_path, name="embed", aliases=["sim"])
    settings = Settings(model=[str(first), str(second)], models_dir=tmp_path / "unused", max_wait_ms=0)
    app = create_app(settings)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            for _ in range(300):  # the models load on a background thread
                health = (await client.get("/health")).json()
                if health["status"] != "loading":
                    break
                await asyncio.sleep(0.05)
            assert health["status"] == "ok" and health["model"] == "nli"
            assert [m["name"] for m in health["models"]] == ["nli", "embed"]

            async def answered_by(model: str | None) -> str:
                body: dict[str, Any] = {"state": "I like fruit.", "questions": QUESTION}
                if model is not None:
                    body["model"] = model
                response = await client.post("/v1/systemone", json=body)
                assert response.status_code == 200, response.text
                return str(response.json()["model"])

            assert [await answered_by(m) for m in (None, "jev-latest", "nli", "zero-shot")] == ["nli"] * 4
            assert [await answered_by(m) for m in ("embed", "sim")] == ["embed"] * 2
            unknown = await client.post("/v1/systemone", json={"model": "gpt", "state": "x", "questions": QUESTION})
            assert unknown.status_code == 400 and "embed" in unknown.json()["detail"]["message"]
            cards = (await client.get("/v1/models")).json()["models"]
            assert [(c["name"], c["backend"]) for c in cards] == [("nli", "cross_encoder"), ("embed", "bi_encoder")]


def test_a_missing_weights_folder_fails_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manifest = write_manifest(tmp_path / "gone.toml", name="gone", backend="cross_encoder", weights={"path": "ckpt"})
    assert main(["serve", "--model", str(manifest)]) == 2
    assert f"weights folder {tmp_path / 'ckpt'} does not exist" in caplog.text


def test_a_hub_id_missing_from_the_cache_fails_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from huggingface_hub import constants

    manifest = write_manifest(
        tmp_path / "hub.toml", name="hub", backend="cross_encoder", weights={"hub": "org/not-here"}
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
        assert main(["serve", "--model", str(manifest)]) == 2
    assert "org/not-here is not in the local Hugging Face cache" in caplog.text
    assert "hf download org/not-here" in caplog.text


@pytest.mark.slow
def test_the_command_exits_non_zero_with_the_message(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path / "gone.toml", name="gone", backend="clip", weights={"package": "no_such_clip_weights"}
    )
    done = subprocess.run(
        [sys.executable, "-m", "decisiond.cli", "serve", "--model", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        "the package no_such_clip_weights is not installed; install it with `pip install no-such-clip-weights`"
        in done.stderr
    )
